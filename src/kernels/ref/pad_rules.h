/* pad_rules.h - ONNX Pad's index rule, written once for the reference operator
 * (ops_layout.c) and the fast copy tactic (kernels/cpu/copy/tactics_index.c): which
 * input index an output index reads along one axis under each mode. */
#ifndef NR_KERNELS_REF_PAD_RULES_H
#define NR_KERNELS_REF_PAD_RULES_H

#include <stdint.h>

/* Pad's mode attribute, in the order "constant", "reflect", "edge", "wrap". */
typedef enum nr_pad_mode {
  NR_PAD_CONSTANT,
  NR_PAD_REFLECT,
  NR_PAD_EDGE,
  NR_PAD_WRAP
} nr_pad_mode;

/* Source index along one axis of extent dim for output index o with begin pad b and
 * end pad e, or -1 for the fill value. Negative pads crop first; reflect, edge and
 * wrap then pad the cropped extent. */
int64_t nr_pad_source(nr_pad_mode mode, int64_t o, int64_t dim, int64_t b, int64_t e);

#endif
