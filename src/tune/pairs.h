/* pairs.h - reference pairs: inputs and the outputs the reference executor (or the
 * user's data) says they must produce. The tuner judges accuracy on them.
 *
 * Pairs come from directories or are generated. A directory is either the ONNX
 * test-data layout (input_<i>.pb / output_<i>.pb, optionally inside test_data_set_*
 * subfolders, one pair per folder) or .npy files named after the graph's inputs and
 * outputs (file-safe names). Missing outputs are computed with the reference executor.
 * Generated inputs are seeded and drawn per dtype from sensible ranges: floats
 * uniform in [lo, hi] (default [-1, 1]), integers in [0, 16) unless an integer input
 * indexes a constant table (a Gather over an embedding), then in [0, rows), bools
 * 0/1; the user may override the range of any input. */
#ifndef NR_TUNE_PAIRS_H
#define NR_TUNE_PAIRS_H

#include "nnroute.h"

#include <stdint.h>

typedef struct nr_pair {
  nr_buffer *inputs;  /* nr_model_input_count() buffers, in model input order (owned) */
  nr_buffer *outputs; /* nr_model_output_count() buffers (owned) */
  char *origin;       /* "generated seed 7 #2" or the file/folder it came from (owned) */
} nr_pair;

typedef struct nr_pair_set {
  nr_pair *pairs;
  int n;
  int n_inputs, n_outputs;
} nr_pair_set;

/* A user range for generated inputs: name NULL applies to every input. */
typedef struct nr_input_range {
  const char *name;
  double lo, hi;
} nr_input_range;

/* Appends the pairs found in dir to set. The model must be prepared (shapes fixed);
 * inputs whose shape differs from the model's are an error naming the file. */
nr_status nr_pairs_load_dir(nr_model *m, const char *dir, nr_pair_set *set,
                            nr_error *err);
/* Appends count generated pairs (seeded) to set, outputs from the reference executor. */
nr_status nr_pairs_generate(nr_model *m, int count, uint64_t seed,
                            const nr_input_range *ranges, int n_ranges,
                            nr_pair_set *set, nr_error *err);
/* 64-bit hash of every input and output byte of the set (for the database: a resumed
 * session must use the same data). */
uint64_t nr_pairs_hash(const nr_pair_set *set);
void nr_pair_set_free(nr_pair_set *set);

#endif
