/* cli_run.c - `nnroute run`: runs a model on given or seeded random inputs and writes
 * each output as DIR/<output name>.npy.
 *
 * Input problems (a missing file, a wrong shape or dtype, an unknown name) end with a
 * list of every input the model takes and the shape and dtype it expects. */
#include "cli/cli.h"
#include "io/tensor_io.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_ARGS 64

typedef struct run_args {
  const char *model, *inputs_dir, *output_dir;
  const char *input_spec[MAX_ARGS], *shape_spec[MAX_ARGS];
  int n_inputs, n_shapes;
  uint64_t seed;
} run_args;

static void run_usage(FILE *f) {
  fprintf(f,
          "usage: nnroute run MODEL [--input NAME=FILE]... [--inputs-dir DIR]\n"
          "                   [--shape NAME=DIMS]... [--seed N] [--output-dir DIR]\n\n"
          "Runs MODEL (ONNX) with the reference executor and writes DIR/<output>.npy\n"
          "(default DIR: the current directory). FILE is .npy or .pb (TensorProto);\n"
          "--inputs-dir reads DIR/<input>.npy (or .pb) for each input not given by\n"
          "--input. Inputs given nowhere are drawn at random (seed N, default 0).\n"
          "DIMS looks like 1x3x224x224. Names with characters outside [A-Za-z0-9._-]\n"
          "use '_' for them in file names.\n");
}

static int parse_args(int argc, char **argv, run_args *a) {
  memset(a, 0, sizeof *a);
  a->output_dir = ".";
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    bool has_val = i + 1 < argc;
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      run_usage(stdout);
      exit(0);
    } else if (!strcmp(arg, "--input") && has_val && a->n_inputs < MAX_ARGS) {
      a->input_spec[a->n_inputs++] = argv[++i];
    } else if (!strcmp(arg, "--shape") && has_val && a->n_shapes < MAX_ARGS) {
      a->shape_spec[a->n_shapes++] = argv[++i];
    } else if (!strcmp(arg, "--inputs-dir") && has_val) {
      a->inputs_dir = argv[++i];
    } else if (!strcmp(arg, "--output-dir") && has_val) {
      a->output_dir = argv[++i];
    } else if (!strcmp(arg, "--seed") && has_val) {
      a->seed = strtoull(argv[++i], NULL, 10);
    } else if (arg[0] != '-' && !a->model) {
      a->model = arg;
    } else {
      fprintf(stderr, "nnroute run: unexpected argument '%s'\n", arg);
      run_usage(stderr);
      return 2;
    }
  }
  if (!a->model) {
    run_usage(stderr);
    return 2;
  }
  return 0;
}

static void print_inputs(const nr_model *m) {
  fprintf(stderr, "the model's inputs:\n");
  for (int i = 0; i < nr_model_input_count(m); i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    nr_value v = {info.dtype, info.rank, {0}, NULL, false};
    memcpy(v.dims, info.dims, sizeof v.dims);
    char buf[128];
    fprintf(stderr, "  %-24s %s\n", info.name, nr_value_describe(&v, buf, sizeof buf));
  }
}

static int input_index(const nr_model *m, const char *name) {
  for (int i = 0; i < nr_model_input_count(m); i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    if (!strcmp(info.name, name))
      return i;
  }
  return -1;
}

/* Applies --shape options. */
static int apply_shapes(nr_model *m, const run_args *a, nr_error *err) {
  for (int s = 0; s < a->n_shapes; s++) {
    const char *dims_text;
    char *name = nr_cli_split_assign(a->shape_spec[s], &dims_text);
    int rank;
    int64_t dims[NR_MAX_RANK];
    if (!name || !nr_cli_parse_dims(dims_text, &rank, dims)) {
      fprintf(stderr, "nnroute run: --shape '%s' is not NAME=DIMS (e.g. x=1x3x224x224)\n",
              a->shape_spec[s]);
      free(name);
      return 2;
    }
    nr_status st = nr_model_set_input_shape(m, name, rank, dims, err);
    free(name);
    if (st) {
      nr_cli_fail(err);
      print_inputs(m);
      return 1;
    }
  }
  return 0;
}

/* Finds the file for input i: --input, then --inputs-dir; NULL means random. */
static const char *input_file(const nr_model *m, const run_args *a, int i, char *buf,
                              size_t cap) {
  nr_io_info info;
  nr_model_input_info(m, i, &info);
  for (int k = 0; k < a->n_inputs; k++) {
    const char *file;
    char *name = nr_cli_split_assign(a->input_spec[k], &file);
    bool match = name && !strcmp(name, info.name);
    free(name);
    if (match)
      return file;
  }
  if (!a->inputs_dir)
    return NULL;
  char safe[256];
  nr_cli_safe_name(info.name, safe, sizeof safe);
  struct stat sb;
  snprintf(buf, cap, "%s/%s.npy", a->inputs_dir, safe);
  if (!stat(buf, &sb))
    return buf;
  snprintf(buf, cap, "%s/%s.pb", a->inputs_dir, safe);
  if (!stat(buf, &sb))
    return buf;
  snprintf(buf, cap, "%s/%s.npy", a->inputs_dir, safe);
  return buf; /* reported as missing when read */
}

static int check_input_names(const nr_model *m, const run_args *a) {
  for (int k = 0; k < a->n_inputs; k++) {
    const char *file;
    char *name = nr_cli_split_assign(a->input_spec[k], &file);
    int idx = name ? input_index(m, name) : -1;
    if (idx < 0) {
      fprintf(stderr, "nnroute run: --input '%s' names no input of the model\n",
              a->input_spec[k]);
      print_inputs(m);
    }
    free(name);
    if (idx < 0)
      return 2;
  }
  return 0;
}

/* Loads or draws every input; fixes the model's input shapes from them. */
static int gather_inputs(nr_model *m, const run_args *a, nr_value *vals, nr_error *err) {
  int n = nr_model_input_count(m);
  uint64_t state = a->seed;
  bool drew = false;
  for (int i = 0; i < n; i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    char buf[4096];
    const char *file = input_file(m, a, i, buf, sizeof buf);
    nr_status st;
    if (file) {
      st = nr_cli_read_tensor(file, &vals[i], err);
      if (!st && vals[i].dtype != info.dtype)
        st = nr_errorf(err, NR_ERR_SHAPE, "input '%s' from '%s' is %s, the model wants %s",
                       info.name, file, nr_dtype_name(vals[i].dtype),
                       nr_dtype_name(info.dtype));
      if (!st)
        st = nr_model_set_input_shape(m, info.name, vals[i].rank, vals[i].dims, err);
    } else {
      nr_value d = {info.dtype, info.rank, {0}, NULL, false};
      memcpy(d.dims, info.dims, sizeof d.dims);
      if (!nr_value_shape_known(&d))
        st = nr_errorf(err, NR_ERR_SHAPE,
                       "input '%s' has a dynamic shape and no file: give --shape %s=DIMS",
                       info.name, info.name);
      else
        st = nr_value_alloc(&vals[i], d.dtype, d.rank, d.dims, err);
      if (!st) {
        nr_cli_random_fill(&vals[i], &state);
        drew = true;
      }
    }
    if (st) {
      nr_cli_fail(err);
      print_inputs(m);
      return 1;
    }
  }
  if (drew)
    fprintf(stderr, "nnroute run: inputs not given were drawn at random (seed %llu)\n",
            (unsigned long long)a->seed);
  return 0;
}

static int write_outputs(const nr_model *m, const run_args *a, nr_buffer *outs,
                         nr_error *err) {
  mkdir(a->output_dir, 0777);
  for (int o = 0; o < nr_model_output_count(m); o++) {
    nr_io_info info;
    nr_model_output_info(m, o, &info);
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

int nr_cli_run(int argc, char **argv) {
  run_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc)
    return rc;
  nr_error err = {0};
  nr_model *m = NULL;
  if (nr_model_load(a.model, NULL, &m, &err))
    return nr_cli_fail(&err);
  int n = nr_model_input_count(m), no = nr_model_output_count(m);
  nr_value *vals = calloc((size_t)(n ? n : 1), sizeof *vals);
  nr_buffer *ins = calloc((size_t)(n ? n : 1), sizeof *ins);
  nr_buffer *outs = calloc((size_t)(no ? no : 1), sizeof *outs);
  rc = !vals || !ins || !outs;
  if (!rc)
    rc = check_input_names(m, &a);
  if (!rc)
    rc = apply_shapes(m, &a, &err);
  if (!rc)
    rc = gather_inputs(m, &a, vals, &err);
  if (!rc) {
    for (int i = 0; i < n; i++) {
      ins[i].dtype = vals[i].dtype;
      ins[i].rank = vals[i].rank;
      memcpy(ins[i].dims, vals[i].dims, sizeof ins[i].dims);
      ins[i].data = vals[i].data;
    }
    if (nr_model_run(m, ins, outs, &err)) {
      rc = nr_cli_fail(&err);
      if (err.status == NR_ERR_SHAPE)
        print_inputs(m);
    } else {
      rc = write_outputs(m, &a, outs, &err);
    }
  }
  for (int i = 0; vals && i < n; i++)
    nr_value_free(&vals[i]);
  for (int o = 0; outs && o < no; o++)
    nr_buffer_free(&outs[o]);
  free(vals);
  free(ins);
  free(outs);
  nr_model_destroy(m);
  return rc;
}
