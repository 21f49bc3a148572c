/* deconv.h - what the ConvTranspose tactics share (private to src/kernels/cpu/conv):
 * the params record, the node parser that fills it (deconv_onednn.c) and the entry
 * points of onednn_deconv (deconv_onednn.c) and nr_f32_deconv_patch (deconv_patch.c);
 * the table is tactics_deconv.c's. */
#ifndef NR_KERNELS_CPU_CONV_DECONV_H
#define NR_KERNELS_CPU_CONV_DECONV_H

#include "kernels/cpu/gemm/gemm.h"
#include "plan/tactic.h"

#include <stdint.h>

typedef struct deconv_p {
  int32_t n, c, h, w;                             /* X */
  int32_t m, oh, ow, group;                       /* Y channels and size; groups */
  int16_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr; /* window; pads begin / end */
  uint8_t has_bias, pad_[3];
  nr_gemm_cfg gemm; /* nr_f32_deconv_patch; zero for onednn_deconv */
} deconv_p;
_Static_assert(sizeof(deconv_p) <= NR_TACTIC_PARAMS, "deconv_p must fit nr_step.params");

/* Fills p (zeroed first) from a ConvTranspose step: float32 2-D with constant W (and
 * B), its pads resolved against Y's shape. False when it is not one. */
bool nr_deconv_parse(const nr_tactic_ctx *c, deconv_p *p);

bool nr_deconv_onednn_supports(const nr_tactic_ctx *c);
nr_status nr_deconv_onednn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
nr_status nr_deconv_onednn_run(const nr_exec_args *a);

bool nr_deconv_patch_supports(const nr_tactic_ctx *c);
nr_status nr_deconv_patch_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
nr_status nr_deconv_patch_run(const nr_exec_args *a);

#endif
