/* layout.h - physical layouts of activations, and the rules the layout pass
 * (compiler/layout.c) follows, shared with the tactics that ask before the pass runs.
 *
 * Rules. Graph inputs and constants are PLAIN (tactics pack constants themselves);
 * graph outputs leave PLAIN. A tactic's layout applies to activation input 0 and
 * output 0, and to every other non-constant float32 rank-4 input or output whose dims
 * are output 0's except perhaps the channels (nr_layout_follows_out0); other inputs
 * and outputs are PLAIN. An NR_LAYOUT_ANY step (elementwise) follows its input 0 when
 * layout.propagate=on and it is a same-shape float32 rank-4 op with no constant
 * operand (nr_layout_any_follows), else it runs PLAIN. */
#ifndef NR_PLAN_LAYOUT_H
#define NR_PLAN_LAYOUT_H

#include "plan/knob.h"
#include "plan/route.h"

#include <stdbool.h>

/* nr_knobs_layout[] (compiler/layout.c, the pass): its ids live here, beside the
 * rules plan/layout.c applies for tactics before the pass runs. */
enum {
  NR_KNOB_LAYOUT_PROPAGATE = NR_KNOB_ID_BASE(layout), /* layout.propagate */
  NR_KNOB_LAYOUT_END
};
extern const nr_knob_def nr_knobs_layout[];

typedef enum nr_layout {
  NR_LAYOUT_PLAIN = 0,  /* ONNX order (NCHW for images) */
  NR_LAYOUT_NHWC = 1,   /* channels last (rank-4 tensors) */
  NR_LAYOUT_NCHW8C = 2, /* blocked: N, C/8, H, W, 8 (C padded with zeros to 8) */
  NR_LAYOUT_ANY = 255,  /* tactic.layout only: works in whatever layout it is given */
} nr_layout;

const char *nr_layout_name(nr_layout l);

struct nr_plan;
/* The layout the layout pass will give slot s, judged from the tactics chosen so far
 * for steps [0, before) (by the rules below; route r gives
 * layout.propagate, NULL: on). Select calls it through supports(), which lets a tactic
 * that works in one layout (the NHWC pooling and copy tactics) offer itself only where
 * its input already arrives in that layout. PLAIN for graph inputs, constants and
 * slots no step before `before` writes. */
nr_layout nr_layout_predict(const struct nr_plan *p, const nr_route *r, int s,
                            int before);

struct nr_slot;
struct nr_step;
/* A float32 rank-4 slot: one that may live in a layout other than PLAIN. */
bool nr_layout_blockable(const struct nr_slot *s);
/* Does slot s take the layout of a step whose output 0 is y (besides input 0 and
 * output 0 themselves)? */
bool nr_layout_follows_out0(const struct nr_slot *s, const struct nr_slot *y);
/* Does NR_LAYOUT_ANY step st of plan p follow its input 0's layout (layout.propagate
 * on)? */
bool nr_layout_any_follows(const struct nr_plan *p, const struct nr_step *st);

#endif
