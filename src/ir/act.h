/* act.h - the activation functions that fused ops and kernel epilogues apply, named
 * as in the fused ops' "activation" attribute (ir/fused.h), with their scalar
 * definition. The kernels' vector version is nr_act_apply (kernels/act.h). */
#ifndef NR_IR_ACT_H
#define NR_IR_ACT_H

#include <stdbool.h>
#include <stdint.h>

typedef enum nr_act {
  NR_ACT_NONE = 0,
  NR_ACT_RELU,
  NR_ACT_CLIP,         /* min(max(x, a), b): Relu6 and Clip */
  NR_ACT_LEAKY_RELU,   /* x >= 0 ? x : a * x */
  NR_ACT_SIGMOID,
  NR_ACT_HARD_SIGMOID, /* max(0, min(1, a * x + b)) */
  NR_ACT_HARD_SWISH,   /* x * max(0, min(1, x / 6 + 1 / 2)) */
  NR_ACT_TANH,
  NR_ACT_SILU,         /* x * sigmoid(x) */
  NR_ACT_GELU,         /* exact, with erf */
  NR_ACT_GELU_TANH,    /* tanh approximation */
  NR_ACT_COUNT,
} nr_act;

/* "none", "relu", "clip", "leaky_relu", "sigmoid", "hard_sigmoid", "hard_swish",
 * "tanh", "silu", "gelu", "gelu_tanh". */
const char *nr_act_name(nr_act a);
bool nr_act_from_name(const char *name, nr_act *out);
/* Scalar reference: applies act with parameters a, b to n floats in place (libm
 * expf/tanhf/erff). The reference executor's fused ops use it. */
void nr_act_apply_ref(nr_act act, float a, float b, float *x, int64_t n);
#endif
