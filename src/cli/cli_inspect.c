/* cli_inspect.c - `nnroute inspect`: what an engine file holds, as a table for people
 * or as JSON for scripts (the tuner's reports read the JSON).
 *
 * Key decision: every per-step line names the tactic id, which is also the kernel's
 * name, so one grep leads from an inspect line to the kernel's source. The JSON keys
 * are stable: "route", "fingerprint", "nnroute_version", "knob_schema",
 * "model_sha256", "inputs", "outputs", "arena_bytes", "weights_bytes",
 * "absorbed_constants", "absorbed_bytes", "steps" (each
 * with "node", "op", "tactic", "source", "layout", "dtype", "outputs"); keys may be
 * added, never renamed. */
#include "cli/cli.h"
#include "engine/engine.h"
#include "plan/knob.h"
#include "plan/quant.h"
#include "util/sha256.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Constants the engine stores only in packed form (NR_SLOT_ABSORBED) and their
 * logical bytes. */
static int count_absorbed(const nr_plan *p, uint64_t *bytes) {
  int n = 0;
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].kind == NR_SLOT_ABSORBED) {
      n++;
      *bytes += p->slots[i].nbytes;
    }
  return n;
}

static void inspect_usage(FILE *f) {
  fprintf(f, "usage: nnroute inspect ENGINE [--json] [--unsafe-ignore-environment]\n\n"
             "Prints an engine's route, environment fingerprint, versions, model hash,\n"
             "inputs and outputs, memory sizes and, per step, the node, its op, the tactic\n"
             "(kernel) that runs it, the tactic's source, the layout of input 0 -> output 0,\n"
             "the dtype, and the arena offset and size of each output. An engine built for\n"
             "another machine or nnroute is refused unless --unsafe-ignore-environment.\n");
}

/* ---- what a step shows -------------------------------------------------------------- */

typedef struct step_view {
  const char *node, *op_domain, *op, *tactic, *source;
  char layout[40];
  const char *dtype;
} step_view;

static const nr_slot *step_slot(const nr_plan *p, const nr_step *s, bool out, int i) {
  int n = out ? s->n_out : s->n_in;
  int idx = i < n ? (out ? s->out[i] : s->in[i]) : -1;
  return idx >= 0 ? &p->slots[idx] : NULL;
}

static void view_step(const nr_plan *p, const nr_step *s, step_view *v) {
  const nr_node *n = s->node >= 0 ? &p->graph->nodes[s->node] : NULL;
  bool fault = !n && s->tactic->algo && !strcmp(s->tactic->algo, "fault");
  v->node = n ? n->name : fault ? "(test fault)" : "(reorder)";
  v->op_domain = n ? n->domain : "";
  v->op = n ? n->op_type : fault ? "TestFault" : "Reorder";
  v->tactic = s->tactic->id;
  v->source = s->tactic->source ? s->tactic->source : "";
  const nr_slot *in = step_slot(p, s, false, 0), *out = step_slot(p, s, true, 0);
  const char *li = in ? nr_layout_name(in->layout) : "-";
  const char *lo = out ? nr_layout_name(out->layout) : "-";
  if (!strcmp(li, lo))
    snprintf(v->layout, sizeof v->layout, "%s", lo);
  else
    snprintf(v->layout, sizeof v->layout, "%s->%s", li, lo);
  const nr_slot *d = out ? out : in;
  v->dtype = d ? nr_dtype_name(d->dtype) : "-";
}

static const char *shape_text(const nr_slot *s, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s[", nr_dtype_name(s->dtype));
  for (int d = 0; d < s->rank && n > 0 && (size_t)n < cap; d++)
    n += snprintf(buf + n, cap - (size_t)n, "%s%lld", d ? "x" : "", (long long)s->dims[d]);
  if (n > 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, "]");
  return buf;
}

/* ---- text --------------------------------------------------------------------------- */

static void print_io(const char *label, const nr_plan *p, const int *slots, int n) {
  char buf[160];
  for (int i = 0; i < n; i++)
    printf("%-13s%s %s\n", i ? "" : label, p->slots[slots[i]].name,
           shape_text(&p->slots[slots[i]], buf, sizeof buf));
  if (!n)
    printf("%-13s(none)\n", label);
}

static void print_text(const nr_engine *e, const char *path, long long file_bytes) {
  const nr_plan *p = e->plan;
  const nr_fingerprint *fp = &e->fingerprint;
  char sha[65];
  nr_hex(e->model_sha256, 32, sha);
  printf("engine       %s (%lld bytes)\n", path, file_bytes);
  printf("route        %s\n", p->route && *p->route ? p->route : "(default)");
  printf("nnroute      %s, knob schema %s\n", e->nnroute_version, e->knob_schema);
  printf("model sha256 %s\n", sha);
  printf("built        in %.3f s for %d threads\n", e->build_ms / 1000.0, e->threads);
  printf("fingerprint  cpu %s / %s, %d cores\n", fp->cpu_vendor, fp->cpu_model, fp->cores);
  printf("             isa %s\n", *fp->isa ? fp->isa : "(none)");
  printf("             openblas %s\n             onednn %s\n             compiler %s\n",
         fp->openblas, fp->onednn, fp->compiler);
  if (p->device != NR_DEVICE_CPU)
    printf("device       %s: %s (compute capability %s), driver CUDA %s, runtime %s, "
           "cuBLAS %s, cuDNN %s\n", nr_device_name(p->device), fp->gpu, fp->gpu_cc,
           fp->gpu_driver, fp->cuda_runtime, fp->cublas, fp->cudnn);
  print_io("inputs", p, p->inputs, p->n_inputs);
  print_io("outputs", p, p->outputs, p->n_outputs);
  uint64_t absorbed_bytes = 0;
  int absorbed = count_absorbed(p, &absorbed_bytes);
  printf("memory       arena %llu bytes, scratch %llu bytes, weights %llu bytes\n",
         (unsigned long long)p->arena_size, (unsigned long long)p->scratch_size,
         (unsigned long long)p->weights_size);
  if (absorbed)
    printf("             %d constants (%llu bytes) stored only as their readers' packed "
           "data\n", absorbed, (unsigned long long)absorbed_bytes);
  char digest[65];
  if (e->calib && !nr_calib_digest(e->calib, digest, NULL))
    printf("calibration  %d tensors from %d input sets, sha256 %s\n", e->calib->n,
           e->calib->samples, digest);
  printf("\nsteps (%d)\n%4s  %-24s %-18s %-32s %-9s %-14s %-9s %s\n", p->n_steps, "#",
         "node", "op", "tactic", "source", "layout", "dtype", "outputs (slot @offset +bytes)");
  for (int i = 0; i < p->n_steps; i++) {
    step_view v;
    view_step(p, &p->steps[i], &v);
    printf("%4d  %-24s %-18s %-32s %-9s %-14s %-9s", i, v.node, v.op, v.tactic, v.source,
           v.layout, v.dtype);
    for (int o = 0; o < p->steps[i].n_out; o++) {
      const nr_slot *s = step_slot(p, &p->steps[i], true, o);
      if (s)
        printf(" %s @%llu +%llu", s->name, (unsigned long long)s->offset,
               (unsigned long long)s->nbytes);
    }
    printf("\n");
  }
}

/* ---- JSON --------------------------------------------------------------------------- */

static cJSON *json_io(const nr_plan *p, const int *slots, int n) {
  cJSON *arr = cJSON_CreateArray();
  for (int i = 0; i < n; i++) {
    const nr_slot *s = &p->slots[slots[i]];
    cJSON *o = cJSON_CreateObject(), *dims = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "name", s->name);
    cJSON_AddStringToObject(o, "dtype", nr_dtype_name(s->dtype));
    for (int d = 0; d < s->rank; d++)
      cJSON_AddItemToArray(dims, cJSON_CreateNumber((double)s->dims[d]));
    cJSON_AddItemToObject(o, "shape", dims);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static cJSON *json_fingerprint(const nr_fingerprint *fp) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "cpu_vendor", fp->cpu_vendor);
  cJSON_AddStringToObject(o, "cpu_model", fp->cpu_model);
  cJSON_AddStringToObject(o, "isa", fp->isa);
  cJSON_AddNumberToObject(o, "cores", fp->cores);
  cJSON_AddStringToObject(o, "openblas", fp->openblas);
  cJSON_AddStringToObject(o, "onednn", fp->onednn);
  cJSON_AddStringToObject(o, "compiler", fp->compiler);
  cJSON_AddStringToObject(o, "device", nr_device_name(fp->device));
  if (fp->device != NR_DEVICE_CPU) {
    cJSON_AddStringToObject(o, "gpu", fp->gpu);
    cJSON_AddStringToObject(o, "gpu_compute_capability", fp->gpu_cc);
    cJSON_AddStringToObject(o, "gpu_driver", fp->gpu_driver);
    cJSON_AddStringToObject(o, "cuda_runtime", fp->cuda_runtime);
    cJSON_AddStringToObject(o, "cublas", fp->cublas);
    cJSON_AddStringToObject(o, "cudnn", fp->cudnn);
  }
  return o;
}

static cJSON *json_step(const nr_plan *p, const nr_step *s, int index) {
  step_view v;
  view_step(p, s, &v);
  cJSON *o = cJSON_CreateObject(), *outs = cJSON_CreateArray();
  cJSON_AddNumberToObject(o, "index", index);
  cJSON_AddStringToObject(o, "node", v.node);
  cJSON_AddStringToObject(o, "op", v.op);
  cJSON_AddStringToObject(o, "domain", v.op_domain);
  cJSON_AddStringToObject(o, "tactic", v.tactic);
  cJSON_AddStringToObject(o, "source", v.source);
  cJSON_AddStringToObject(o, "layout", v.layout);
  cJSON_AddStringToObject(o, "dtype", v.dtype);
  for (int k = 0; k < s->n_out; k++) {
    const nr_slot *sl = step_slot(p, s, true, k);
    if (!sl)
      continue;
    cJSON *so = cJSON_CreateObject();
    cJSON_AddStringToObject(so, "slot", sl->name);
    cJSON_AddNumberToObject(so, "offset", (double)sl->offset);
    cJSON_AddNumberToObject(so, "bytes", (double)sl->nbytes);
    cJSON_AddItemToArray(outs, so);
  }
  cJSON_AddItemToObject(o, "outputs", outs);
  return o;
}

static int print_json(const nr_engine *e, long long file_bytes) {
  const nr_plan *p = e->plan;
  char sha[65];
  nr_hex(e->model_sha256, 32, sha);
  cJSON *root = cJSON_CreateObject(), *steps = cJSON_CreateArray();
  cJSON_AddStringToObject(root, "route", p->route ? p->route : "");
  cJSON_AddItemToObject(root, "fingerprint", json_fingerprint(&e->fingerprint));
  cJSON_AddStringToObject(root, "nnroute_version", e->nnroute_version);
  cJSON_AddStringToObject(root, "knob_schema", e->knob_schema);
  cJSON_AddStringToObject(root, "model_sha256", sha);
  cJSON_AddNumberToObject(root, "build_ms", (double)e->build_ms);
  cJSON_AddNumberToObject(root, "threads", e->threads);
  cJSON_AddNumberToObject(root, "file_bytes", (double)file_bytes);
  char digest[65];
  if (e->calib && !nr_calib_digest(e->calib, digest, NULL)) {
    cJSON *c = cJSON_AddObjectToObject(root, "calibration");
    cJSON_AddNumberToObject(c, "tensors", e->calib->n);
    cJSON_AddNumberToObject(c, "input_sets", e->calib->samples);
    cJSON_AddStringToObject(c, "sha256", digest);
  }
  cJSON_AddItemToObject(root, "inputs", json_io(p, p->inputs, p->n_inputs));
  cJSON_AddItemToObject(root, "outputs", json_io(p, p->outputs, p->n_outputs));
  cJSON_AddNumberToObject(root, "arena_bytes", (double)p->arena_size);
  cJSON_AddNumberToObject(root, "scratch_bytes", (double)p->scratch_size);
  cJSON_AddNumberToObject(root, "weights_bytes", (double)p->weights_size);
  uint64_t absorbed_bytes = 0;
  cJSON_AddNumberToObject(root, "absorbed_constants", count_absorbed(p, &absorbed_bytes));
  cJSON_AddNumberToObject(root, "absorbed_bytes", (double)absorbed_bytes);
  for (int i = 0; i < p->n_steps; i++)
    cJSON_AddItemToArray(steps, json_step(p, &p->steps[i], i));
  cJSON_AddItemToObject(root, "steps", steps);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) {
    fprintf(stderr, "nnroute: out of memory printing JSON\n");
    return 1;
  }
  printf("%s\n", text);
  cJSON_free(text);
  return 0;
}

int nr_cli_inspect(int argc, char **argv) {
  const char *path = NULL;
  bool json = false;
  nr_engine_load_options opts = {sizeof opts, 0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      inspect_usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--unsafe-ignore-environment")) {
      opts.unsafe_ignore_environment = 1;
    } else if (argv[i][0] != '-' && !path) {
      path = argv[i];
    } else {
      fprintf(stderr, "nnroute inspect: unexpected argument '%s'\n\n", argv[i]);
      inspect_usage(stderr);
      return 2;
    }
  }
  if (!path) {
    inspect_usage(stderr);
    return 2;
  }
  nr_error err = {0};
  nr_engine *e = NULL;
  if (nr_engine_load(path, &opts, &e, &err))
    return nr_cli_fail(&err);
  struct stat sb;
  long long bytes = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
  int rc = 0;
  if (json)
    rc = print_json(e, bytes);
  else
    print_text(e, path, bytes);
  nr_engine_destroy(e);
  return rc;
}
