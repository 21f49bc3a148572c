/* quantize.c - the activation quantizer of the int8 tactics: fp32 to u8 with a
 * per-tensor scale and zero point, q = sat_u8(round_half_even(fma(x, 1 / s, zp))),
 * one elementwise pass (the tactics quantize tensors whose layout already is the one
 * their primitives read). This file holds the dispatcher and the portable loop; the
 * vector loops (quantize__avx2.c, quantize__avx512.c) give the same bytes.
 *
 * Key decision: a loop of ours rather than a oneDNN reorder with an output scale. The
 * reorder has a fixed cost of about 20 us a call, more than the whole pass on a 14x14
 * tensor (24 us against 5 us for 576x14x14 here), and was 1.4x slower on the large
 * ones (0.28 against 0.20 ms for 96x112x112, one thread); mobilenet_v2 quantizes 53
 * tensors per inference. The executor (onednn_q_exec.c) runs it in 64K-float chunks
 * on the context's pool. */
#include "kernels/cpu/onednn_q/onednn_q.h"

#include <math.h>

void nr_quantize_u8_portable(const float *x, uint8_t *q, int64_t n, float inv,
                             int32_t zp) {
  float z = (float)zp;
  for (int64_t i = 0; i < n; i++) {
    float r = fmaf(x[i], inv, z);
    r = r > 0.0f ? r : 0.0f; /* NaN becomes 0 */
    r = r < 255.0f ? r : 255.0f;
    q[i] = (uint8_t)nearbyintf(r);
  }
}

void nr_quantize_u8(const float *x, uint8_t *q, int64_t n, float inv, int32_t zp) {
  unsigned isa = nr_cpu_isa();
  if (isa & NR_ISA_AVX512)
    nr_quantize_u8__avx512(x, q, n, inv, zp);
  else if (isa & NR_ISA_AVX2)
    nr_quantize_u8__avx2(x, q, n, inv, zp);
  else
    nr_quantize_u8_portable(x, q, n, inv, zp);
}
