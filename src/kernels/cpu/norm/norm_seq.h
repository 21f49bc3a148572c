/* norm_seq.h - the reference-order double sums (reduce.reassoc=off) of several rows at
 * once, included by norm.c and norm__avx2.c (static inline: each file keeps its own
 * compiler flags, so each ISA's rounding stays what it was).
 *
 * Key decision: a row's sequential sum is a chain of dependent double additions, each
 * waiting ~4 cycles for the last, so one row at a time runs at a quarter of the adder's
 * throughput. NR_SEQ_ROWS rows summed side by side keep every row's order (and so its
 * result, bit for bit) while their chains overlap. */
#ifndef NR_KERNELS_CPU_NORM_NORM_SEQ_H
#define NR_KERNELS_CPU_NORM_NORM_SEQ_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define NR_SEQ_ROWS 8

/* s[r] = sum of row r (rows of n floats, stride apart), in order, in double. */
static inline void nr_seq_sums(const float *x, int64_t n, int64_t stride, int rows,
                               double *s) {
  double a[NR_SEQ_ROWS] = {0};
  if (rows == NR_SEQ_ROWS) {
    for (int64_t j = 0; j < n; j++)
#pragma GCC unroll 8
      for (int r = 0; r < NR_SEQ_ROWS; r++)
        a[r] += x[r * stride + j];
  } else {
    for (int r = 0; r < rows; r++)
      for (int64_t j = 0; j < n; j++)
        a[r] += x[r * stride + j];
  }
  for (int r = 0; r < rows; r++)
    s[r] = a[r];
}

/* q[r] = sum of (x - m[r])^2 over row r, in order, in double. */
static inline void nr_seq_sqdev(const float *x, int64_t n, int64_t stride, int rows,
                                const double *m, double *q) {
  double a[NR_SEQ_ROWS] = {0};
  if (rows == NR_SEQ_ROWS) {
    for (int64_t j = 0; j < n; j++)
#pragma GCC unroll 8
      for (int r = 0; r < NR_SEQ_ROWS; r++) {
        double d = x[r * stride + j] - m[r];
        a[r] += d * d;
      }
  } else {
    for (int r = 0; r < rows; r++)
      for (int64_t j = 0; j < n; j++) {
        double d = x[r * stride + j] - m[r];
        a[r] += d * d;
      }
  }
  for (int r = 0; r < rows; r++)
    q[r] = a[r];
}

/* One-pass sums: s[r] = sum x, q[r] = sum x^2, both in order, in double. */
static inline void nr_seq_sums2(const float *x, int64_t n, int64_t stride, int rows,
                                double *s, double *q) {
  double a[NR_SEQ_ROWS] = {0}, b[NR_SEQ_ROWS] = {0};
  if (rows == NR_SEQ_ROWS) {
    for (int64_t j = 0; j < n; j++)
#pragma GCC unroll 8
      for (int r = 0; r < NR_SEQ_ROWS; r++) {
        a[r] += x[r * stride + j];
        b[r] += (double)x[r * stride + j] * x[r * stride + j];
      }
  } else {
    for (int r = 0; r < rows; r++)
      for (int64_t j = 0; j < n; j++) {
        a[r] += x[r * stride + j];
        b[r] += (double)x[r * stride + j] * x[r * stride + j];
      }
  }
  for (int r = 0; r < rows; r++)
    s[r] = a[r], q[r] = b[r];
}

/* Mean and variance of `rows` rows of n floats the way the row kernels compute them
 * without reassociation: two-pass (mean, then squared deviations) or one-pass. */
static inline void nr_seq_moments(bool one_pass, const float *x, int64_t n, int rows,
                                  double *mean, double *var) {
  double s[NR_SEQ_ROWS], q[NR_SEQ_ROWS];
  if (one_pass) {
    nr_seq_sums2(x, n, n, rows, s, q);
    for (int r = 0; r < rows; r++) {
      mean[r] = s[r] / (double)n;
      var[r] = fmax(q[r] / (double)n - mean[r] * mean[r], 0.0);
    }
    return;
  }
  nr_seq_sums(x, n, n, rows, s);
  for (int r = 0; r < rows; r++)
    mean[r] = s[r] / (double)n;
  nr_seq_sqdev(x, n, n, rows, mean, q);
  for (int r = 0; r < rows; r++)
    var[r] = q[r] / (double)n;
}

#endif
