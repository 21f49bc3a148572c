/* quant.h - per-tensor QuantizeLinear / DequantizeLinear row kernels shared by the
 * portable and AVX2 builds (tactics_quant.c chooses).
 *
 * Quantization divides in float and rounds half to even, exactly as the reference
 * kernel does for a float scale (src/kernels/ref/ops_quant.c), so a fast tactic never moves a value to
 * a neighbouring grid point: in a QDQ model one such flip propagates through every
 * later layer. */
#ifndef NR_KERNELS_CPU_QUANT_QUANT_H
#define NR_KERNELS_CPU_QUANT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* y[i] = saturate(round_half_even(x[i] / scale) + zp) on [lo, hi]; y is uint8 when
 * is_signed is false, else int8. */
void nr_quant_f32_portable(const float *x, void *y, size_t n, float scale, int zp, bool is_signed);
void nr_quant_f32__avx2(const float *x, void *y, size_t n, float scale, int zp, bool is_signed);
/* y[i] = (q[i] - zp) * scale. */
void nr_dequant_f32_portable(const void *q, float *y, size_t n, float scale, int zp,
                             bool is_signed);
void nr_dequant_f32__avx2(const void *q, float *y, size_t n, float scale, int zp,
                          bool is_signed);

#endif
