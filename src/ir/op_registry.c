/* op_registry.c - the list of operator families and the lookup of an operator's row.
 *
 * Each family file under src/kernels/ref/ exports one table; this file is the only
 * place that knows them all. Lookup picks, among rows with the node's domain and op
 * type, the one with the greatest `since` that does not exceed the node's opset. */
#include "ir/op.h"

#include <string.h>

#define NR_FAMILIES(X)                                                                 \
  X(elementwise) X(conv) X(pool) X(linalg) X(norm) X(reduce) X(shape) X(index)          \
  X(resize) X(quant) X(rnn) X(control) X(misc) X(fused)

#define NR_DECLARE(f) extern const nr_op_def nr_ref_ops_##f[];
NR_FAMILIES(NR_DECLARE)
#undef NR_DECLARE

static const nr_op_def *const families[] = {
#define NR_LIST(f) nr_ref_ops_##f,
    NR_FAMILIES(NR_LIST)
#undef NR_LIST
};

static bool same_domain(const char *a, const char *b) {
  if (!a || !strcmp(a, "ai.onnx")) a = "";
  if (!b || !strcmp(b, "ai.onnx")) b = "";
  return strcmp(a, b) == 0;
}

const nr_op_def *nr_op_find(const char *domain, const char *op_type, int opset) {
  const nr_op_def *best = NULL;
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    for (const nr_op_def *d = families[f]; d->op_type; d++) {
      if (strcmp(d->op_type, op_type) || !same_domain(d->domain, domain))
        continue;
      if (d->since <= opset && (!best || d->since > best->since))
        best = d;
    }
  }
  return best;
}

void nr_op_foreach(void (*fn)(const nr_op_def *def, void *user), void *user) {
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
    for (const nr_op_def *d = families[f]; d->op_type; d++)
      fn(d, user);
}
