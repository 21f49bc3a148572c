/* cli_knobs.c - `nnroute knobs`: the knobs of nnroute, or every knob instance of one
 * model, as a text table, JSON (for scripts and the tuner's users) or the markdown of
 * docs/knobs.md.
 *
 * Everything printed comes from the knob tables through the knob space, so this is
 * exactly what the route parser accepts: without a model, the global knobs and the
 * per-node knob definitions; with one, the instances of the prepared, named graph. */
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "util/device.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHAPES 64

typedef struct knobs_args {
  const char *model;
  const char *shape[MAX_SHAPES];
  int n_shapes;
  bool json, markdown;
  nr_device device;
} knobs_args;

/* One printed line: an instance, or a per-node definition when there is no model. */
typedef nr_knob_info row;

static void knobs_usage(FILE *f) {
  fprintf(f,
          "usage: nnroute knobs [MODEL] [--shape NAME=DIMS]... [--json] [--markdown]\n"
          "                     [--device cpu|cuda]\n\n"
          "Lists the knobs a build route can set. Without MODEL: the global knobs and\n"
          "the per-node knob definitions. With MODEL: every knob instance of the\n"
          "prepared model (ids to use as -KNOB@NODE=VALUE). --markdown prints the\n"
          "definitions as the table of docs/knobs.md. Test knobs are listed only with\n"
          "NNROUTE_TEST_KNOBS=1. --device: the knobs of builds for that device (default\n"
          "cpu; --markdown lists every device's).\n");
}

static int parse_args(int argc, char **argv, knobs_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      knobs_usage(stdout);
      return -1;
    } else if (!strcmp(arg, "--json")) {
      a->json = true;
    } else if (!strcmp(arg, "--markdown")) {
      a->markdown = true;
    } else if (!strcmp(arg, "--shape") && i + 1 < argc && a->n_shapes < MAX_SHAPES) {
      a->shape[a->n_shapes++] = argv[++i];
    } else if (!strcmp(arg, "--device") && i + 1 < argc) {
      if (!nr_device_parse(argv[++i], &a->device)) {
        fprintf(stderr, "nnroute knobs: --device '%s': cpu or cuda\n", argv[i]);
        return 2;
      }
    } else if (arg[0] != '-' && !a->model) {
      a->model = arg;
    } else {
      fprintf(stderr, "nnroute knobs: unexpected argument '%s'\n\n", arg);
      knobs_usage(stderr);
      return 2;
    }
  }
  if (a->json && a->markdown) {
    fprintf(stderr, "nnroute knobs: --json and --markdown exclude each other\n");
    return 2;
  }
  return 0;
}

/* ---- rows ----------------------------------------------------------------------- */

typedef struct row_list {
  const row **rows;
  int n, cap;
} row_list;

static void push_all(row_list *l, const nr_knob_list *k) {
  for (int i = 0; i < k->n; i++) {
    if (l->n == l->cap) {
      int cap = l->cap ? l->cap * 2 : 64;
      const row **p = realloc(l->rows, sizeof *p * (size_t)cap);
      if (!p)
        return;
      l->rows = p;
      l->cap = cap;
    }
    l->rows[l->n++] = &k->knobs[i];
  }
}

/* ---- text ----------------------------------------------------------------------- */

static void flags_text(unsigned f, char *buf) {
  int n = 0;
  if (f & NR_KNOB_INFO_ACCURACY)
    buf[n++] = 'A';
  if (f & NR_KNOB_INFO_LAYOUT)
    buf[n++] = 'L';
  if (f & NR_KNOB_INFO_MEMORY)
    buf[n++] = 'M';
  if (f & NR_KNOB_INFO_TEST)
    buf[n++] = 'T';
  if (f & NR_KNOB_INFO_PRECISION)
    buf[n++] = 'P';
  if (f & NR_KNOB_INFO_DATA)
    buf[n++] = 'D';
  if (f & NR_KNOB_INFO_SLOW_BUILD)
    buf[n++] = 'S';
  if (f & NR_KNOB_INFO_APPROX_DEFAULT)
    buf[n++] = 'E';
  if (f & NR_KNOB_INFO_THREADS)
    buf[n++] = 'C';
  if (f & NR_KNOB_INFO_RUNTIME)
    buf[n++] = 'R';
  if (!n)
    buf[n++] = '-';
  buf[n] = '\0';
}

static void values_text(const row *r, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int v = 0; v < r->n_values && used < cap; v++) {
    int w = snprintf(buf + used, cap - used, "%s%s%s", v ? "|" : "", r->values[v],
                     v == r->dflt ? "*" : "");
    used += w > 0 ? (size_t)w : 0;
  }
}

static const char *scope_text(const row *r) {
  if (r->global)
    return "global";
  return r->op_type ? r->op_type : "per-node";
}

static void print_text(const row_list *l) {
  int wid = 4, wval = 6;
  char vals[1024], flags[12];
  for (int i = 0; i < l->n; i++) {
    values_text(l->rows[i], vals, sizeof vals);
    wid = (int)strlen(l->rows[i]->id) > wid ? (int)strlen(l->rows[i]->id) : wid;
    wval = (int)strlen(vals) > wval ? (int)strlen(vals) : wval;
  }
  printf("%-*s  %-10s  %-*s  %-5s  %s\n", wid, "KNOB", "SCOPE", wval, "VALUES", "FLAGS",
         "HELP");
  for (int i = 0; i < l->n; i++) {
    const row *r = l->rows[i];
    values_text(r, vals, sizeof vals);
    flags_text(r->flags, flags);
    printf("%-*s  %-10s  %-*s  %-5s  %s\n", wid, r->id, scope_text(r), wval, vals, flags,
           r->help);
  }
  printf("\n%d knob%s (* marks the default; flags: A accuracy, L layout, M memory, "
         "T test, P reduced precision: a bound per value or none, D depends on data or "
         "timings, C acts with 2+ threads only)\n", l->n, l->n == 1 ? "" : "s");
}

/* ---- JSON ----------------------------------------------------------------------- */

static cJSON *row_json(const row *r) {
  cJSON *o = cJSON_CreateObject(), *vals = cJSON_CreateArray();
  cJSON_AddStringToObject(o, "name", r->name);
  for (int v = 0; v < r->n_values; v++)
    cJSON_AddItemToArray(vals, cJSON_CreateString(r->values[v]));
  cJSON_AddItemToObject(o, "values", vals);
  cJSON_AddStringToObject(o, "default", r->values[r->dflt]);
  cJSON_AddStringToObject(o, "scope", r->global ? "global" : "node");
  cJSON_AddItemToObject(o, "node", r->node ? cJSON_CreateString(r->node) : cJSON_CreateNull());
  cJSON_AddItemToObject(o, "op_type",
                        r->op_type ? cJSON_CreateString(r->op_type) : cJSON_CreateNull());
  cJSON_AddBoolToObject(o, "affects_accuracy", r->flags & NR_KNOB_INFO_ACCURACY);
  cJSON_AddBoolToObject(o, "affects_layout", r->flags & NR_KNOB_INFO_LAYOUT);
  cJSON_AddBoolToObject(o, "threads_only", r->flags & NR_KNOB_INFO_THREADS);
  cJSON_AddBoolToObject(o, "runtime", r->flags & NR_KNOB_INFO_RUNTIME);
  cJSON_AddNumberToObject(o, "error_bound", r->error_bound);
  if (r->def_bounds) { /* precision: the bound of each value valid here */
    cJSON *b = cJSON_CreateObject();
    for (int v = 0; v < r->n_values; v++)
      cJSON_AddNumberToObject(b, r->values[v], nr_knob_info_value_bound(r, v));
    cJSON_AddItemToObject(o, "value_bounds", b);
  }
  cJSON_AddStringToObject(o, "help", r->help);
  return o;
}

static int count_kinds(const row_list *l) {
  int kinds = 0;
  for (int i = 0; i < l->n; i++) {
    int j = 0;
    while (j < i && strcmp(l->rows[j]->name, l->rows[i]->name)) /* names are unique */
      j++;
    kinds += j == i;
  }
  return kinds;
}

static int print_json(const row_list *l) {
  char schema[17];
  cJSON *root = cJSON_CreateObject(), *arr = cJSON_CreateArray();
  cJSON_AddStringToObject(root, "nnroute_version", NR_VERSION_STRING);
  cJSON_AddStringToObject(root, "knob_schema", nr_knob_list_schema(schema));
  for (int i = 0; i < l->n; i++)
    cJSON_AddItemToArray(arr, row_json(l->rows[i]));
  cJSON_AddItemToObject(root, "knobs", arr);
  cJSON_AddNumberToObject(root, "count", l->n);
  cJSON_AddNumberToObject(root, "kinds", count_kinds(l));
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) {
    fprintf(stderr, "nnroute knobs: out of memory writing JSON\n");
    return 1;
  }
  printf("%s\n", text);
  free(text);
  return 0;
}

/* ---- markdown ------------------------------------------------------------------- */

static void md_cell(const char *s) {
  for (; s && *s; s++)
    printf(*s == '|' ? "\\|" : "%c", *s);
}

static void md_row(const row *r) {
  char flags[12];
  flags_text(r->flags, flags);
  printf("| `%s` | %s | ", r->name, r->global ? "global" : "node");
  for (int v = 0; v < r->n_values; v++)
    printf(v == r->dflt ? "%s**`%s`**" : "%s`%s`", v ? ", " : "", r->values[v]);
  printf(" | %s | ", flags);
  if (!r->def_bounds)
    printf("%.3g", r->error_bound);
  for (int v = 0; r->def_bounds && v < r->n_values; v++)
    printf("%s%s %.3g", v ? ", " : "", r->values[v], nr_knob_info_value_bound(r, v));
  printf(" | ");
  md_cell(r->help);
  printf(" |\n");
}

static int print_markdown(void) {
  nr_knob_list_options o = {.size = sizeof o, .all_devices = true};
  nr_knob_list defs = {0};
  nr_error err = {0};
  if (nr_knob_list_definitions(&o, &defs, &err))
    return nr_cli_fail(&err);
  printf("# Knobs\n\n"
         "<!-- Generated by `nnroute knobs --markdown > docs/knobs.md`; do not edit. -->\n\n"
         "Every scheduling decision of the compiler is a knob. A build route sets them:\n"
         "`-KNOB=VALUE` (a global knob, or every instance of a per-node knob),\n"
         "`-KNOB@NODE=VALUE`, `-KNOB@*=VALUE`, `-KNOB@OpType=VALUE`; route expressions\n"
         "also take `[a|b]` and `*`. A token naming several instances sets those\n"
         "where its value is valid (at least one must be). `nnroute knobs MODEL` lists\n"
         "the instances of one model with the values valid at each. The default value\n"
         "is in bold. Flags:\n"
         "A changes results beyond floating-point reassociation (bounded by the error\n"
         "bound, a relative L2 error), L changes activation layout, M changes memory\n"
         "planning only, T is a test knob (hidden unless `NNROUTE_TEST_KNOBS=1`), P is\n"
         "reduced precision (a bound per value, what one node in that precision may\n"
         "add, or none documented: then only the user's tolerance decides; see\n"
         "docs/precision.md), D means a value's effect depends on calibration data or\n"
         "on this machine's timings or libraries (which algorithms cuDNN and cuBLASLt\n"
         "offer on this GPU),\n"
         "S means a non-default value makes the build much slower (the tuner tries it\n"
         "last), E means the default value itself may add error up to the bound where it\n"
         "applies (it is counted once in the default route's bound), C means the knob\n"
         "acts only when a context runs two or more threads (a tuning session with\n"
         "`--threads 1` leaves it out of its space), R means the knob is read when a\n"
         "context is created, from the engine's route.\n\n"
         "| knob | scope | values | flags | error bound | help |\n"
         "| --- | --- | --- | --- | --- | --- |\n");
  for (int i = 0; i < defs.n; i++)
    md_row(&defs.knobs[i]);
  printf("\n%d knobs.\n", defs.n);
  nr_knob_list_free(&defs);
  return 0;
}

/* ---- model ---------------------------------------------------------------------- */

static int apply_shapes(nr_model *m, const knobs_args *a, nr_error *err) {
  for (int s = 0; s < a->n_shapes; s++) {
    const char *dims_text;
    char *name = nr_cli_split_assign(a->shape[s], &dims_text);
    int rank;
    int64_t dims[NR_MAX_RANK];
    if (!name || !nr_cli_parse_dims(dims_text, &rank, dims)) {
      fprintf(stderr, "nnroute knobs: --shape '%s' is not NAME=DIMS (e.g. x=1x3x224x224)\n",
              a->shape[s]);
      free(name);
      return 2;
    }
    nr_status st = nr_model_set_input_shape(m, name, rank, dims, err);
    free(name);
    if (st)
      return nr_cli_fail(err);
  }
  return 0;
}

/* The knob instances of the model (prepared and named), else the global knobs and the
 * per-node definitions; fills l with the rows of both lists. */
static int load_knobs(const knobs_args *a, nr_model **model, nr_knob_list *inst,
                      nr_knob_list *defs, row_list *l, nr_error *err) {
  nr_knob_list_options o = {.size = sizeof o, .device = a->device, .node_only = true};
  if (a->model && nr_model_load(a->model, NULL, model, err))
    return nr_cli_fail(err);
  int rc = a->model ? apply_shapes(*model, a, err) : 0;
  if (rc)
    return rc;
  if (nr_knob_list_build(*model, &o, inst, err) ||
      (!a->model && nr_knob_list_definitions(&o, defs, err)))
    return nr_cli_fail(err);
  push_all(l, inst);
  push_all(l, defs);
  return 0;
}

int nr_cli_knobs(int argc, char **argv) {
  knobs_args a = {0};
  int rc = parse_args(argc, argv, &a);
  if (rc)
    return rc < 0 ? 0 : rc;
  if (a.markdown)
    return print_markdown();
  nr_error err = {0};
  nr_model *model = NULL;
  nr_knob_list inst = {0}, defs = {0};
  row_list l = {0};
  if ((rc = load_knobs(&a, &model, &inst, &defs, &l, &err)))
    goto done;
  if (a.json)
    rc = print_json(&l);
  else
    print_text(&l);
done:
  free(l.rows);
  nr_knob_list_free(&defs);
  nr_knob_list_free(&inst);
  nr_model_destroy(model);
  return rc;
}
