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
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "util/device.h"
#include "util/sha256.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void inspect_usage(FILE *f) {
  fprintf(f, "usage: nnroute inspect ENGINE [--json] [--unsafe-ignore-environment]\n"
             "                       [--verify KEYFILE]\n\n"
             "Prints an engine's route, environment fingerprint, versions, model hash,\n"
             "inputs and outputs, memory sizes and, per step, the node, its op, the tactic\n"
             "(kernel) that runs it, the tactic's source, the layout of input 0 -> output 0,\n"
             "the dtype, and the arena offset and size of each output. An engine built for\n"
             "another machine or nnroute is refused unless --unsafe-ignore-environment.\n"
             "--verify refuses an engine not signed with KEYFILE (`nnroute build --sign`).\n");
}

/* ---- what a step shows -------------------------------------------------------------- */

typedef struct step_view {
  const char *node, *op_domain, *op, *tactic, *source;
  char layout[40];
  const char *dtype;
  int n_out;
} step_view;

static void view_step(const nr_engine *e, int k, step_view *v) {
  nr_step_detail s = {sizeof s};
  nr_engine_step(e, k, &s);
  bool fault = s.flags & NR_STEP_INFO_FAULT;
  v->node = s.node_name ? s.node_name : fault ? "(test fault)" : "(reorder)";
  v->op_domain = s.op_domain ? s.op_domain : "";
  v->op = s.op_type ? s.op_type : fault ? "TestFault" : "Reorder";
  v->tactic = s.tactic;
  v->source = s.source;
  const char *li = s.layout_in ? s.layout_in : "-";
  const char *lo = s.layout_out ? s.layout_out : "-";
  if (!strcmp(li, lo))
    snprintf(v->layout, sizeof v->layout, "%s", lo);
  else
    snprintf(v->layout, sizeof v->layout, "%s->%s", li, lo);
  v->dtype = s.layout_out || s.layout_in ? nr_dtype_name(s.dtype) : "-";
  v->n_out = s.n_outputs;
}

static const char *shape_text(nr_dtype dtype, int rank, const int64_t *dims, char *buf,
                              size_t cap) {
  int n = snprintf(buf, cap, "%s[", nr_dtype_name(dtype));
  for (int d = 0; d < rank && n > 0 && (size_t)n < cap; d++)
    n += snprintf(buf + n, cap - (size_t)n, "%s%lld", d ? "x" : "", (long long)dims[d]);
  if (n > 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, "]");
  return buf;
}

/* Engine input or output i. */
static nr_io_info io_at(const nr_engine *e, bool input, int i) {
  nr_io_info info = {0};
  if (input)
    nr_engine_input_info(e, i, &info);
  else
    nr_engine_output_info(e, i, &info);
  return info;
}

/* ---- text --------------------------------------------------------------------------- */

static void print_io(const char *label, const nr_engine *e, bool input) {
  char buf[160];
  int n = input ? nr_engine_input_count(e) : nr_engine_output_count(e);
  for (int i = 0; i < n; i++) {
    nr_io_info io = io_at(e, input, i);
    printf("%-13s%s %s\n", i ? "" : label, io.name,
           shape_text(io.dtype, io.rank, io.dims, buf, sizeof buf));
  }
  if (!n)
    printf("%-13s(none)\n", label);
}

static void print_env(const nr_engine *e, nr_device device) {
  nr_environment fp = {sizeof fp};
  nr_engine_environment(e, &fp);
  printf("fingerprint  cpu %s / %s, %d cores\n", fp.cpu_vendor, fp.cpu_model, fp.cores);
  printf("             isa %s\n", *fp.isa ? fp.isa : "(none)");
  printf("             openblas %s\n             onednn %s\n             compiler %s\n",
         fp.openblas, fp.onednn, fp.compiler);
  if (device != NR_DEVICE_CPU)
    printf("device       %s: %s (compute capability %s), driver CUDA %s, runtime %s, "
           "cuBLAS %s, cuDNN %s\n", nr_device_name(device), fp.gpu, fp.gpu_cc,
           fp.gpu_driver, fp.cuda_runtime, fp.cublas, fp.cudnn);
}

static void print_step(const nr_engine *e, int i) {
  step_view v;
  view_step(e, i, &v);
  printf("%4d  %-24s %-18s %-32s %-9s %-14s %-9s", i, v.node, v.op, v.tactic, v.source,
         v.layout, v.dtype);
  for (int o = 0; o < v.n_out; o++) {
    nr_slot_info s = {sizeof s};
    if (!nr_engine_step_output(e, i, o, &s))
      printf(" %s @%llu +%llu", s.name, (unsigned long long)s.offset,
             (unsigned long long)s.nbytes);
  }
  printf("\n");
}

static void print_text(const nr_engine *e, const nr_engine_summary *p, const char *path,
                       long long file_bytes) {
  char sha[65];
  nr_hex(p->model_sha256, 32, sha);
  printf("engine       %s (%lld bytes)\n", path, file_bytes);
  printf("route        %s\n", *p->route ? p->route : "(default)");
  printf("nnroute      %s, knob schema %s\n", p->nnroute_version, p->knob_schema);
  printf("model sha256 %s\n", sha);
  printf("built        in %.3f s for %d threads\n", p->build_ms / 1000.0, p->threads);
  print_env(e, p->device);
  print_io("inputs", e, true);
  print_io("outputs", e, false);
  printf("memory       arena %llu bytes, scratch %llu bytes, weights %llu bytes\n",
         (unsigned long long)p->arena_bytes, (unsigned long long)p->scratch_bytes,
         (unsigned long long)p->weights_bytes);
  if (p->absorbed_constants)
    printf("             %d constants (%llu bytes) stored only as their readers' packed "
           "data\n", p->absorbed_constants, (unsigned long long)p->absorbed_bytes);
  if (*p->calib_sha256)
    printf("calibration  %d tensors from %d input sets, sha256 %s\n", p->calib_tensors,
           p->calib_input_sets, p->calib_sha256);
  printf("\nsteps (%d)\n%4s  %-24s %-18s %-32s %-9s %-14s %-9s %s\n", p->n_steps, "#",
         "node", "op", "tactic", "source", "layout", "dtype", "outputs (slot @offset +bytes)");
  for (int i = 0; i < p->n_steps; i++)
    print_step(e, i);
}

/* ---- JSON --------------------------------------------------------------------------- */

static cJSON *json_io(const nr_engine *e, bool input) {
  cJSON *arr = cJSON_CreateArray();
  int n = input ? nr_engine_input_count(e) : nr_engine_output_count(e);
  for (int i = 0; i < n; i++) {
    nr_io_info s = io_at(e, input, i);
    cJSON *o = cJSON_CreateObject(), *dims = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "name", s.name);
    cJSON_AddStringToObject(o, "dtype", nr_dtype_name(s.dtype));
    for (int d = 0; d < s.rank; d++)
      cJSON_AddItemToArray(dims, cJSON_CreateNumber((double)s.dims[d]));
    cJSON_AddItemToObject(o, "shape", dims);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

static cJSON *json_fingerprint(const nr_engine *e) {
  nr_environment env = {sizeof env};
  nr_engine_environment(e, &env);
  const nr_environment *fp = &env;
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

static cJSON *json_step(const nr_engine *e, int index) {
  step_view v;
  view_step(e, index, &v);
  cJSON *o = cJSON_CreateObject(), *outs = cJSON_CreateArray();
  cJSON_AddNumberToObject(o, "index", index);
  cJSON_AddStringToObject(o, "node", v.node);
  cJSON_AddStringToObject(o, "op", v.op);
  cJSON_AddStringToObject(o, "domain", v.op_domain);
  cJSON_AddStringToObject(o, "tactic", v.tactic);
  cJSON_AddStringToObject(o, "source", v.source);
  cJSON_AddStringToObject(o, "layout", v.layout);
  cJSON_AddStringToObject(o, "dtype", v.dtype);
  for (int k = 0; k < v.n_out; k++) {
    nr_slot_info sl = {sizeof sl};
    if (nr_engine_step_output(e, index, k, &sl))
      continue;
    cJSON *so = cJSON_CreateObject();
    cJSON_AddStringToObject(so, "slot", sl.name);
    cJSON_AddNumberToObject(so, "offset", (double)sl.offset);
    cJSON_AddNumberToObject(so, "bytes", (double)sl.nbytes);
    cJSON_AddItemToArray(outs, so);
  }
  cJSON_AddItemToObject(o, "outputs", outs);
  return o;
}

static void json_calibration(cJSON *root, const nr_engine_summary *p) {
  if (!*p->calib_sha256)
    return;
  cJSON *c = cJSON_AddObjectToObject(root, "calibration");
  cJSON_AddNumberToObject(c, "tensors", p->calib_tensors);
  cJSON_AddNumberToObject(c, "input_sets", p->calib_input_sets);
  cJSON_AddStringToObject(c, "sha256", p->calib_sha256);
}

static int print_json(const nr_engine *e, const nr_engine_summary *p, long long file_bytes) {
  char sha[65];
  nr_hex(p->model_sha256, 32, sha);
  cJSON *root = cJSON_CreateObject(), *steps = cJSON_CreateArray();
  cJSON_AddStringToObject(root, "route", p->route);
  cJSON_AddItemToObject(root, "fingerprint", json_fingerprint(e));
  cJSON_AddStringToObject(root, "nnroute_version", p->nnroute_version);
  cJSON_AddStringToObject(root, "knob_schema", p->knob_schema);
  cJSON_AddStringToObject(root, "model_sha256", sha);
  cJSON_AddNumberToObject(root, "build_ms", (double)p->build_ms);
  cJSON_AddNumberToObject(root, "threads", p->threads);
  cJSON_AddNumberToObject(root, "file_bytes", (double)file_bytes);
  json_calibration(root, p);
  cJSON_AddItemToObject(root, "inputs", json_io(e, true));
  cJSON_AddItemToObject(root, "outputs", json_io(e, false));
  cJSON_AddNumberToObject(root, "arena_bytes", (double)p->arena_bytes);
  cJSON_AddNumberToObject(root, "scratch_bytes", (double)p->scratch_bytes);
  cJSON_AddNumberToObject(root, "weights_bytes", (double)p->weights_bytes);
  cJSON_AddNumberToObject(root, "absorbed_constants", p->absorbed_constants);
  cJSON_AddNumberToObject(root, "absorbed_bytes", (double)p->absorbed_bytes);
  for (int i = 0; i < p->n_steps; i++)
    cJSON_AddItemToArray(steps, json_step(e, i));
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
  const char *verify = NULL;
  bool unsafe = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      inspect_usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      json = true;
    } else if (!strcmp(argv[i], "--unsafe-ignore-environment")) {
      unsafe = true;
    } else if (!strcmp(argv[i], "--verify") && i + 1 < argc) {
      verify = argv[++i];
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
  if (nr_cli_load_engine(path, unsafe, verify, &e, &err))
    return nr_cli_fail(&err);
  struct stat sb;
  long long bytes = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
  nr_engine_summary sum = {sizeof sum};
  int rc = 0;
  if (nr_engine_summarize(e, &sum, &err))
    rc = nr_cli_fail(&err);
  else if (json)
    rc = print_json(e, &sum, bytes);
  else
    print_text(e, &sum, path, bytes);
  nr_engine_destroy(e);
  return rc;
}
