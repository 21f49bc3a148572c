/* cpu.c - runtime CPU feature detection, done once. NNROUTE_ISA=portable (or avx2,
 * avx512: no VNNI) caps what tactics may use, for tests and triage (STYLE.md point 7).
 *
 * Key decision: a feature counts only when the CPU has it (cpuid) *and* the OS saves
 * its registers on a context switch (XGETBV's XCR0, after cpuid says OSXSAVE): ymm
 * state for AVX2, plus opmask and all 32 zmm registers for AVX-512. A hypervisor or
 * kernel may hide AVX-512 state while cpuid still lists the instructions; running a
 * zmm kernel there would fault. NR_ISA_AVX512 means F + BW + DQ + VL (what the
 * *__avx512.c files are compiled for) and implies NR_ISA_AVX2; NR_ISA_AVX512VNNI
 * (the *__avx512vnni.c files) implies NR_ISA_AVX512. */
#include "util/cpu.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t)hi << 32 | lo;
}

static unsigned detect_x86(void) {
  unsigned a, b, c1, d, b7 = 0, c7, d7;
  if (!__get_cpuid(1, &a, &b, &c1, &d) || !(c1 & (1u << 27))) /* OSXSAVE */
    return 0;
  uint64_t xcr0 = xgetbv0();
  bool ymm_os = (xcr0 & 0x6) == 0x6;            /* SSE + AVX state */
  bool zmm_os = ymm_os && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
  if (!__get_cpuid_count(7, 0, &a, &b7, &c7, &d7))
    return 0;
  bool fma = c1 & (1u << 12), f16c = c1 & (1u << 29), avx2 = b7 & (1u << 5);
  unsigned isa = 0;
  if (ymm_os && avx2 && fma && f16c)
    isa |= NR_ISA_AVX2;
  const unsigned f = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
  if (zmm_os && (isa & NR_ISA_AVX2) && (b7 & (f | dq | bw | vl)) == (f | dq | bw | vl))
    isa |= NR_ISA_AVX512;
  if ((isa & NR_ISA_AVX512) && (c7 & (1u << 11))) /* AVX512_VNNI */
    isa |= NR_ISA_AVX512VNNI;
  return isa;
}
#endif

static unsigned detected;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void detect(void) {
  unsigned isa = 0;
#if defined(__x86_64__) || defined(__i386__)
  isa = detect_x86();
#endif
  const char *cap = getenv("NNROUTE_ISA");
  if (cap && !strcmp(cap, "portable"))
    isa = 0;
  else if (cap && !strcmp(cap, "avx2"))
    isa &= NR_ISA_AVX2;
  else if (cap && !strcmp(cap, "avx512"))
    isa &= NR_ISA_AVX2 | NR_ISA_AVX512;
  detected = isa;
}

unsigned nr_cpu_isa(void) {
  pthread_once(&once, detect);
  return detected;
}
