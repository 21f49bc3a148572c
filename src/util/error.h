/* error.h - the status codes and rich error messages used inside the library.
 *
 * Every fallible internal function returns an nr_status and, on failure, fills an
 * nr_error with a message that names what is at fault (node, tensor, file offset).
 * nr_errorf() returns the status it records so that callers can write
 * `return nr_errorf(err, NR_ERR_SHAPE, "...")`. A NULL err is allowed and simply drops
 * the message. The library never aborts on bad input; only the CLI turns a status into
 * an exit code. */
#ifndef NR_UTIL_ERROR_H
#define NR_UTIL_ERROR_H

#include "nnroute.h"

#include <stdarg.h>

#if defined(__GNUC__)
#define NR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define NR_PRINTF(a, b)
#endif

nr_status nr_errorf(nr_error *err, nr_status status, const char *fmt, ...) NR_PRINTF(3, 4);
nr_status nr_verrorf(nr_error *err, nr_status status, const char *fmt, va_list ap);
/* Prepend context ("node 'conv1' (Conv): ") to an error already recorded. */
nr_status nr_error_prefix(nr_error *err, const char *fmt, ...) NR_PRINTF(2, 3);
void nr_error_clear(nr_error *err);

#endif
