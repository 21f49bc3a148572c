/* tactic_registry.c - the list of tactic tables (families.h), lookup by id, and
 * whether some fast tactic runs a node (what fusion passes ask before fusing). */
#include "plan/families.h"
#include "plan/tactic.h"

#include <string.h>

#define NR_DECLARE(f) extern const nr_tactic nr_tactics_##f[];
NR_TACTIC_FAMILIES(NR_DECLARE)
#undef NR_DECLARE

static const nr_tactic *const tables[] = {
#define NR_LIST(f) nr_tactics_##f,
    NR_TACTIC_FAMILIES(NR_LIST)
#undef NR_LIST
};

void nr_tactic_foreach(void (*fn)(const nr_tactic *t, void *user), void *user) {
  for (size_t f = 0; f < sizeof tables / sizeof tables[0]; f++)
    for (const nr_tactic *t = tables[f]; t->id; t++)
      fn(t, user);
}

const nr_tactic *nr_tactic_find(const char *id) {
  for (size_t f = 0; f < sizeof tables / sizeof tables[0]; f++)
    for (const nr_tactic *t = tables[f]; t->id; t++)
      if (!strcmp(t->id, id))
        return t;
  return NULL;
}

/* ---- fast tactics for a node ------------------------------------------------------ */

typedef struct fast_query {
  const nr_tactic_ctx *ctx;
  bool found;
} fast_query;

static void fast_one(const nr_tactic *t, void *user) {
  fast_query *q = user;
  const nr_node *n = q->ctx->node;
  const char *td = t->domain ? t->domain : "", *nd = n->domain ? n->domain : "";
  if (q->found || !t->op_type || strcmp(t->op_type, n->op_type) || strcmp(td, nd) ||
      (t->source && !strcmp(t->source, "ref")) || t->device != q->ctx->device ||
      t->precision != NR_PREC_FP32 || (t->device == NR_DEVICE_CPU && (t->isa & ~nr_cpu_isa())))
    return;
  q->found = !t->supports || t->supports(q->ctx);
}

bool nr_node_has_fast_tactic(const nr_graph *g, const nr_node *n, nr_device device) {
  nr_node_probe p;
  fast_query q = {&p.ctx, false};
  if (nr_node_probe_init(&p, g, n)) {
    p.ctx.device = device;
    nr_tactic_foreach(fast_one, &q);
  }
  nr_node_probe_free(&p);
  return q.found;
}
