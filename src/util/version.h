/* version.h - what this build is: nr_version() (public, nnroute.h) and the hash of
 * the sources it was built from.
 *
 * Both strings come from a file cmake/nr_version.cmake writes at every build, so they
 * can never be typed by hand in two places. The sources hash changes with any edit
 * under src/, committed or not; the tuning database keys its environments on it, so
 * `--continue` never replays timings measured with other kernels. */
#ifndef NR_UTIL_VERSION_H
#define NR_UTIL_VERSION_H

#include <stddef.h>

/* 16 hex digits of the SHA-256 over every file under src/ (path and contents). */
const char *nr_version_sources(void);
/* "<nr_version()> sources <hash>": the version the tuning database records. */
const char *nr_version_full(void);

#endif
