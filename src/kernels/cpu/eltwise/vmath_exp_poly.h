/* vmath_exp_poly.h - the polynomial part of the vector exp, written once over the
 * nr_vf_* helpers for vmath_avx2.h and vmath_avx512.h (each includes its ISA's
 * kernels/cpu/simd/simd_<isa>.h first): e^r on the reduced range |r| <= ln2/2 as
 * 1 + r + r^2 P(r), P of degree 5 (accurate: Cephes' degree-7 exp) or 2 (fast: the
 * degree-4 least-squares fit, max rel error 6.2e-6). The range reduction and the 2^n
 * scale stay per ISA: vroundps and two integer-built multiplies at 8 lanes,
 * vrndscaleps and vscalefps at 16. */
#ifndef NR_KERNELS_CPU_ELTWISE_VMATH_EXP_POLY_H
#define NR_KERNELS_CPU_ELTWISE_VMATH_EXP_POLY_H

static inline nr_vf nr_vf_exp_poly(nr_vf r, int fast) {
  nr_vf y;
  if (fast) {
    y = nr_vf_set1(0.0409174029f);
    y = nr_vf_fma(y, r, nr_vf_set1(0.1675397596f));
    y = nr_vf_fma(y, r, nr_vf_set1(0.5000893097f));
  } else {
    y = nr_vf_set1(1.9875691500e-4f);
    y = nr_vf_fma(y, r, nr_vf_set1(1.3981999507e-3f));
    y = nr_vf_fma(y, r, nr_vf_set1(8.3334519073e-3f));
    y = nr_vf_fma(y, r, nr_vf_set1(4.1665795894e-2f));
    y = nr_vf_fma(y, r, nr_vf_set1(1.6666665459e-1f));
    y = nr_vf_fma(y, r, nr_vf_set1(5.0000001201e-1f));
  }
  return nr_vf_fma(y, nr_vf_mul(r, r), nr_vf_add(r, nr_vf_set1(1.0f)));
}

#endif
