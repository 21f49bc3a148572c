/* fuzz_util.h - what the libFuzzer harnesses share: running an engine once on
 * zero-filled inputs, with every size the harness asks for capped.
 *
 * Key decision: the caps are the harness's, not the library's. A fuzzed model may
 * legitimately ask for a 10 GiB input; refusing it here keeps one execution within
 * libFuzzer's memory and time limits, while the library's own checks (max_bytes,
 * the loader's length checks) are what is under test. Header-only: each harness is
 * one translation unit. */
#ifndef NR_FUZZ_UTIL_H
#define NR_FUZZ_UTIL_H

#include "nnroute.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Largest tensor and largest sum over a run's inputs or a prepared graph's tensors
 * that a harness lets through. */
#define FUZZ_MAX_TENSOR_BYTES ((size_t)4 << 20)
#define FUZZ_MAX_TOTAL_BYTES ((size_t)32 << 20)
#define FUZZ_MAX_IO 64

/* Bytes of a tensor description, or SIZE_MAX when a dim is unknown, negative or the
 * product overflows the cap. */
static inline size_t fuzz_info_bytes(nr_dtype dtype, int rank, const int64_t *dims) {
  size_t n = nr_dtype_size(dtype);
  if (!n || rank < 0 || rank > NR_MAX_RANK)
    return SIZE_MAX;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || (dims[i] && n > FUZZ_MAX_TOTAL_BYTES / (size_t)dims[i]))
      return SIZE_MAX;
    n *= (size_t)dims[i];
  }
  return n;
}

static inline void fuzz_free_buffers(nr_buffer *b, int n) {
  for (int i = 0; i < n; i++)
    nr_buffer_free(&b[i]);
}

/* Creates a one-thread context and runs e once on zeros; any status is fine, only a
 * crash, a leak or a hang is a finding. Engines whose inputs exceed the caps are not
 * run. */
static inline void fuzz_run_engine(const nr_engine *e) {
  int ni = nr_engine_input_count(e), no = nr_engine_output_count(e);
  if (ni < 0 || no < 0 || ni > FUZZ_MAX_IO || no > FUZZ_MAX_IO)
    return;
  nr_buffer in[FUZZ_MAX_IO], out[FUZZ_MAX_IO];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  size_t total = 0;
  for (int i = 0; i < ni; i++) {
    nr_io_info info;
    if (nr_engine_input_info(e, i, &info))
      goto done;
    size_t nb = fuzz_info_bytes(info.dtype, info.rank, info.dims);
    if (nb > FUZZ_MAX_TENSOR_BYTES || (total += nb) > FUZZ_MAX_TOTAL_BYTES)
      goto done;
    in[i].dtype = info.dtype;
    in[i].rank = info.rank;
    memcpy(in[i].dims, info.dims, sizeof info.dims);
    if (!(in[i].data = calloc(1, nb ? nb : 1)))
      goto done;
  }
  nr_context *ctx = NULL;
  if (!nr_context_create(e, 1, &ctx, NULL))
    nr_context_run(ctx, in, out, NULL);
  nr_context_destroy(ctx);
done:
  fuzz_free_buffers(in, ni);
  fuzz_free_buffers(out, no);
}

/* Every input dim that is unknown becomes 1; inputs over the caps stop the run. */
static inline int fuzz_fix_inputs(nr_model *m) {
  int n = nr_model_input_count(m);
  if (n < 0 || n > FUZZ_MAX_IO)
    return -1;
  for (int i = 0; i < n; i++) {
    nr_io_info info;
    if (nr_model_input_info(m, i, &info) || info.rank < 0 || info.rank > NR_MAX_RANK)
      return -1;
    for (int d = 0; d < info.rank; d++)
      if (info.dims[d] < 0)
        info.dims[d] = 1;
    if (fuzz_info_bytes(info.dtype, info.rank, info.dims) > FUZZ_MAX_TENSOR_BYTES)
      return -1;
    if (nr_model_set_input_shape(m, info.name, info.rank, info.dims, NULL))
      return -1;
  }
  return 0;
}

#endif
