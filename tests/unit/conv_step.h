/* conv_step.h - one hand-built Conv / FusedConv step for the tests that hold a single
 * convolution kernel to the reference executor (test_conv_igemm512.c,
 * test_conv_sp512.c, test_conv_dw512.c): the case, its reference output, the one-step
 * plan over slots X, W, B, R, Y, and running one tactic row's supports(), prepare()
 * and run() on it with guard floats around every buffer it touches.
 *
 * The other conv-tactic tests (test_conv_tactics.c, test_conv_pw.c, test_qgemm_tactics.c,
 * test_onednn_q.c) build their one-step plans with conv_step_make too.
 *
 * Key decision: the plan is built by hand rather than compiled from a graph, so the
 * tactic under test runs even where the select pass would pick another one, and a test
 * may rewrite the step's record between prepare() and run() (a K block or a tile that
 * prepare() only picks for larger layers) through conv_opts.tweak. */
#ifndef NR_TESTS_UNIT_CONV_STEP_H
#define NR_TESTS_UNIT_CONV_STEP_H

#include "kernels/act.h"
#include "plan/tactic.h"
#include "util/threadpool.h"
#include "unit.h"

#include <stdbool.h>
#include <stdint.h>

/* A 2-D convolution over NCHW float tensors, with its fused epilogue. */
typedef struct conv_case {
  int n, c, h, w, m;  /* m output channels (depthwise: group == c == m) */
  int kh, kw;         /* window */
  int sh, sw, dh, dw; /* strides and dilations (0: 1) */
  int pt, pl, pb, pr; /* pads */
  int group;          /* 0: 1 */
  bool bias, res;     /* a bias input; a residual R added before the activation */
  nr_act act;
  float act_a, act_b; /* the node's act_alpha / act_beta */
} conv_case;

int64_t conv_case_oh(const conv_case *k);
int64_t conv_case_ow(const conv_case *k);
/* Element counts of X, W and Y. */
int64_t conv_case_xn(const conv_case *k);
int64_t conv_case_wn(const conv_case *k);
int64_t conv_case_yn(const conv_case *k);
/* "n1 c64 56x56 m64 k3x3 s1x1 d1x1 pad 1,1,1,1 g1 bias1 res0 relu" into buf. */
const char *conv_case_text(const conv_case *k, char *buf, size_t cap);

/* The conv_case of a test's own case record k with symmetric pads: any struct with
 * int fields n, c, h, w, m, kh, kw, sh, sw, ph, pw, dh, dw, group and bool bias, res
 * and an nr_act act (test_conv_tactics.c, test_qgemm_tactics.c, test_onednn_q.c);
 * act_a and act_b are left 0 for the caller. */
#define CONV_CASE_SYMMETRIC(k)                                                          \
  ((conv_case){.n = (k)->n, .c = (k)->c, .h = (k)->h, .w = (k)->w, .m = (k)->m,         \
               .kh = (k)->kh, .kw = (k)->kw, .sh = (k)->sh, .sw = (k)->sw, .dh = (k)->dh, \
               .dw = (k)->dw, .pt = (k)->ph, .pl = (k)->pw, .pb = (k)->ph, .pr = (k)->pw, \
               .group = (k)->group, .bias = (k)->bias, .res = (k)->res, .act = (k)->act})

/* Y = Conv(X, W, B) of case k (B when k->bias) by the reference executor, y holding
 * conv_case_yn(k) floats. False when the reference refuses the case. */
bool conv_case_conv(const conv_case *k, const float *x, const float *w, const float *b,
                    float *y);
/* Y = act(Conv(X, W, B) + R) by the reference executor and act.c's scalar rules (r
 * may be NULL). False when the reference refuses the case. */
bool conv_case_reference(const conv_case *k, const float *x, const float *w, const float *b,
                         const float *r, float *y);

/* The one-step plan: slots X, W, B (constants in plan.weights), R, Y, and a FusedConv
 * step when the case has a residual or an activation, else a Conv. */
typedef struct conv_step {
  nr_plan plan;
  nr_slot slots[5];
  nr_step step;
  nr_node node;
  nr_attr attrs[10];
  int64_t pads[4], st[2], dl[2];
} conv_step;

/* What conv_step_make builds beyond the case, for the tests of other tactic families
 * (test_conv_tactics.c, test_conv_pw.c, test_qgemm_tactics.c, test_onednn_q.c). */
typedef struct conv_step_opts {
  bool fused;           /* a FusedConv step (4 inputs, activation attributes), else Conv */
  const char *name;     /* the node's name; NULL: "conv" */
  nr_layout layout;     /* X's, R's and Y's slots */
  const nr_attr *extra; /* attributes after the window's, before the activation's */
  int n_extra;          /* at most 3 */
} conv_step_opts;

/* The one-step plan of case k with W's and B's floats copied into plan.weights; Y's
 * dims are the case's (conv_case_oh / _ow). */
void conv_step_make(conv_step *cs, const conv_case *k, const float *w, const float *b,
                    const conv_step_opts *o);
/* ... with the step conv_case_fused picks. */
void conv_step_build(conv_step *cs, const conv_case *k, const float *w, const float *b);
void conv_step_free(conv_step *cs);
bool conv_case_fused(const conv_case *k);

/* The row `id` of nr_tactics_conv for the case's node (FusedConv or Conv); NULL when
 * there is none, or when `runnable` and this machine's ISA cannot run it. */
const nr_tactic *conv_row(const char *id, const conv_case *k, bool runnable);

/* A graph of one Conv node `name` reading input X (xd) and constant W (wd, no data)
 * into output Y (yd), with the caller's attributes, which stay the caller's:
 * conv_graph_destroy detaches them before destroying the graph. For the tests of a
 * knob's listing, which knob spaces build from a graph. */
struct nr_graph *conv_graph(const char *name, const int64_t xd[4], const int64_t wd[4],
                            const int64_t yd[4], nr_attr *attrs, int n_attrs);
void conv_graph_destroy(struct nr_graph *g);

/* The row the default route runs on case k's FusedConv node: the highest priority
 * among those this machine's ISA allows that support it, as select.c picks. */
const nr_tactic *conv_default_row(const conv_case *k);

/* How conv_run_tactic / conv_check run a row. */
typedef struct conv_opts {
  const nr_route *route; /* what prepare() reads its knobs from; NULL: the default */
  /* Called after prepare(): may rewrite st->params and st->scratch. */
  void (*tweak)(nr_step *st, void *user);
  void *user;
  double tol;      /* |y - want| <= tol (1 + |want|); 0: 2e-5 (taps x C/group / 4 + 4) */
  double max_rel_l2; /* and the whole output's relative L2 error at most this; 0: off */
  const char *note; /* added to failure messages (e.g. "kc 5"), or NULL */
  /* Run without asking supports(): for rows whose supports() also holds performance
   * rules (sp wants 48+ channels), so smaller cases still test the arithmetic. */
  bool skip_supports;
} conv_opts;

/* Runs row tac on case k with the caller's x, w, b, r (r NULL: no residual input) into
 * y, on `pool`; the scratch carries guard floats. Returns false without a failure when
 * tac does not support the case, and false with one when prepare() or run() fails or
 * the scratch guard is hit. */
bool conv_run_tactic(nr_test_state *t, const nr_tactic *tac, const conv_case *k,
                     const float *x, const float *w, const float *b, const float *r,
                     float *y, nr_threadpool *pool, const conv_opts *o, unsigned seed);

/* Seeded X, W, B, R for case k (guarded buffers), row tac run on them and compared
 * with the reference element by element; X and R must come back unchanged and no
 * guard may move. Returns whether tac supported the case (a failure is recorded
 * when it did not and must_support is set). */
bool conv_check(nr_test_state *t, const nr_tactic *tac, const conv_case *k, unsigned seed,
                nr_threadpool *pool, const conv_opts *o, bool must_support);

#endif
