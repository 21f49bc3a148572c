/* fuzz_npy.c - libFuzzer harness for the .npy reader (nr_npy_parse), the format
 * `nnroute run --inputs` and the tuner's reference data come in.
 *
 * Key decision: a tensor the reader accepts is written back and read again, so the
 * writer sees every shape and dtype the reader lets through, and the second read must
 * agree with the first (a disagreement aborts: that is a finding, not an error). */
#include "io/tensor_io.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  snprintf(path, sizeof path, "/tmp/nnroute-fuzz-npy-%d.npy", (int)getpid());
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nr_value v = {0}, back = {0};
  if (nr_npy_parse(data, size, "fuzz.npy", &v, NULL))
    return 0;
  if (v.dtype != NR_DTYPE_BFLOAT16 && !nr_npy_write(path, &v, NULL)) {
    if (nr_npy_read(path, &back, NULL) || back.dtype != v.dtype || back.rank != v.rank ||
        memcmp(back.data ? back.data : "", v.data ? v.data : "", nr_value_nbytes(&v)))
      abort(); /* what was written does not read back */
  }
  unlink(path);
  nr_value_free(&back);
  nr_value_free(&v);
  return 0;
}
