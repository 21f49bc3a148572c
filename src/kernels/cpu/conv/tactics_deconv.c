/* tactics_deconv.c - the ConvTranspose family's table, nr_tactics_cpu_deconv[]:
 * nr_f32_deconv_patch (kernel = stride, no padding: one GEMM and a pixel shuffle) ahead
 * of onednn_deconv (everything else 2-D). */
#include "kernels/cpu/conv/deconv.h"

const nr_tactic nr_tactics_cpu_deconv[] = {
    {"nr_f32_deconv_patch", "", "ConvTranspose", "nnroute", "patch", NR_LAYOUT_PLAIN, 0,
     40, nr_deconv_patch_supports, nr_deconv_patch_prepare, nr_deconv_patch_run},
    {"onednn_deconv", "", "ConvTranspose", "onednn", "onednn", NR_LAYOUT_PLAIN, 0, 30,
     nr_deconv_onednn_supports, nr_deconv_onednn_prepare, nr_deconv_onednn_run},
    {0},
};
