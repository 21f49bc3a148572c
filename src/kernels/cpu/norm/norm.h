/* norm.h - row kernels of the normalization family: softmax / log-softmax over a
 * contiguous row, LayerNormalization over a contiguous row, and the plane sums of
 * GlobalAveragePool, each in a portable and an AVX2 version.
 *
 * Key decision: the reduction order is a parameter. reassoc = 0 sums sequentially in
 * double (the order and precision of the reference, so only rounding of the inputs
 * differs); reassoc = 1 keeps 8 partial sums in vector lanes (float for softmax and
 * means, double lanes for the one-pass sum of squares) - faster, reassociated. */
#ifndef NR_KERNELS_CPU_NORM_NORM_H
#define NR_KERNELS_CPU_NORM_NORM_H

#include "kernels/cpu/eltwise/vmath.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct nr_softmax_cfg {
  bool log;     /* LogSoftmax */
  bool online;  /* max and sum in one pass with rescaling */
  bool reassoc; /* vector partial sums */
  nr_vmath math;
} nr_softmax_cfg;

typedef struct nr_layernorm_cfg {
  bool one_pass; /* sum and sum of squares in one sweep */
  bool reassoc;
  float eps;
} nr_layernorm_cfg;

/* y = softmax(x) over n contiguous floats (n >= 1); x may equal y. */
void nr_f32_softmax_row__portable(const nr_softmax_cfg *c, const float *x, float *y,
                                  int64_t n);
void nr_f32_softmax_row__avx2(const nr_softmax_cfg *c, const float *x, float *y, int64_t n);
/* LayerNorm of `rows` consecutive rows of n floats: y = (x - mean) / sqrt(var + eps) *
 * scale + bias (bias may be NULL); the rows' means and inverse standard deviations go
 * to mean[] and inv[] when those are not NULL. Without reassoc, rows are summed
 * NR_SEQ_ROWS at a time (norm_seq.h), each in the reference's order. */
void nr_f32_layernorm_rows__portable(const nr_layernorm_cfg *c, const float *x,
                                     const float *scale, const float *bias, float *y,
                                     int64_t n, int64_t rows, float *mean, float *inv);
void nr_f32_layernorm_rows__avx2(const nr_layernorm_cfg *c, const float *x,
                                 const float *scale, const float *bias, float *y, int64_t n,
                                 int64_t rows, float *mean, float *inv);
/* Sum of n floats: sequential in double, or (reassoc) 8 float lanes. */
double nr_f32_sum__portable(const float *x, int64_t n, bool reassoc);
double nr_f32_sum__avx2(const float *x, int64_t n, bool reassoc);
/* out[r] = the sum of row r of `rows` consecutive rows of n floats, as nr_f32_sum__*
 * computes it (without reassoc several rows' sequential sums run side by side). */
void nr_f32_sum_rows__portable(const float *x, int64_t n, int64_t rows, bool reassoc,
                               double *out);
void nr_f32_sum_rows__avx2(const float *x, int64_t n, int64_t rows, bool reassoc,
                           double *out);

/* Per-channel normalization (tactics_chnorm.c): y = (x - m) * a + b over a plane of n
 * floats, the whole of a BatchNormalization in inference and the last sweep of an
 * Instance or Group normalization. x may equal y. */
void nr_f32_affine_row__portable(const float *x, float *y, int64_t n, float m, float a,
                                 float b);
void nr_f32_affine_row__avx2(const float *x, float *y, int64_t n, float m, float a, float b);

/* The same over `rows` channels-last rows of c floats, channel j with m[j], a[j],
 * b[j] (BatchNormalization in NHWC). */
void nr_f32_affine_rows__portable(const float *x, float *y, int64_t rows, int64_t c,
                                  const float *m, const float *a, const float *b);
void nr_f32_affine_rows__avx2(const float *x, float *y, int64_t rows, int64_t c,
                              const float *m, const float *a, const float *b);

/* GroupNormalization (InstanceNormalization: groups = C, per channel) of an N x C x S
 * tensor seen as N * groups rows of cpg * s floats: each row's mean and variance (in
 * double; sequential unless reassoc, as the layernorm kernels), then each of its cpg
 * channels scaled by scale[q] and shifted by bias[q], q the channel (per_channel) or
 * the group. The rows [r0, r0 + rows) of the whole tensor x / y. */
typedef struct nr_groupnorm_cfg {
  bool reassoc;
  bool per_channel;
  float eps;
  int64_t groups, cpg, s;
} nr_groupnorm_cfg;
/* The stored scale (inv * scale[q]) and shift of channel k of group row r. */
static inline void nr_groupnorm_coef(const nr_groupnorm_cfg *c, const float *scale,
                                     const float *bias, int64_t r, int64_t k, double inv,
                                     float *a, float *b) {
  int64_t g = r % c->groups, q = c->per_channel ? g * c->cpg + k : g;
  *a = (float)(inv * scale[q]);
  *b = bias[q];
}
void nr_f32_groupnorm_rows__portable(const nr_groupnorm_cfg *c, const float *x,
                                     const float *scale, const float *bias, float *y,
                                     int64_t r0, int64_t rows);
void nr_f32_groupnorm_rows__avx2(const nr_groupnorm_cfg *c, const float *x,
                                 const float *scale, const float *bias, float *y,
                                 int64_t r0, int64_t rows);

/* 2-D pooling over PLAIN NCHW planes (pool.c). */
typedef struct nr_pool2d {
  uint8_t max;       /* 1 MaxPool, 0 AveragePool */
  uint8_t count_pad; /* AveragePool count_include_pad */
  uint8_t pad[2];
  int32_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
} nr_pool2d;

/* Knob listing (tactics_norm.c): does a norm or pool tactic run node n, under the
 * default route, on more than one parallel chunk? (eltwise.threads lists it then.) */
struct nr_graph;
struct nr_node;
bool nr_norm_parallel(const struct nr_graph *g, const struct nr_node *n);

/* The window of 2-D MaxPool / AveragePool node n from X and Y dims [N, C, H, W],
 * resolved by the reference's nr_window code (tactics_norm.c); false when it is not
 * one these kernels run. Shared with the NHWC tactics (tactics_pool_nhwc.c). */
bool nr_pool2d_of_node(const struct nr_node *n, const int64_t *xdims, const int64_t *ydims,
                       nr_pool2d *p);

void nr_f32_pool2d__portable(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                             float *y, int64_t oh, int64_t ow);
/* The same with 8-wide reductions (pool__avx2.c), with the same NaN rule and no NaN
 * pre-scan: the windows nr_pool2d_in_registers() takes in registers, the others through
 * a row buffer; planes too wide for the buffer go to the portable kernel. */
void nr_f32_pool2d__avx2(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                         float *y, int64_t oh, int64_t ow);
/* Windows the AVX-512 kernel, and the AVX2 kernel's register path, run in registers:
 * 3 columns wide, dilation 1, column stride 1 or 2, left padding at most 2, at most 16
 * rows. Inline here so the tactics ask without calling code built for AVX-512. */
static inline bool nr_pool2d_in_registers(const nr_pool2d *p) {
  return p->kw == 3 && p->dw == 1 && (p->sw == 1 || p->sw == 2) && p->pl >= 0 &&
         p->pl <= 2 && p->kh >= 1 && p->kh <= 16;
}
/* Those windows 16 outputs at a time with no row buffer, the same bits as the AVX2
 * kernel; any other window runs the AVX2 kernel. */
void nr_f32_pool2d__avx512(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                           float *y, int64_t oh, int64_t ow);

#endif
