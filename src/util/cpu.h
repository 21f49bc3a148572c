/* cpu.h - the CPU's instruction-set extensions, detected once per process (cpu.c).
 * Tactics name the NR_ISA_* bits they need; selection and the kernels' own dispatch
 * compare them with nr_cpu_isa(). */
#ifndef NR_UTIL_CPU_H
#define NR_UTIL_CPU_H

enum {
  NR_ISA_AVX2 = 1u << 0, /* AVX2 + FMA + F16C */
  NR_ISA_AVX512 = 1u << 1,
  NR_ISA_AVX512VNNI = 1u << 2, /* AVX-512 VNNI (vpdpbusd); only with NR_ISA_AVX512 */
};
/* Detected once; NNROUTE_ISA=portable|avx2|avx512 caps it (avx512: no VNNI). */
unsigned nr_cpu_isa(void);

#endif
