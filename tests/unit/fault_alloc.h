/* fault_alloc.h - allocation-failure injection for the unit tests, in the manner of
 * SQLite's test_malloc: arm it, and the N-th allocation from then on fails.
 *
 * Key decision: the hook is the linker's, not a wrapper the library calls. nr_unit is
 * linked with --wrap for malloc, calloc, realloc, aligned_alloc, posix_memalign,
 * strdup and strndup (tests/CMakeLists.txt), so every allocation the library's own
 * code makes, in every file, passes through fault_alloc.c without the library
 * carrying a test hook; allocations inside other libraries (protobuf-c, SQLite,
 * OpenBLAS, oneDNN) are not counted. While armed, it also counts live blocks, so a
 * failure path that leaks shows in the plain build too, not only under ASan. */
#ifndef NR_TESTS_FAULT_ALLOC_H
#define NR_TESTS_FAULT_ALLOC_H

#include <stdint.h>

/* Starts counting: the fail_at-th allocation from now fails (1-based; 0: none fails,
 * only count). Only that one fails: later ones succeed, as after a transient OOM. */
void fault_alloc_arm(int64_t fail_at);
/* Stops counting. *allocs receives how many allocations were made while armed,
 * *live how many blocks allocated while armed were not freed (frees of older blocks
 * count too, so only a balanced sequence reads 0), *failed whether the failure was
 * injected. Any pointer may be NULL. */
void fault_alloc_disarm(int64_t *allocs, int64_t *live, int *failed);

#endif
