/* lp_convert.c - the bulk fp32 <-> fp16 / bf16 conversions: the portable loops (the
 * scalar definitions of lpgemm.h applied element by element) and the dispatch to the
 * AVX2 (F16C) and AVX-512 bodies in lp_convert__avx2.c / lp_convert__avx512.c.
 *
 * Key decision: one rounding rule everywhere, round to nearest even, NaN kept as a
 * quiet NaN. The vector bodies are required to equal these loops bit for bit
 * (test_lowp.c checks every fp16 pattern and the rounding boundaries), so a value
 * packed at build time by one path and at run time by another cannot differ. */
#include "kernels/cpu/lpgemm/lpgemm_impl.h"

void nr_lp_narrow_portable(nr_lp_type t, const float *src, uint16_t *dst, int64_t n) {
  if (t == NR_LP_FP16)
    for (int64_t i = 0; i < n; i++)
      dst[i] = nr_fp32_to_fp16(src[i]);
  else
    for (int64_t i = 0; i < n; i++)
      dst[i] = nr_fp32_to_bf16(src[i]);
}

void nr_lp_widen_portable(nr_lp_type t, const uint16_t *src, float *dst, int64_t n) {
  if (t == NR_LP_FP16)
    for (int64_t i = 0; i < n; i++)
      dst[i] = nr_fp16_to_fp32(src[i]);
  else
    for (int64_t i = 0; i < n; i++)
      dst[i] = nr_bf16_to_fp32(src[i]);
}

void nr_lp_round_portable(nr_lp_type t, const float *src, float *dst, int64_t n) {
  if (t == NR_LP_FP16)
    for (int64_t i = 0; i < n; i++)
      dst[i] = nr_fp16_to_fp32(nr_fp32_to_fp16(src[i]));
  else
    for (int64_t i = 0; i < n; i++)
      dst[i] = nr_bf16_to_fp32(nr_fp32_to_bf16(src[i]));
}

void nr_lp_bf16_pairs_portable(const float *src, uint16_t *dst, int h) {
  for (int j = 0; j < h; j++) {
    dst[2 * j] = nr_fp32_to_bf16(src[j]);
    dst[2 * j + 1] = nr_fp32_to_bf16(src[h + j]);
  }
}

void nr_lp_narrow(nr_lp_type t, const float *src, uint16_t *dst, int64_t n) {
  unsigned isa = nr_cpu_isa();
  if (isa & NR_ISA_AVX512)
    nr_lp_narrow__avx512(t, src, dst, n);
  else if (isa & NR_ISA_AVX2)
    nr_lp_narrow__avx2(t, src, dst, n);
  else
    nr_lp_narrow_portable(t, src, dst, n);
}

void nr_lp_widen(nr_lp_type t, const uint16_t *src, float *dst, int64_t n) {
  unsigned isa = nr_cpu_isa();
  if (isa & NR_ISA_AVX512)
    nr_lp_widen__avx512(t, src, dst, n);
  else if (isa & NR_ISA_AVX2)
    nr_lp_widen__avx2(t, src, dst, n);
  else
    nr_lp_widen_portable(t, src, dst, n);
}

void nr_lp_round(nr_lp_type t, const float *src, float *dst, int64_t n) {
  unsigned isa = nr_cpu_isa();
  if (isa & NR_ISA_AVX512)
    nr_lp_round__avx512(t, src, dst, n);
  else if (isa & NR_ISA_AVX2)
    nr_lp_round__avx2(t, src, dst, n);
  else
    nr_lp_round_portable(t, src, dst, n);
}

void nr_lp_bf16_pairs(const float *src, uint16_t *dst, int h) {
  unsigned isa = nr_cpu_isa();
  if ((isa & NR_ISA_AVX512) && h % 16 == 0)
    nr_lp_bf16_pairs__avx512(src, dst, h);
  else if ((isa & NR_ISA_AVX2) && h % 8 == 0)
    nr_lp_bf16_pairs__avx2(src, dst, h);
  else
    nr_lp_bf16_pairs_portable(src, dst, h);
}
