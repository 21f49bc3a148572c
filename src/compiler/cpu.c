/* cpu.c - runtime CPU feature detection, done once. NNROUTE_ISA=portable (or avx2)
 * caps what tactics may use, for tests and triage (STYLE.md point 7). */
#include "compiler/plan.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static unsigned detected;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void detect(void) {
  unsigned isa = 0;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    isa |= NR_ISA_AVX2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    isa |= NR_ISA_AVX512;
#endif
  const char *cap = getenv("NNROUTE_ISA");
  if (cap && !strcmp(cap, "portable"))
    isa = 0;
  else if (cap && !strcmp(cap, "avx2"))
    isa &= NR_ISA_AVX2;
  detected = isa;
}

unsigned nr_cpu_isa(void) {
  pthread_once(&once, detect);
  return detected;
}
