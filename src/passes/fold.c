/* fold.c - the pass fold: evaluates at build time every node whose inputs are all
 * constants (a weight Transpose, a Cast or DequantizeLinear of constant weights) so
 * the engine stores the result instead of recomputing it on every run.
 *
 * Key decision: the pass is nr_graph_fold_constants, the same evaluation that folded
 * the shape arithmetic when the model was prepared; the knob only decides whether the
 * rest is folded too. It is listed only for graphs that still hold a foldable node,
 * which a prepared graph usually does not: then there is nothing to decide. */
#include "ir/op.h"
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "plan/pass.h"

static bool has_subgraph(const nr_node *n) {
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].g)
      return true;
  return false;
}

/* The rule nr_graph_fold_constants applies to one node. */
static bool foldable(const nr_graph *g, const nr_node *n) {
  if (!n->def || !n->def->run || (n->def->flags & NR_OP_NO_FOLD) || has_subgraph(n))
    return false;
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0 && !nr_pu_is_const(g, n->inputs[i]))
      return false;
  return true;
}

static bool fold_applies(const nr_graph *g, const nr_node *n) {
  for (int k = 0; k < g->n_nodes; k++)
    if (foldable(g, &g->nodes[k]))
      return true;
  return false;
}

static nr_status run_fold(nr_compile_ctx *c) {
  if (!nr_route_is(c->route, NR_KNOB_FOLD_CONSTANTS, NULL, "all"))
    return NR_OK;
  nr_status st = nr_graph_fold_constants(c->graph, c->err);
  return st ? st : nr_pu_finish(c->graph, c->err);
}

const nr_pass nr_pass_fold = {"fold", run_fold};

const nr_knob_def nr_knobs_fold[] = {
    [NR_KNOB_ROW(NR_KNOB_FOLD_CONSTANTS)] =
    {"fold.constants", "all|none", "all", NR_KNOB_GLOBAL, 0, 0,
     "evaluate nodes whose inputs are all constants at build time (none: at run time)",
     fold_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_FOLD_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_fold, NR_KNOB_FOLD_END);
