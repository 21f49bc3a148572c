/* cli_run.c - `nnroute run`: runs a model or an engine on given or seeded random
 * inputs and writes each output as DIR/<output name>.npy.
 *
 * A model runs as an engine built along --route (the default route when none is
 * given); --reference runs it on the reference executor instead, the oracle the
 * compiler is checked against. --inputs-dir reads a file named after each input or,
 * as `conformance` and `tune --reference` read them, the ONNX test-data layout
 * (input_K.pb, or the first test_data_set_N/), listed by the same scan; a model's free
 * dims take the files' shapes. Input problems (a missing file, a wrong shape or dtype,
 * an unknown name) name the file and the input and end with a list of every input
 * and the shape and dtype expected. */
#include "cli/cli.h"
#include "io/tensor_io.h"
#include "tune/pairs.h"
#include "util/device.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_ARGS 64

typedef struct run_args {
  const char *path, *inputs_dir, *output_dir, *route, *calibration, *verify;
  const char *input_spec[MAX_ARGS], *shape_spec[MAX_ARGS];
  int n_inputs, n_shapes, threads;
  bool reference, unsafe;
  uint64_t seed;
  nr_device device;
} run_args;

/* What runs: a model (shapes still adjustable) or an engine (shapes fixed). */
typedef struct run_source {
  nr_model *model;
  nr_engine *engine;
} run_source;

static void run_usage(FILE *f) {
  fprintf(f,
          "usage: nnroute run MODEL|ENGINE [--route ROUTE] [--reference] [--threads N]\n"
          "                   [--input NAME=FILE]... [--inputs-dir DIR]\n"
          "                   [--shape NAME=DIMS]... [--seed N] [--output-dir DIR]\n"
          "                   [--calibration SPEC] [--device cpu|cuda]\n"
          "                   [--unsafe-ignore-environment] [--verify KEYFILE]\n\n"
          "Runs an ONNX model (compiled along ROUTE, default: the default route; with\n"
          "--reference on the reference executor) or an engine file, and writes\n"
          "DIR/<output>.npy (default DIR: the current directory). FILE is .npy or .pb;\n"
          "--inputs-dir reads each input not given by --input from DIR/<input>.npy,\n"
          "else DIR/<input>.pb, else DIR/input_K.pb (the ONNX test-data layout: K is the\n"
          "input's position in the model, from 0); a DIR holding none of these but\n"
          "test_data_set_N/ folders reads the one of lowest N (test_data_set_0).\n"
          "Inputs given nowhere are drawn at random (seed N, default 0). A model's free\n"
          "dimensions take the shapes of the files given.\n"
          "DIMS looks like 1x3x224x224. Names with characters outside [A-Za-z0-9._-]\n"
          "use '_' for them in file names. --calibration (see `nnroute build --help`)\n"
          "is needed when ROUTE puts nodes in int8. --device cuda builds the model for\n"
          "the GPU (`nnroute knobs MODEL --device cuda` lists its knobs). --verify\n"
          "refuses an ENGINE not signed with KEYFILE (`nnroute build --sign`).\n");
}

static int parse_args(int argc, char **argv, run_args *a) {
  memset(a, 0, sizeof *a);
  a->output_dir = ".";
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    bool v = i + 1 < argc;
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      run_usage(stdout);
      exit(0);
    } else if (!strcmp(arg, "--input") && v && a->n_inputs < MAX_ARGS) {
      a->input_spec[a->n_inputs++] = argv[++i];
    } else if (!strcmp(arg, "--shape") && v && a->n_shapes < MAX_ARGS) {
      a->shape_spec[a->n_shapes++] = argv[++i];
    } else if (!strcmp(arg, "--inputs-dir") && v) {
      a->inputs_dir = argv[++i];
    } else if (!strcmp(arg, "--output-dir") && v) {
      a->output_dir = argv[++i];
    } else if (!strcmp(arg, "--route") && v) {
      a->route = argv[++i];
    } else if (!strcmp(arg, "--calibration") && v) {
      a->calibration = argv[++i];
    } else if (!strcmp(arg, "--device") && v) {
      if (!nr_device_parse(argv[++i], &a->device)) {
        fprintf(stderr, "nnroute run: --device '%s': cpu or cuda\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(arg, "--threads") && v) {
      a->threads = atoi(argv[++i]);
    } else if (!strcmp(arg, "--seed") && v) {
      a->seed = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(arg, "--reference")) {
      a->reference = true;
    } else if (!strcmp(arg, "--unsafe-ignore-environment")) {
      a->unsafe = true;
    } else if (!strcmp(arg, "--verify") && v) {
      a->verify = argv[++i];
    } else if (arg[0] != '-' && !a->path) {
      a->path = arg;
    } else {
      fprintf(stderr, "nnroute run: unexpected argument '%s'\n", arg);
      run_usage(stderr);
      return 2;
    }
  }
  if (!a->path || (a->reference && a->route)) {
    if (a->path)
      fprintf(stderr, "nnroute run: --reference and --route exclude each other\n");
    run_usage(stderr);
    return 2;
  }
  return 0;
}

/* ---- the source's inputs and outputs ------------------------------------------- */

static int in_count(const run_source *s) {
  return s->engine ? nr_engine_input_count(s->engine) : nr_model_input_count(s->model);
}
static int out_count(const run_source *s) {
  return s->engine ? nr_engine_output_count(s->engine) : nr_model_output_count(s->model);
}
static void in_info(const run_source *s, int i, nr_io_info *info) {
  s->engine ? nr_engine_input_info(s->engine, i, info)
            : nr_model_input_info(s->model, i, info);
}
static void out_info(const run_source *s, int i, nr_io_info *info) {
  s->engine ? nr_engine_output_info(s->engine, i, info)
            : nr_model_output_info(s->model, i, info);
}

static void print_inputs(const run_source *s) {
  fprintf(stderr, "the %s's inputs:\n", s->engine ? "engine" : "model");
  for (int i = 0; i < in_count(s); i++) {
    nr_io_info info;
    in_info(s, i, &info);
    nr_value v = {info.dtype, info.rank, {0}, NULL, false};
    memcpy(v.dims, info.dims, sizeof v.dims);
    char buf[128];
    fprintf(stderr, "  %-24s %s\n", info.name, nr_value_describe(&v, buf, sizeof buf));
  }
}

static int input_index(const run_source *s, const char *name) {
  for (int i = 0; i < in_count(s); i++) {
    nr_io_info info;
    in_info(s, i, &info);
    if (!strcmp(info.name, name))
      return i;
  }
  return -1;
}

static int check_input_names(const run_source *s, const run_args *a) {
  for (int k = 0; k < a->n_inputs; k++) {
    const char *file;
    char *name = nr_cli_split_assign(a->input_spec[k], &file);
    int idx = name ? input_index(s, name) : -1;
    free(name);
    if (idx < 0) {
      fprintf(stderr, "nnroute run: --input '%s' names no input\n", a->input_spec[k]);
      print_inputs(s);
      return 2;
    }
  }
  return 0;
}

static int apply_shapes(const run_source *s, const run_args *a, nr_error *err) {
  if (s->engine && a->n_shapes) {
    fprintf(stderr, "nnroute run: an engine's shapes are fixed; --shape needs a model\n");
    return 2;
  }
  for (int k = 0; k < a->n_shapes; k++) {
    int rc = nr_cli_apply_shape(s->model, a->shape_spec[k], err);
    if (rc) {
      if (rc == 1)
        print_inputs(s);
      return rc;
    }
  }
  return 0;
}

/* ---- inputs --------------------------------------------------------------------- */

/* Where --inputs-dir files are read: the folder itself, or the first of its
 * test_data_set_N folders when it holds no input file of its own; and the input_K.pb
 * files there, listed by the scan the conformance runner and the tuner use. */
typedef struct input_dir {
  char *dir;
  nr_testdata_set pb;
} input_dir;

static void input_dir_free(input_dir *d) {
  free(d->dir);
  nr_testdata_set_free(&d->pb);
  memset(d, 0, sizeof *d);
}

static nr_status input_dir_scan(const char *dir, input_dir *d, nr_error *err) {
  input_dir_free(d);
  d->dir = strdup(dir);
  d->pb.dir = strdup(dir);
  if (!d->dir || !d->pb.dir)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  return nr_testdata_scan_set(&d->pb, err);
}

/* Path of the file named after input i in d->dir with extension ext, and whether
 * one is there. */
static bool named_file(const run_source *s, const input_dir *d, int i, const char *ext,
                       char *buf, size_t cap) {
  nr_io_info info;
  in_info(s, i, &info);
  char safe[256];
  nr_cli_safe_name(info.name, safe, sizeof safe);
  snprintf(buf, cap, "%s/%s.%s", d->dir, safe, ext);
  struct stat sb;
  return !stat(buf, &sb) && S_ISREG(sb.st_mode);
}

static bool holds_inputs(const run_source *s, const input_dir *d) {
  char buf[4096];
  bool any = d->pb.n_inputs > 0;
  for (int i = 0; !any && i < in_count(s); i++)
    any = named_file(s, d, i, "npy", buf, sizeof buf) ||
          named_file(s, d, i, "pb", buf, sizeof buf);
  return any;
}

static nr_status open_inputs_dir(const run_source *s, const run_args *a, input_dir *d,
                                 nr_error *err) {
  if (!a->inputs_dir)
    return NR_OK;
  nr_status st = input_dir_scan(a->inputs_dir, d, err);
  char *first = NULL;
  if (!st && !holds_inputs(s, d))
    st = nr_pairs_first_folder(a->inputs_dir, &first, err);
  if (!st && first && strcmp(first, a->inputs_dir)) {
    st = input_dir_scan(first, d, err);
    fprintf(stderr, "nnroute run: reading the inputs from %s\n", first);
  }
  free(first);
  int n = in_count(s);
  if (!st && d->pb.n_inputs > n)
    st = nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                   "%s: the %s has only %d inputs (input_K.pb is the K-th input, "
                   "counting from 0)", d->pb.inputs[n], s->engine ? "engine" : "model", n);
  return st;
}

/* The file for input i: --input, then in the inputs folder the file named after the
 * input (.npy, then .pb), then input_<i>.pb. *file NULL: no folder, drawn at random. */
static nr_status input_file(const run_source *s, const run_args *a, const input_dir *d,
                            int i, char *buf, size_t cap, const char **file,
                            nr_error *err) {
  nr_io_info info;
  in_info(s, i, &info);
  *file = NULL;
  for (int k = 0; k < a->n_inputs && !*file; k++) {
    const char *f;
    char *name = nr_cli_split_assign(a->input_spec[k], &f);
    if (name && !strcmp(name, info.name))
      *file = f;
    free(name);
  }
  if (*file || !d->dir)
    return NR_OK;
  if (named_file(s, d, i, "npy", buf, cap) || named_file(s, d, i, "pb", buf, cap)) {
    *file = buf;
    return NR_OK;
  }
  if (i < d->pb.n_inputs) {
    *file = d->pb.inputs[i];
    return NR_OK;
  }
  char safe[256];
  nr_cli_safe_name(info.name, safe, sizeof safe);
  return nr_errorf(err, NR_ERR_IO, "input %d ('%s') has no file in %s: expected %s.npy, "
                   "%s.pb or input_%d.pb", i, info.name, d->dir, safe, safe, i);
}

static bool same_shape(const nr_value *v, const nr_io_info *info) {
  bool same = v->rank == info->rank;
  for (int k = 0; same && k < v->rank; k++)
    same = v->dims[k] == info->dims[k];
  return same;
}

/* Reads input info from file; a model takes the file's shape for its free dims. */
static nr_status load_input(const run_source *s, const nr_io_info *info, const char *file,
                            nr_value *v, nr_error *err) {
  nr_status st = nr_cli_read_tensor(file, v, err);
  char got[128], want[128];
  nr_value w = {info->dtype, info->rank, {0}, NULL, false};
  memcpy(w.dims, info->dims, sizeof w.dims);
  if (st)
    return nr_error_prefix(err, "input '%s': ", info->name);
  if (v->dtype != info->dtype)
    return nr_errorf(err, NR_ERR_SHAPE, "input '%s' from '%s' is %s, expected %s",
                     info->name, file, nr_dtype_name(v->dtype), nr_dtype_name(info->dtype));
  if (s->model && (st = nr_model_set_input_shape(s->model, info->name, v->rank, v->dims,
                                                 err)))
    return nr_error_prefix(err, "%s: ", file);
  if (!s->model && !same_shape(v, info))
    return nr_errorf(err, NR_ERR_SHAPE, "input '%s' from '%s' is %s; the engine takes %s",
                     info->name, file, nr_value_describe(v, got, sizeof got),
                     nr_value_describe(&w, want, sizeof want));
  return NR_OK;
}

static nr_status draw_input(const nr_io_info *info, uint64_t *state, nr_value *v,
                            nr_error *err) {
  nr_value d = {info->dtype, info->rank, {0}, NULL, false};
  memcpy(d.dims, info->dims, sizeof d.dims);
  if (!nr_value_shape_known(&d))
    return nr_errorf(err, NR_ERR_SHAPE,
                     "input '%s' has a dynamic shape and no file: give --shape %s=DIMS",
                     info->name, info->name);
  nr_status st = nr_value_alloc(v, d.dtype, d.rank, d.dims, err);
  if (!st)
    nr_cli_random_fill(v, state);
  return st;
}

static int gather_inputs(const run_source *s, const run_args *a, nr_value *vals,
                         nr_error *err) {
  uint64_t state = a->seed;
  bool drew = false;
  input_dir d = {0};
  nr_status st = open_inputs_dir(s, a, &d, err);
  for (int i = 0; !st && i < in_count(s); i++) {
    nr_io_info info;
    in_info(s, i, &info);
    char buf[4096];
    const char *file;
    st = input_file(s, a, &d, i, buf, sizeof buf, &file, err);
    if (!st)
      st = file ? load_input(s, &info, file, &vals[i], err)
                : draw_input(&info, &state, &vals[i], err);
    drew |= !file;
  }
  input_dir_free(&d);
  if (st) {
    nr_cli_fail(err);
    print_inputs(s);
    return 1;
  }
  if (drew)
    fprintf(stderr, "nnroute run: inputs not given were drawn at random (seed %llu)\n",
            (unsigned long long)a->seed);
  return 0;
}

/* ---- running and writing -------------------------------------------------------- */

static int write_outputs(const run_source *s, const run_args *a, nr_buffer *outs,
                         nr_error *err) {
  mkdir(a->output_dir, 0777);
  for (int o = 0; o < out_count(s); o++) {
    nr_io_info info;
    out_info(s, o, &info);
    char safe[256], path[4096], desc[128];
    nr_cli_safe_name(info.name, safe, sizeof safe);
    snprintf(path, sizeof path, "%s/%s.npy", a->output_dir, safe);
    nr_value v = {outs[o].dtype, outs[o].rank, {0}, outs[o].data, false};
    memcpy(v.dims, outs[o].dims, sizeof v.dims);
    if (nr_npy_write(path, &v, err))
      return nr_cli_fail(err);
    printf("%-24s %-24s -> %s\n", info.name, nr_value_describe(&v, desc, sizeof desc),
           path);
  }
  return 0;
}

/* Runs the source; a model not run on the reference is compiled first. */
static nr_status execute(run_source *s, const run_args *a, const nr_buffer *ins,
                         nr_buffer *outs, nr_error *err) {
  if (s->model && a->reference)
    return nr_model_run(s->model, ins, outs, err);
  nr_status st = NR_OK;
  if (!s->engine) {
    nr_calibration *calib = NULL;
    st = nr_cli_calibration(s->model, a->calibration, &calib, err);
    nr_build_options o = {sizeof o, a->route, a->threads, a->device, calib};
    if (!st)
      st = nr_engine_build(s->model, &o, &s->engine, err);
    nr_calibration_destroy(calib);
  }
  nr_context *ctx = NULL;
  if (!st)
    st = nr_context_create(s->engine, a->threads, &ctx, err);
  if (!st)
    st = nr_context_run(ctx, ins, outs, err);
  nr_context_destroy(ctx);
  return st;
}

/* An engine file starts with the engine magic; anything else is taken as ONNX. */
static bool is_engine_file(const char *path) {
  char magic[8] = {0};
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  size_t n = fread(magic, 1, sizeof magic, f);
  fclose(f);
  return n == sizeof magic && !memcmp(magic, "NRENGINE", 8);
}

static nr_status open_source(const run_args *a, run_source *s, nr_error *err) {
  if (!is_engine_file(a->path) && a->verify)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "'%s' is not an engine file: --verify checks engines", a->path);
  if (!is_engine_file(a->path))
    return nr_model_load(a->path, NULL, &s->model, err);
  if (a->reference || a->route)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "'%s' is an engine: --route and --reference need a model", a->path);
  return nr_cli_load_engine(a->path, a->unsafe, a->verify, &s->engine, err);
}

static int run_with(run_source *s, const run_args *a, nr_value *vals, nr_buffer *ins,
                    nr_buffer *outs, nr_error *err) {
  int rc = check_input_names(s, a);
  if (!rc)
    rc = apply_shapes(s, a, err);
  if (!rc)
    rc = gather_inputs(s, a, vals, err);
  if (rc)
    return rc;
  for (int i = 0; i < in_count(s); i++) {
    ins[i] = (nr_buffer){vals[i].dtype, vals[i].rank, {0}, vals[i].data};
    memcpy(ins[i].dims, vals[i].dims, sizeof ins[i].dims);
  }
  if (execute(s, a, ins, outs, err)) {
    rc = nr_cli_fail(err);
    if (err->status == NR_ERR_SHAPE)
      print_inputs(s);
    return rc;
  }
  return write_outputs(s, a, outs, err);
}

int nr_cli_run(int argc, char **argv) {
  run_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc)
    return rc;
  nr_error err = {0};
  run_source s = {0};
  if (open_source(&a, &s, &err))
    return nr_cli_fail(&err);
  int n = in_count(&s), no = out_count(&s);
  nr_value *vals = calloc((size_t)(n ? n : 1), sizeof *vals);
  nr_buffer *ins = calloc((size_t)(n ? n : 1), sizeof *ins);
  nr_buffer *outs = calloc((size_t)(no ? no : 1), sizeof *outs);
  rc = vals && ins && outs ? run_with(&s, &a, vals, ins, outs, &err) : 1;
  for (int i = 0; vals && i < n; i++)
    nr_value_free(&vals[i]);
  for (int o = 0; outs && o < no; o++)
    nr_buffer_free(&outs[o]);
  free(vals);
  free(ins);
  free(outs);
  nr_engine_destroy(s.engine);
  nr_model_destroy(s.model);
  return rc;
}
