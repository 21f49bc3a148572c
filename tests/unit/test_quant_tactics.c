/* test_quant_tactics.c - the per-tensor QuantizeLinear / DequantizeLinear kernels
 * (src/kernels/cpu/quant/) against the reference operator, bit for bit: values on
 * and between grid points (ties round to even), beyond both ends (saturation), NaN,
 * uint8 and int8, lengths that are and are not multiples of the vector width. */
#include "kernels/cpu/quant/quant.h"
#include "kernels/ref/executor.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAXN = 203 };

static void make_input(float *x, int n, float scale, unsigned seed) {
  nr_rng rng = nr_rng_make(seed);
  for (int i = 0; i < n; i++) {
    int k = (int)nr_rng_int(&rng, -350, 349);
    switch (i % 4) {
    case 0: x[i] = (float)k * scale; break;             /* on the grid */
    case 1: x[i] = ((float)k + 0.5f) * scale; break;    /* a tie */
    case 2: x[i] = (float)k * scale * 0.37f; break;     /* between */
    default: x[i] = (float)k * scale * 3.1f; break;     /* often saturating */
    }
  }
  x[7 % n] = NAN;
}

static void ref_quant(const float *x, int n, float scale, const void *zp, nr_dtype qt,
                      void *out) {
  nr_value vx = {NR_DTYPE_FLOAT, 1, {n}, (void *)x, false};
  nr_value vs = {NR_DTYPE_FLOAT, 0, {0}, &scale, false};
  nr_value vz = {qt, 0, {0}, (void *)zp, false};
  const nr_value *ins[3] = {&vx, &vs, &vz};
  nr_value y = {0};
  nr_error err = {0};
  if (nr_ref_exec_node("QuantizeLinear", "", 13, 0, NULL, 3, ins, 1, &y, &err) == NR_OK)
    memcpy(out, y.data, (size_t)n);
  nr_value_free(&y);
}

NR_TEST(quant_tactics_match_the_reference_bit_for_bit) {
  static float x[MAXN], back[MAXN], want_back[MAXN];
  static uint8_t want[MAXN], got[MAXN];
  const float scales[3] = {0.05f, 0.0123f, 1.0f};
  bool avx2 = nr_cpu_isa() & NR_ISA_AVX2;
  for (int sg = 0; sg < 2; sg++)
    for (int si = 0; si < 3; si++)
      for (int n = 1; n <= MAXN; n += 29) {
        nr_dtype qt = sg ? NR_DTYPE_INT8 : NR_DTYPE_UINT8;
        int zpi = sg ? -3 : 131;
        uint8_t zb = (uint8_t)zpi;
        make_input(x, n, scales[si], (unsigned)(n * 7 + si));
        ref_quant(x, n, scales[si], &zb, qt, want);
        for (int v = 0; v < 1 + avx2; v++) {
          (v ? nr_quant_f32__avx2 : nr_quant_f32_portable)(x, got, (size_t)n, scales[si], zpi, sg);
          int bad = -1;
          for (int i = 0; i < n && bad < 0; i++)
            if (got[i] != want[i])
              bad = i;
          CHECK(bad < 0, "%s quant, %s, scale %g, n %d: element %d (x %g) got %d want %d",
                v ? "avx2" : "portable", sg ? "int8" : "uint8", scales[si], n, bad,
                bad >= 0 ? x[bad] : 0, bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0);
          for (int i = 0; i < n; i++)
            want_back[i] = (float)((sg ? (int)(int8_t)want[i] : (int)want[i]) - zpi) * scales[si];
          (v ? nr_dequant_f32__avx2 : nr_dequant_f32_portable)(want, back, (size_t)n, scales[si],
                                                               zpi, sg);
          CHECK(!memcmp(back, want_back, sizeof(float) * (size_t)n), "%s dequant, n %d",
                v ? "avx2" : "portable", n);
        }
      }
}
