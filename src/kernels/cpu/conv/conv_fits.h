/* conv_fits.h - which convolution windows the specialised CPU kernels take: 1x1
 * stride 1, the depthwise windows (3x3 and 5x5 at stride 1, 2 or 2x1, 7x7 at stride
 * 1, 3x3 and 5x5 with dilation 2), small-channel stems and Winograd's 3x3, and the
 * column matrices im2col keeps whole. tactics_conv.c's supports() functions combine
 * them with each tactic's own limits; each predicate says where its rule comes from. */
#ifndef NR_KERNELS_CPU_CONV_FITS_H
#define NR_KERNELS_CPU_CONV_FITS_H

#include "kernels/cpu/conv/conv_internal.h"

#include <stdbool.h>

static inline bool is_1x1_s1(const conv_p *p) {
  return p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 &&
         p->pl == 0 && p->oh == p->h && p->ow == p->w;
}
static inline bool is_dw(const conv_p *p) {
  return p->group == p->c && p->m == p->c && p->kh == p->kw &&
         (p->kh == 3 || p->kh == 5) && p->sh == p->sw && (p->sh == 1 || p->sh == 2) &&
         p->dh == 1 && p->dw == 1 && p->pt < p->kh && p->pl < p->kw;
}
/* A 7x7 stride-1 depthwise window (ConvNeXt's blocks): the PLAIN depthwise kernels take
 * it; the NCHW8C ones do not. On im2col, convnext_tiny_w48's 18 of them took 54% of a
 * run at 4 GFLOP/s (nnroute bench --profile, 1 thread, AVX-512 host). */
static inline bool is_dw7(const conv_p *p) {
  return p->group == p->c && p->m == p->c && p->kh == 7 && p->kw == 7 && p->sh == 1 &&
         p->sw == 1 && p->dh == 1 && p->dw == 1 && p->pt < 7 && p->pl < 7;
}
/* A 3x3 or 5x5 stride-1 depthwise window with dilation 2 (the dilated tail of
 * MobileNetV3 in DeepLabV3 and LR-ASPP): the AVX-512 depthwise kernel takes it. On
 * im2col LR-ASPP's three took 15.4 of its 34 ms per run (1 thread). */
static inline bool is_dw_dil2(const conv_p *p) {
  return p->group == p->c && p->m == p->c && p->kh == p->kw && (p->kh == 3 || p->kh == 5) &&
         p->sh == 1 && p->sw == 1 && p->dh == 2 && p->dw == 2 && p->pt < 2 * p->kh - 1 &&
         p->pl < 2 * p->kw - 1;
}
/* A 3x3 or 5x5 depthwise window with stride 2 down the rows and 1 along them (PP-OCR's
 * recognizer and direction classifier halve the height only): the AVX-512 depthwise
 * kernel takes it. On per-group im2col ppocr_cls's four took 0.3 of its 0.8 ms per run
 * (1 thread). */
static inline bool is_dw_s21(const conv_p *p) {
  return p->group == p->c && p->m == p->c && p->kh == p->kw && (p->kh == 3 || p->kh == 5) &&
         p->sh == 2 && p->sw == 1 && p->dh == 1 && p->dw == 1 && p->pt < p->kh &&
         p->pl < p->kw;
}
/* A stem: few input channels, 3x3 or 5x5, stride 1 or 2 (nr_f32_conv_smallc__avx2). */
static inline bool is_smallc(const conv_p *p) {
  return p->group == 1 && p->c <= 4 && p->kh == p->kw && (p->kh == 3 || p->kh == 5) &&
         p->sh == p->sw && (p->sh == 1 || p->sh == 2) && p->dh == 1 && p->dw == 1 &&
         p->pt < p->kh && p->pl < p->kw && nr_conv_smallc_scratch(p) > 0;
}
/* im2col's column matrix (one image and group: C/g x kh x kw rows of oh x ow) lives
 * in scratch (NHWC: its transpose, whole; past 256 MiB the node goes elsewhere). PLAIN
 * im2col builds a larger one a band of output rows at a time (nr_conv_im2col_band),
 * but only for 8 or more output channels per group: each packed column feeds that many
 * GEMM rows, and with fewer the packing costs more than the products. style_transfer's
 * 9x9 output conv (32 -> 3 channels at 256x256, 680 MB whole) took 257 ms whole and
 * 316 ms banded against about 100 ms on the NCHW8C direct kernel (1 thread, loaded
 * host, conv.algo pinned per node). */
#define IM2COL_MAX_COL_BYTES (256ull << 20)
static inline bool im2col_fits(const conv_p *p) {
  uint64_t rows = (uint64_t)(p->c / p->group) * p->kh * p->kw;
  return rows * (uint64_t)p->oh * (uint64_t)p->ow * sizeof(float) <= IM2COL_MAX_COL_BYTES;
}
static inline bool is_wino(const conv_p *p) {
  return p->kh == 3 && p->kw == 3 && p->sh == 1 && p->sw == 1 && p->dh == 1 &&
         p->dw == 1 && p->group == 1;
}

#endif
