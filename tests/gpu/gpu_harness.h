/* gpu_harness.h - the GPU tests' way to check a CUDA tactic: build a small graph by
 * hand, compile it for NR_DEVICE_CUDA along a route, run the engine on a context
 * (twice: the second run replays the CUDA graph unless the route turns graphs off)
 * and compare every output with the reference executor on the same graph.
 *
 * Key decision: the whole compiler runs, graph passes included, so a test of "Conv +
 * Add + Relu" checks the FusedConv the passes make of it and the layout pass's
 * reorders, as a user's model would; a test names the tactic it expects to see in
 * the plan, so a silent fallback to another tactic fails instead of passing.
 * Output buffers carry guard bytes on both sides. Failures print the seed. */
#ifndef NR_TESTS_GPU_HARNESS_H
#define NR_TESTS_GPU_HARNESS_H

#include "unit.h"

#include "ir/ir.h"
#include "plan/knob.h"
#include "plan/tactic.h"

#include <stdbool.h>
#include <stdint.h>

/* A graph under construction. */
typedef struct gt_graph {
  nr_graph *g;
} gt_graph;

/* A graph whose ai.onnx opset is `opset` (the nnroute domain is added too). */
gt_graph gt_new(int opset);
/* A float32 (or dtype) graph input. */
int gt_input(gt_graph *b, const char *name, nr_dtype dt, int rank, const int64_t *dims);
/* A constant; data is copied. */
int gt_const(gt_graph *b, const char *name, nr_dtype dt, int rank, const int64_t *dims,
             const void *data);
/* A float constant of seeded values in [lo, hi). */
int gt_const_rand(gt_graph *b, const char *name, int rank, const int64_t *dims,
                  unsigned *seed, float lo, float hi);
/* A node with one output (returned); attrs are copied. */
int gt_node(gt_graph *b, const char *op, const char *name, int n_in, const int *ins,
            int n_attrs, const nr_attr *attrs);
/* Marks output tensors and finishes the graph (order, bind, infer, names). */
bool gt_finish(nr_test_state *t, gt_graph *b, int n_out, const int *outs);

/* Attributes that borrow the caller's storage (gt_node copies them). */
nr_attr gt_i(const char *name, int64_t v);
nr_attr gt_f(const char *name, float v);
nr_attr gt_ints(const char *name, size_t n, const int64_t *v);
nr_attr gt_s(const char *name, const char *v);

/* Seeded inputs: floats in [lo, hi), or integers in [0, hi) for integer inputs. */
typedef struct gt_inputs {
  nr_value v[8];
  int n;
} gt_inputs;
void gt_inputs_make(const gt_graph *b, unsigned seed, float lo, float hi, gt_inputs *in);
void gt_inputs_free(gt_inputs *in);

/* Compiles b for CUDA along route, runs it (three times) and compares each output
 * with the reference by gt_close (gpu_close.h): |got - want| <= atol + rtol * |want|,
 * NaN only against NaN, an infinity only against the same one. want_tactic (a
 * substring of a step's tactic id, several separated by commas, or NULL) must each
 * appear in the plan; one written !substring must appear in no step's id. */
void gt_check(nr_test_state *t, const gt_graph *b, const gt_inputs *in, const char *route,
              double atol, double rtol, const char *want_tactic, unsigned seed);

void gt_free(gt_graph *b);

/* Tolerances per precision: fp32 near the reference, tf32 and fp16 within their
 * mantissas over dot products of a few hundred terms. */
#define GT_TOL_F32 1e-4, 1e-4
#define GT_TOL_TF32 1e-2, 1e-2
#define GT_TOL_F16 3e-2, 3e-2

#endif
