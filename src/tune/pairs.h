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

#include <stdbool.h>
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

/* A user range for generated inputs: name NULL applies to every input, a named one
 * (which must name an input) wins over it. Floats draw uniformly in [lo, hi];
 * integers draw the k with lo <= k < hi (ceil(lo) .. ceil(hi) - 1), which must be
 * nonempty and fit the dtype. */
typedef struct nr_input_range {
  const char *name;
  double lo, hi;
} nr_input_range;

/* Appends the pairs found in dir to set. The model is prepared here if it was not,
 * after nr_pairs_fix_shapes has given its free dimensions the first pair's shapes;
 * inputs whose shape or dtype differs from the model's are an error naming the file.
 * With test_data_set_N subfolders, each is one pair, in numeric order of N; otherwise
 * dir itself is one pair. Outputs are all given or all absent (then computed). A set
 * holds the pairs of one model. On error the set is left as it was (shapes fixed from
 * the first pair stay fixed). A pair's origin is the folder it came from. */
nr_status nr_pairs_load_dir(nr_model *m, const char *dir, nr_pair_set *set,
                            nr_error *err);
/* The folder holding dir's first pair: its test_data_set_N subfolder of lowest N, or
 * dir itself when it has none. *out is malloc'ed (the caller frees it). */
nr_status nr_pairs_first_folder(const char *dir, char **out, nr_error *err);
/* Gives the inputs the model leaves free (a dimension unknown, or the rank) the shape
 * they have in dir's first pair, so a model with x: [?,3,48,?] takes 1x3x48x320 from
 * its data instead of needing a shape. Only those inputs are read; each file must
 * agree with the model's dtype and with every dimension already fixed (declared, or
 * set by nr_model_set_input_shape, which therefore wins over the data), else the
 * error names the file and the input and the model is left as it was. Nothing to do
 * (NR_OK) when no dimension is free, so also on a prepared model. */
nr_status nr_pairs_fix_shapes(nr_model *m, const char *dir, nr_error *err);
/* Appends count generated pairs (seeded) to set, outputs from the reference executor.
 * Pair k of a seed is the same whatever count is; pair 0 of seed S has the inputs
 * the CLI's --seed S random inputs have (when no range or table applies). Origins
 * read "generated seed S #k". On error the set is left as it was. */
nr_status nr_pairs_generate(nr_model *m, int count, uint64_t seed,
                            const nr_input_range *ranges, int n_ranges,
                            nr_pair_set *set, nr_error *err);
/* 64-bit hash (FNV-1a) of every input and output of the set: dtype, shape and bytes,
 * not origins (for the database: a resumed session must use the same data). */
uint64_t nr_pairs_hash(const nr_pair_set *set);
/* Whether pair i of a and pair j of b have equal inputs: the same count, and each
 * input the same dtype, shape and bytes (outputs and origins are not compared). */
bool nr_pair_inputs_equal(const nr_pair_set *a, int i, const nr_pair_set *b, int j);
/* Refuses (NR_ERR_INVALID_ARGUMENT) the first pair of `held` whose inputs equal those
 * of any pair of `used` (compared by a content hash, then byte for byte); the message
 * names both pairs by their origins (folder or "generated seed S #k"), calling them
 * `held_what` and `used_what` ("holdout pair", "reference pair"). NR_OK when the
 * sets share no inputs. */
nr_status nr_pairs_check_disjoint(const nr_pair_set *held, const char *held_what,
                                  const nr_pair_set *used, const char *used_what,
                                  nr_error *err);
void nr_pair_set_free(nr_pair_set *set);

/* Calibrates on the inputs of set (outputs unused). */
nr_status nr_calibration_from_pairs(nr_model *m, const nr_pair_set *set,
                                    nr_calibration **out, nr_error *err);
/* Calibration from a user's spec: a table file (nr_calibration_save), a directory of
 * input sets in a layout nr_pairs_load_dir reads, or random:N (N generated sets, a
 * fixed seed different from the tuner's reference pairs). */
nr_status nr_calibration_from_spec(nr_model *m, const char *spec, nr_calibration **out,
                                   nr_error *err);
/* The input sets a calibration spec names, appended to set: a directory's pairs, or
 * random:N's generated ones (what nr_calibration_from_spec calibrates on). A table
 * file holds none: set is left empty and *is_table set (it is cleared otherwise). */
nr_status nr_calibration_inputs(nr_model *m, const char *spec, nr_pair_set *set,
                                bool *is_table, nr_error *err);

#endif
