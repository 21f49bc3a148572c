/* cli_ops.c - `nnroute ops`: lists the operators the reference executor implements,
 * straight from the registry tables, as text or as the markdown of docs/operators.md. */
#include "cli/cli.h"
#include "ir/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct op_row {
  const char *domain, *op_type;
  int since;
} op_row;

typedef struct op_rows {
  op_row *rows;
  int n, cap;
} op_rows;

static void collect(const nr_op_def *d, void *user) {
  op_rows *r = user;
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 256;
    op_row *p = realloc(r->rows, sizeof *p * (size_t)r->cap);
    if (!p)
      return;
    r->rows = p;
  }
  r->rows[r->n++] = (op_row){d->domain ? d->domain : "", d->op_type, d->since};
}

static int by_name(const void *a, const void *b) {
  const op_row *x = a, *y = b;
  int c = strcmp(x->domain, y->domain);
  if (!c)
    c = strcmp(x->op_type, y->op_type);
  return c ? c : x->since - y->since;
}

int nr_cli_ops(int argc, char **argv) {
  bool md = argc > 1 && !strcmp(argv[1], "--markdown");
  op_rows r = {0};
  nr_op_foreach(collect, &r);
  qsort(r.rows, (size_t)r.n, sizeof *r.rows, by_name);
  if (md)
    printf("| domain | operator | opset versions with their own reference row |\n"
           "| --- | --- | --- |\n");
  for (int i = 0; i < r.n;) {
    int j = i;
    char versions[256] = "";
    size_t len = 0;
    for (; j < r.n && !strcmp(r.rows[j].op_type, r.rows[i].op_type) &&
           !strcmp(r.rows[j].domain, r.rows[i].domain);
         j++)
      len += (size_t)snprintf(versions + len, len < sizeof versions ? sizeof versions - len : 0,
                              "%s%d+", j > i ? ", " : "", r.rows[j].since);
    const char *dom = *r.rows[i].domain ? r.rows[i].domain : "ai.onnx";
    if (md)
      printf("| %s | %s | %s |\n", dom, r.rows[i].op_type, versions);
    else
      printf("%-10s %-28s %s\n", dom, r.rows[i].op_type, versions);
    i = j;
  }
  free(r.rows);
  return 0;
}
