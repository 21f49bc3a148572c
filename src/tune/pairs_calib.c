/* pairs_calib.c - calibration data for the tuner's int8 candidates (pairs.h): the
 * reference pairs' inputs, or the input sets a --calibration spec names.
 *
 * A spec's input sets are read as pairs (a folder in any layout nr_pairs_load_dir
 * reads, or random:N generated with a seed of their own), and nr_calibration_inputs
 * hands them out before anything is calibrated, so the tuner can refuse samples that
 * are holdout inputs; a table file holds no inputs and is taken as it is. */
#include "tune/pairs.h"

#include "api/nnroute_tools.h"
#include "util/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

nr_status nr_calibration_from_pairs(nr_model *m, const nr_pair_set *set,
                                    nr_calibration **out, nr_error *err) {
  nr_buffer *all = calloc((size_t)set->n * (size_t)set->n_inputs + 1, sizeof *all);
  if (!all)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  for (int k = 0; k < set->n; k++)
    memcpy(all + (size_t)k * (size_t)set->n_inputs, set->pairs[k].inputs,
           sizeof *all * (size_t)set->n_inputs);
  nr_status st = nr_calibration_collect(m, set->n, all, out, err);
  free(all);
  return st;
}

nr_status nr_calibration_inputs(nr_model *m, const char *spec, nr_pair_set *set,
                                bool *is_table, nr_error *err) {
  struct stat sb;
  *is_table = false;
  if (!strncmp(spec, "random:", 7)) {
    char *end;
    long n = strtol(spec + 7, &end, 10);
    if (*end || n < 1 || n > 4096)
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                       "calibration '%s': random:N needs 1 <= N <= 4096", spec);
    return nr_pairs_generate(m, (int)n, 0xca11b, NULL, 0, set, err);
  }
  if (stat(spec, &sb))
    return nr_errorf(err, NR_ERR_IO, "calibration '%s': %s", spec, strerror(errno));
  if (!S_ISDIR(sb.st_mode)) {
    *is_table = true;
    return NR_OK;
  }
  return nr_pairs_load_dir(m, spec, set, err);
}

nr_status nr_calibration_from_spec(nr_model *m, const char *spec, nr_calibration **out,
                                   nr_error *err) {
  *out = NULL;
  nr_pair_set set = {0};
  bool table = false;
  nr_status st = nr_calibration_inputs(m, spec, &set, &table, err);
  if (!st)
    st = table ? nr_calibration_load(spec, out, err)
               : nr_calibration_from_pairs(m, &set, out, err);
  nr_pair_set_free(&set);
  return st;
}
