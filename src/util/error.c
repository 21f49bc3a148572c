/* error.c - recording error messages and naming status codes (see error.h). */
#include "util/error.h"

#include <stdio.h>
#include <string.h>

nr_status nr_verrorf(nr_error *err, nr_status status, const char *fmt, va_list ap) {
  if (err) {
    err->status = status;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
  }
  return status;
}

nr_status nr_errorf(nr_error *err, nr_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nr_verrorf(err, status, fmt, ap);
  va_end(ap);
  return status;
}

nr_status nr_error_prefix(nr_error *err, const char *fmt, ...) {
  if (!err)
    return NR_ERR_INTERNAL;
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* The message moves right to make room; what passes the end is cut. */
  size_t cap = sizeof err->message - 1, np = strlen(prefix);
  size_t no = strnlen(err->message, cap);
  if (no > cap - np)
    no = cap - np;
  memmove(err->message + np, err->message, no);
  memcpy(err->message, prefix, np);
  err->message[np + no] = '\0';
  return err->status;
}

void nr_error_clear(nr_error *err) {
  if (err) {
    err->status = NR_OK;
    err->message[0] = '\0';
  }
}

const char *nr_status_str(nr_status status) {
  switch (status) {
  case NR_OK: return "ok";
  case NR_ERR_INVALID_ARGUMENT: return "invalid argument";
  case NR_ERR_INVALID_MODEL: return "invalid model";
  case NR_ERR_UNSUPPORTED: return "unsupported";
  case NR_ERR_SHAPE: return "shape error";
  case NR_ERR_IO: return "i/o error";
  case NR_ERR_NOMEM: return "out of memory";
  case NR_ERR_RUNTIME: return "runtime error";
  case NR_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}
