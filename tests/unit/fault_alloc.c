/* fault_alloc.c - the --wrap allocation hooks behind fault_alloc.h.
 *
 * Each __wrap_X counts the call and either fails it (returns NULL / ENOMEM) or
 * forwards to __real_X. Counters are atomic: the library's thread pool allocates on
 * its workers. When disarmed, every wrapper is one relaxed load and the real call. */
#include "fault_alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void __real_free(void *p);

static atomic_int armed;
static atomic_llong count, target, live;
static atomic_int injected;

void fault_alloc_arm(int64_t fail_at) {
  atomic_store(&count, 0);
  atomic_store(&live, 0);
  atomic_store(&injected, 0);
  atomic_store(&target, fail_at);
  atomic_store(&armed, 1);
}

void fault_alloc_disarm(int64_t *allocs, int64_t *live_out, int *failed) {
  atomic_store(&armed, 0);
  if (allocs)
    *allocs = atomic_load(&count);
  if (live_out)
    *live_out = atomic_load(&live);
  if (failed)
    *failed = atomic_load(&injected);
}

/* 1 when this allocation is the one to fail. */
static int should_fail(void) {
  if (!atomic_load_explicit(&armed, memory_order_relaxed))
    return 0;
  long long k = atomic_fetch_add(&count, 1) + 1;
  if (k != atomic_load(&target))
    return 0;
  atomic_store(&injected, 1);
  return 1;
}

static void *note(void *p) {
  if (p && atomic_load_explicit(&armed, memory_order_relaxed))
    atomic_fetch_add(&live, 1);
  return p;
}

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : note(__real_malloc(n)); }
void *__wrap_calloc(size_t n, size_t size) {
  return should_fail() ? NULL : note(__real_calloc(n, size));
}
void *__wrap_aligned_alloc(size_t align, size_t n) {
  return should_fail() ? NULL : note(__real_aligned_alloc(align, n));
}
char *__wrap_strdup(const char *s) { return should_fail() ? NULL : note(__real_strdup(s)); }
char *__wrap_strndup(const char *s, size_t n) {
  return should_fail() ? NULL : note(__real_strndup(s, n));
}

int __wrap_posix_memalign(void **p, size_t align, size_t n) {
  if (should_fail())
    return ENOMEM;
  int rc = __real_posix_memalign(p, align, n);
  if (!rc)
    note(*p);
  return rc;
}

/* realloc(NULL, n) is an allocation; growing a block keeps the live count. */
void *__wrap_realloc(void *p, size_t n) {
  if (should_fail())
    return NULL;
  void *q = __real_realloc(p, n);
  return p ? q : note(q);
}

void __wrap_free(void *p) {
  if (p && atomic_load_explicit(&armed, memory_order_relaxed))
    atomic_fetch_sub(&live, 1);
  __real_free(p);
}
