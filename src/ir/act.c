/* act.c - names and the scalar reference of the fused activations (act.h). */
#include "ir/act.h"

#include <math.h>
#include <string.h>

static const char *const names[NR_ACT_COUNT] = {
    "none", "relu", "clip", "leaky_relu", "sigmoid", "hard_sigmoid",
    "hard_swish", "tanh", "silu", "gelu", "gelu_tanh",
};

const char *nr_act_name(nr_act a) {
  return a >= 0 && a < NR_ACT_COUNT ? names[a] : "unknown";
}

bool nr_act_from_name(const char *name, nr_act *out) {
  for (int i = 0; i < NR_ACT_COUNT; i++)
    if (!strcmp(name, names[i])) {
      *out = (nr_act)i;
      return true;
    }
  return false;
}

static float act1(nr_act act, float a, float b, float x) {
  switch (act) {
  case NR_ACT_NONE: return x;
  case NR_ACT_RELU: return x > 0 ? x : 0;
  case NR_ACT_CLIP: return x < a ? a : x > b ? b : x;
  case NR_ACT_LEAKY_RELU: return x >= 0 ? x : a * x;
  case NR_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case NR_ACT_HARD_SIGMOID: return fmaxf(0.0f, fminf(1.0f, a * x + b));
  case NR_ACT_HARD_SWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
  case NR_ACT_TANH: return tanhf(x);
  case NR_ACT_SILU: return x / (1.0f + expf(-x));
  case NR_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case NR_ACT_GELU_TANH:
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  default: return x;
  }
}

void nr_act_apply_ref(nr_act act, float a, float b, float *x, int64_t n) {
  if (act == NR_ACT_NONE)
    return;
  for (int64_t i = 0; i < n; i++)
    x[i] = act1(act, a, b, x[i]);
}
