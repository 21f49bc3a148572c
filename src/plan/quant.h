/* quant.h - the int8 records of a build: the calibration table, the methods that turn a
 * tensor's statistics into a quantization range, and what int8 tactics ask at build
 * time.
 *
 * Calibration runs the reference executor (the oracle, not an engine whose choices
 * could bias the ranges) over calibration inputs and records, for every float tensor
 * of the prepared model graph, its min, max and a histogram of |x|. The histogram has
 * a fixed number of bins over [0, hist_max); when a larger |x| arrives, hist_max
 * doubles and neighbouring bins merge, so one pass suffices and the result does not
 * depend on the order of the inputs' maxima more than a bin width. The method knob
 * (quant.calibration) is applied only when a tactic asks, so one table serves every
 * route and is stored once in the engine and the tuning database.
 *
 * Tensors are named as in the prepared model graph; fusion keeps the names of the
 * tensors a fused node reads, so a tactic looks up its input slot's name. A node the
 * QDQ pass produced from a pre-quantized model carries its own activation scale and
 * zero point (node attributes nr_x_scale / nr_x_zero_point), which win over the
 * table. */
#ifndef NR_PLAN_QUANT_H
#define NR_PLAN_QUANT_H

#include "plan/tactic.h"

#include <stddef.h>
#include <stdint.h>

/* real = scale * (q - zero_point) */
typedef struct nr_qparams {
  float scale;
  int32_t zero_point;
} nr_qparams;

typedef enum nr_calib_method {
  NR_CALIB_MINMAX = 0,     /* [min, max] of everything seen */
  NR_CALIB_PERCENTILE = 1, /* clip |x| at its 99.99th percentile */
  NR_CALIB_ENTROPY = 2,    /* clip where the KL divergence of the clipped, quantized
                              distribution from the original is least (TensorRT's
                              entropy calibration) */
} nr_calib_method;

#define NR_CALIB_BINS 2048

typedef struct nr_calib_tensor {
  char *name;
  float min, max;
  float hist_max;               /* bins cover |x| in [0, hist_max) */
  uint64_t hist[NR_CALIB_BINS];
} nr_calib_tensor;

/* The public nr_calibration. */
typedef struct nr_calibration {
  nr_calib_tensor *t;
  int n, cap;
  int samples;                  /* calibration inputs seen */
} nr_calib;

void nr_calib_destroy(nr_calib *c);
/* Adds the values of one tensor from one run to its entry (created on first sight). */
nr_status nr_calib_observe(nr_calib *c, const char *name, const float *x, size_t n,
                           nr_error *err);
const nr_calib_tensor *nr_calib_find(const nr_calib *c, const char *name);
/* The range [*lo, *hi] (always containing 0) method m chooses for t. */
void nr_calib_range(const nr_calib_tensor *t, nr_calib_method m, float *lo, float *hi);
/* Asymmetric parameters for [lo, hi] (contains 0) on the integer grid [0, qmax]. */
nr_qparams nr_qparams_asym(float lo, float hi, int qmax);

/* The byte form stored in engines and in the tuning database: a little-endian
 * record per tensor, checked field by field when read back. */
nr_status nr_calib_serialize(const nr_calib *c, uint8_t **out, size_t *len, nr_error *err);
nr_status nr_calib_deserialize(const uint8_t *data, size_t len, nr_calib **out,
                               nr_error *err);
/* SHA-256 of the serialized table as 64 hex digits (engine fingerprints, tuning DB). */
nr_status nr_calib_digest(const nr_calib *c, char hex[65], nr_error *err);

/* For an int8 tactic's prepare(): the unsigned quantization of the step's input i (an
 * activation) on [0, qmax] (255, or 127 for kernels that must keep pairwise products
 * inside int16). Uses the node's QDQ attributes when present, else the calibration
 * table under the route's quant.calibration method. Fails, naming the node and
 * tensor, when the build has no calibration data for it. */
nr_status nr_quant_act_params(const nr_tactic_ctx *c, int i, int qmax, nr_qparams *q);

#endif
