/* pairs.c - reference pairs for the tuner: read from a folder or generated (pairs.h).
 *
 * Key decision: a pair is only accepted when it fits the prepared model exactly
 * (same dtype and shape as each input, and as each output the model can describe),
 * and the error names the file, so a wrong data folder fails at the start of a
 * session rather than as a wall of "accuracy_fail" candidates hours later. For the
 * same reason both entry points are all-or-nothing: on failure the set keeps only
 * the pairs it had before the call. A folder in the input_K.pb layout is listed by
 * the conformance runner's scan (nr_testdata_scan_set), so both read the same files
 * and refuse the same gaps in their numbers. A model that leaves input dimensions
 * free takes them from the first pair before it is prepared (nr_pairs_fix_shapes):
 * the data has shapes, so asking the user for them again would only invite a
 * mismatch; the pairs after the first must then have the same shapes.
 *
 * Generated inputs use the same generator and the same per-dtype defaults as the
 * CLI's random inputs (splitmix64, floats in [-1, 1), integers in [0, 16), bools
 * 0/1), and pair 0 of seed S starts from state S as `nnroute bench --seed S` does, so
 * a pair can be reproduced outside the tuner. Later pairs start from a state mixed
 * from (S, k), so pair k does not depend on how many pairs were asked for. Integer
 * inputs that index a constant table through a Gather (token ids into an embedding,
 * possibly through Cast/Reshape/Unsqueeze-like nodes) are drawn in [0, rows) instead,
 * so BERT-like models get valid ids. A user range [lo, hi) overrides every default;
 * integer inputs then draw the integers k with lo <= k < hi, that is from ceil(lo)
 * to ceil(hi) - 1, and a range that holds no integer or leaves the dtype is an
 * error rather than a silent clamp. */
#include "tune/pairs.h"

#include "api/nnroute_tools.h"
#include "io/tensor_io.h"
#include "ir/dtype.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the set ------------------------------------------------------------------------ */

static void pair_free(nr_pair *p, int n_inputs, int n_outputs) {
  for (int i = 0; p->inputs && i < n_inputs; i++)
    nr_buffer_free(&p->inputs[i]);
  for (int i = 0; p->outputs && i < n_outputs; i++)
    nr_buffer_free(&p->outputs[i]);
  free(p->inputs);
  free(p->outputs);
  free(p->origin);
  memset(p, 0, sizeof *p);
}

static nr_status pair_alloc(nr_pair *p, int n_inputs, int n_outputs, const char *origin,
                            nr_error *err) {
  p->inputs = calloc((size_t)n_inputs + 1, sizeof *p->inputs);
  p->outputs = calloc((size_t)n_outputs + 1, sizeof *p->outputs);
  p->origin = strdup(origin);
  if (p->inputs && p->outputs && p->origin)
    return NR_OK;
  pair_free(p, 0, 0);
  return nr_errorf(err, NR_ERR_NOMEM, "out of memory for the pair from %s", origin);
}

/* Prepares the model and ties the set to its input and output counts. */
static nr_status set_begin(nr_model *m, nr_pair_set *set, nr_error *err) {
  if (!m || !set)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "reference pairs: NULL argument");
  nr_status st = nr_model_prepare(m, err);
  if (st)
    return st;
  int ni = nr_model_input_count(m), no = nr_model_output_count(m);
  if (set->n > 0 && (set->n_inputs != ni || set->n_outputs != no))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "the pair set was made for a model with %d inputs and %d outputs; "
                     "this one has %d and %d", set->n_inputs, set->n_outputs, ni, no);
  set->n_inputs = ni;
  set->n_outputs = no;
  return NR_OK;
}

/* Appends *p (ownership moves to the set; *p is cleared either way). */
static nr_status set_push(nr_pair_set *set, nr_pair *p, nr_error *err) {
  nr_pair *grown = realloc(set->pairs, sizeof *grown * (size_t)(set->n + 1));
  if (!grown) {
    pair_free(p, set->n_inputs, set->n_outputs);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory for reference pairs");
  }
  set->pairs = grown;
  set->pairs[set->n++] = *p;
  memset(p, 0, sizeof *p);
  return NR_OK;
}

/* Drops the pairs appended after the first n (a failed call leaves no half). */
static void set_truncate(nr_pair_set *set, int n) {
  while (set->n > n)
    pair_free(&set->pairs[--set->n], set->n_inputs, set->n_outputs);
}

/* Puts set back as it was before a failed call. */
static void set_restore(nr_pair_set *set, const nr_pair_set *before) {
  set_truncate(set, before->n);
  set->n_inputs = before->n_inputs;
  set->n_outputs = before->n_outputs;
}

void nr_pair_set_free(nr_pair_set *set) {
  if (!set)
    return;
  set_truncate(set, 0);
  free(set->pairs);
  memset(set, 0, sizeof *set);
}

/* Fills the pair's outputs with the reference executor. */
static nr_status compute_outputs(nr_model *m, nr_pair *p, nr_error *err) {
  nr_status st = nr_model_run(m, p->inputs, p->outputs, err);
  if (st)
    nr_error_prefix(err, "%s: computing the reference outputs: ", p->origin);
  return st;
}

/* Pairs of a set whose outputs the reference executor still has to compute: the
 * readers collect them and compute_pending runs them together at the end. */
typedef struct pending {
  int *idx;
  int n, cap;
} pending;

static nr_status pending_add(pending *q, int k, nr_error *err) {
  if (q->n == q->cap) {
    int cap = q->cap ? 2 * q->cap : 16;
    int *grown = realloc(q->idx, sizeof *grown * (size_t)cap);
    if (!grown)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory for reference pairs");
    q->idx = grown;
    q->cap = cap;
  }
  q->idx[q->n++] = k;
  return NR_OK;
}

typedef struct pending_job {
  nr_model *m;
  nr_pair_set *set;
  const pending *q;
  nr_status *st; /* per pending pair */
  nr_error *errs;
} pending_job;

static void pending_task(void *arg, int64_t begin, int64_t end, int thread) {
  pending_job *j = arg;
  (void)thread;
  for (int64_t k = begin; k < end; k++)
    j->st[k] = compute_outputs(j->m, &j->set->pairs[j->q->idx[k]], &j->errs[k]);
}

/* Computes the outputs of the pending pairs, several at once. One pair is one
 * sequential run of the reference executor, and a GPU tuning session of a BERT-base
 * encoder spent most of its start-up there (2026-11-29); the executor only reads the
 * prepared graph, so runs can share it. At most 8 threads (each run holds its own
 * intermediate tensors) and never more than the CPUs. On failure, the error of the
 * first failing pair in set order. */
static nr_status compute_pending(nr_model *m, nr_pair_set *set, const pending *q,
                                 nr_error *err) {
  if (q->n == 0)
    return NR_OK;
  int cpus = nr_online_cpus(), threads = cpus > 8 ? 8 : cpus;
  if (threads > q->n)
    threads = q->n;
  nr_status *st = calloc((size_t)q->n, sizeof *st);
  nr_error *errs = calloc((size_t)q->n, sizeof *errs);
  if (!st || !errs) {
    free(st);
    free(errs);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory for reference pairs");
  }
  nr_threadpool *pool = threads > 1 ? nr_threadpool_create(threads) : NULL;
  pending_job job = {m, set, q, st, errs};
  nr_parallel_for(pool, q->n, 1, 0, pending_task, &job);
  nr_threadpool_destroy(pool);
  nr_status first = NR_OK;
  for (int k = 0; k < q->n && !first; k++)
    if (st[k]) {
      first = st[k];
      if (err)
        *err = errs[k];
    }
  free(st);
  free(errs);
  return first;
}

/* ---- reading one folder ------------------------------------------------------------- */

typedef enum layout { LAYOUT_PB, LAYOUT_NPY } layout;

static char *path_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p)
    snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static bool is_file(const char *path) {
  struct stat sb;
  return !stat(path, &sb) && S_ISREG(sb.st_mode);
}

/* The file name the CLI gives a tensor: [A-Za-z0-9._-] kept, anything else '_',
 * "." and ".." made "_", cut at 255 characters (as nr_cli_safe_name, which the
 * library cannot link). */
static void safe_name(const char *name, char out[256]) {
  size_t i = 0;
  for (; name[i] && i < 255; i++) {
    char c = name[i];
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out[i] = keep ? c : '_';
  }
  out[i] = '\0';
  if (!strcmp(out, ".") || !strcmp(out, ".."))
    out[0] = '_';
}

/* Path of input or output i in dir; malloc'ed, NULL when out of memory. */
static char *tensor_path(const char *dir, layout lay, bool output, int i,
                         const char *name) {
  char file[300];
  if (lay == LAYOUT_PB) {
    snprintf(file, sizeof file, "%s_%d.pb", output ? "output" : "input", i);
  } else {
    char safe[256];
    safe_name(name, safe);
    snprintf(file, sizeof file, "%s.npy", safe);
  }
  return path_join(dir, file);
}

static nr_status io_info(nr_model *m, bool output, int i, nr_io_info *info) {
  return output ? nr_model_output_info(m, i, info) : nr_model_input_info(m, i, info);
}

/* Two tensors whose names map to one .npy file cannot both be given. */
static nr_status check_npy_names(nr_model *m, const char *dir, nr_error *err) {
  int ni = nr_model_input_count(m), total = ni + nr_model_output_count(m);
  for (int a = 0; a < total; a++) {
    nr_io_info ia, ib;
    char sa[256], sb[256];
    io_info(m, a >= ni, a >= ni ? a - ni : a, &ia);
    safe_name(ia.name, sa);
    for (int b = a + 1; b < total; b++) {
      io_info(m, b >= ni, b >= ni ? b - ni : b, &ib);
      safe_name(ib.name, sb);
      if (strcmp(ia.name, ib.name) && !strcmp(sa, sb))
        return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                         "%s: tensors '%s' and '%s' would both be read from %s.npy; "
                         "use the input_<i>.pb layout for this model", dir, ia.name,
                         ib.name, sa);
    }
  }
  return NR_OK;
}

/* Reads a tensor file into b, taking the reader's data. */
static nr_status read_tensor(const char *path, layout lay, nr_buffer *b, nr_error *err) {
  nr_value v = {0};
  nr_status st = lay == LAYOUT_PB ? nr_pb_read(path, &v, NULL, err)
                                  : nr_npy_read(path, &v, err);
  if (!st && !v.owned) {
    nr_value own = {0};
    st = nr_value_copy(&own, &v, err);
    v = own;
  }
  if (st)
    return st;
  *b = (nr_buffer){v.dtype, v.rank, {0}, v.data};
  memcpy(b->dims, v.dims, sizeof b->dims);
  return NR_OK;
}

/* The file's tensor must be what the model describes; parts the model leaves
 * unknown (an output of data-dependent shape) are not checked. */
static nr_status check_fits(const char *path, bool output, const nr_io_info *info,
                            const nr_buffer *b, nr_error *err) {
  bool ok = info->dtype == NR_DTYPE_UNDEFINED || b->dtype == info->dtype;
  ok = ok && (info->rank < 0 || b->rank == info->rank);
  for (int d = 0; ok && info->rank >= 0 && d < info->rank; d++)
    ok = info->dims[d] < 0 || info->dims[d] == b->dims[d];
  if (ok)
    return NR_OK;
  char want[160], got[160];
  nr_value vw = {info->dtype, info->rank, {0}, NULL, false};
  nr_value vg = {b->dtype, b->rank, {0}, NULL, false};
  memcpy(vw.dims, info->dims, sizeof vw.dims);
  memcpy(vg.dims, b->dims, sizeof vg.dims);
  return nr_errorf(err, NR_ERR_SHAPE, "%s: %s '%s' must be %s; the file holds %s", path,
                   output ? "output" : "input", info->name,
                   nr_value_describe(&vw, want, sizeof want),
                   nr_value_describe(&vg, got, sizeof got));
}

/* One folder holding one pair. In the .pb layout its files are listed once, by the
 * scan the conformance runner uses (nr_testdata_scan_set), which also refuses a gap
 * in their numbers; in the .npy layout each file is looked for by its tensor's name. */
typedef struct pair_dir {
  const char *dir;
  layout lay;
  nr_testdata_set pb; /* the .pb layout's files */
} pair_dir;

static nr_status scan_pb(pair_dir *f, nr_error *err) {
  if (!(f->pb.dir = strdup(f->dir)))
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing '%s'", f->dir);
  return nr_testdata_scan_set(&f->pb, err);
}

/* The input or output files the .pb scan found, *n of them. */
static char **pb_files(const pair_dir *f, bool output, int *n) {
  *n = output ? f->pb.n_outputs : f->pb.n_inputs;
  return output ? f->pb.outputs : f->pb.inputs;
}

/* Path of tensor i (malloc'ed; NULL when out of memory) and whether a regular file
 * is there; when none is, the path the file was expected at. */
static char *find_tensor(const pair_dir *f, bool output, int i, const char *name,
                         bool *present) {
  int n;
  char **files = pb_files(f, output, &n);
  char *path = f->lay == LAYOUT_PB && i < n ? strdup(files[i])
                                            : tensor_path(f->dir, f->lay, output, i, name);
  *present = path && is_file(path);
  return path;
}

/* Reads tensor i (input or output) of the pair into b. */
static nr_status read_one(nr_model *m, const pair_dir *f, bool output, int i,
                          nr_buffer *b, nr_error *err) {
  nr_io_info info;
  io_info(m, output, i, &info);
  bool present;
  char *path = find_tensor(f, output, i, info.name, &present);
  if (!path)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  nr_status st = NR_OK;
  if (!present)
    st = nr_errorf(err, NR_ERR_IO, "%s: %s %d ('%s') is missing: expected %s", f->dir,
                   output ? "output" : "input", i, info.name, path);
  if (!st)
    st = read_tensor(path, f->lay, b, err);
  if (!st)
    st = check_fits(path, output, &info, b, err);
  free(path);
  return st;
}

/* In the .pb layout, a file numbered past the model's count is an error: the data
 * was made for another model. */
static nr_status check_no_extra(const pair_dir *f, bool output, int count,
                                nr_error *err) {
  int n;
  char **files = pb_files(f, output, &n);
  if (f->lay != LAYOUT_PB || n <= count || !is_file(files[count]))
    return NR_OK;
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s: the model has only %d %s",
                   files[count], count, output ? "outputs" : "inputs");
}

/* How many of the model's outputs the folder gives. */
static int count_outputs(nr_model *m, const pair_dir *f, char **first_missing) {
  int found = 0, no = nr_model_output_count(m);
  *first_missing = NULL;
  for (int o = 0; o < no; o++) {
    nr_io_info info;
    nr_model_output_info(m, o, &info);
    bool present;
    char *path = find_tensor(f, true, o, info.name, &present);
    if (path && present) {
      found++;
    } else if (path && !*first_missing) {
      *first_missing = path;
      path = NULL;
    }
    free(path);
  }
  return found;
}

/* Outputs: all given (read and checked), or none (*computed_later set: the
 * reference executor fills them); a part is an error. */
static nr_status read_outputs(nr_model *m, const pair_dir *f, nr_pair *p,
                              bool *computed_later, nr_error *err) {
  int no = nr_model_output_count(m);
  char *missing;
  int found = count_outputs(m, f, &missing);
  nr_status st = check_no_extra(f, true, no, err);
  if (!st && found > 0 && found < no)
    st = nr_errorf(err, NR_ERR_IO,
                   "%s: %s is missing: give all %d reference outputs or none (then they "
                   "are computed)", f->dir, missing ? missing : "an output", no);
  free(missing);
  for (int o = 0; !st && found == no && o < no; o++)
    st = read_one(m, f, true, o, &p->outputs[o], err);
  *computed_later = !st && found == 0 && no > 0;
  return st;
}

/* Which layout dir uses; an error when it holds neither. */
static nr_status detect_layout(nr_model *m, const char *dir, layout *lay, nr_error *err) {
  static const char *const pb_probes[] = {"input_0.pb", "output_0.pb"};
  for (int i = 0; i < 2; i++) {
    char *path = path_join(dir, pb_probes[i]);
    bool found = path && is_file(path);
    free(path);
    if (found) {
      *lay = LAYOUT_PB;
      return NR_OK;
    }
  }
  *lay = LAYOUT_NPY;
  if (nr_model_input_count(m) == 0)
    return NR_OK;
  nr_io_info info;
  nr_model_input_info(m, 0, &info);
  char *path = tensor_path(dir, LAYOUT_NPY, false, 0, info.name);
  bool found = path && is_file(path);
  nr_status st = found ? NR_OK
                       : nr_errorf(err, NR_ERR_IO,
                                   "%s holds no reference data: expected input_0.pb, "
                                   "test_data_set_*/ folders, or %s",
                                   dir, path ? path : "one .npy file per input");
  free(path);
  return st;
}

/* One folder holding one pair (either layout), appended to set. */
static nr_status load_folder(nr_model *m, const char *dir, nr_pair_set *set,
                             pending *q, nr_error *err) {
  pair_dir f = {dir, LAYOUT_NPY, {0}};
  nr_pair p = {0};
  bool later = false;
  nr_status st = detect_layout(m, dir, &f.lay, err);
  if (!st)
    st = f.lay == LAYOUT_PB ? scan_pb(&f, err) : check_npy_names(m, dir, err);
  if (!st)
    st = pair_alloc(&p, set->n_inputs, set->n_outputs, dir, err);
  for (int i = 0; !st && i < set->n_inputs; i++)
    st = read_one(m, &f, false, i, &p.inputs[i], err);
  if (!st)
    st = check_no_extra(&f, false, set->n_inputs, err);
  if (!st)
    st = read_outputs(m, &f, &p, &later, err);
  if (st) {
    pair_free(&p, set->n_inputs, set->n_outputs);
  } else {
    st = set_push(set, &p, err); /* takes p, or frees it on failure */
    if (!st && later)
      st = pending_add(q, set->n - 1, err);
  }
  nr_testdata_set_free(&f.pb);
  return st;
}

/* ---- test_data_set_* folders -------------------------------------------------------- */

typedef struct set_dir {
  long k;
  char *path;
} set_dir;

/* N of "test_data_set_N", or -1. */
static long set_number(const char *name) {
  static const char prefix[] = "test_data_set_";
  if (strncmp(name, prefix, sizeof prefix - 1) || !name[sizeof prefix - 1])
    return -1;
  long k = 0;
  for (const char *c = name + sizeof prefix - 1; *c; c++) {
    if (*c < '0' || *c > '9' || k > 100000000)
      return -1;
    k = k * 10 + (*c - '0');
  }
  return k;
}

static int by_set_number(const void *a, const void *b) {
  const set_dir *x = a, *y = b;
  if (x->k != y->k)
    return (x->k > y->k) - (x->k < y->k);
  return strcmp(x->path, y->path);
}

static void free_set_dirs(set_dir *dirs, int n) {
  for (int i = 0; i < n; i++)
    free(dirs[i].path);
  free(dirs);
}

/* Appends dir/name to *dirs when it is a folder (a file named like a set is not). */
static nr_status push_set_dir(const char *dir, const char *name, long k, set_dir **dirs,
                              int *count, nr_error *err) {
  char *path = path_join(dir, name);
  if (!path)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing '%s'", dir);
  struct stat sb;
  if (stat(path, &sb) || !S_ISDIR(sb.st_mode)) {
    free(path);
    return NR_OK;
  }
  set_dir *grown = realloc(*dirs, sizeof *grown * (size_t)(*count + 1));
  if (!grown) {
    free(path);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing '%s'", dir);
  }
  *dirs = grown;
  grown[(*count)++] = (set_dir){k, path};
  return NR_OK;
}

/* The test_data_set_N subfolders of dir in numeric order of N (9 before 10). */
static nr_status list_set_dirs(const char *dir, set_dir **out, int *n, nr_error *err) {
  DIR *d = opendir(dir);
  if (!d)
    return nr_errorf(err, NR_ERR_IO, "cannot read folder '%s': %s", dir, strerror(errno));
  set_dir *dirs = NULL;
  int count = 0;
  nr_status st = NR_OK;
  for (struct dirent *e; !st && (e = readdir(d));) {
    long k = set_number(e->d_name);
    if (k >= 0)
      st = push_set_dir(dir, e->d_name, k, &dirs, &count, err);
  }
  closedir(d);
  if (st) {
    free_set_dirs(dirs, count);
    return st;
  }
  if (count > 1)
    qsort(dirs, (size_t)count, sizeof *dirs, by_set_number);
  *out = dirs;
  *n = count;
  return NR_OK;
}

nr_status nr_pairs_first_folder(const char *dir, char **out, nr_error *err) {
  set_dir *dirs = NULL;
  int n = 0;
  *out = NULL;
  nr_status st = list_set_dirs(dir, &dirs, &n, err);
  if (st)
    return st;
  *out = strdup(n > 0 ? dirs[0].path : dir);
  free_set_dirs(dirs, n);
  return *out ? NR_OK : nr_errorf(err, NR_ERR_NOMEM, "out of memory listing '%s'", dir);
}

/* ---- shapes from the first pair ----------------------------------------------------- */

static bool has_free_dim(const nr_io_info *info) {
  bool free_dim = info->rank < 0;
  for (int d = 0; d < info->rank; d++)
    free_dim = free_dim || info->dims[d] < 0;
  return free_dim;
}

static bool any_free_input(nr_model *m) {
  bool any = false;
  for (int i = 0; !any && i < nr_model_input_count(m); i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    any = has_free_dim(&info);
  }
  return any;
}

/* The shape input i has in the folder, when the model leaves a dimension of it free
 * (*shape untouched otherwise); the file must agree with every dimension that is
 * fixed, and with the dtype. */
static nr_status free_input_shape(nr_model *m, const pair_dir *f, int i, nr_buffer *shape,
                                  nr_error *err) {
  nr_io_info info;
  nr_model_input_info(m, i, &info);
  if (!has_free_dim(&info))
    return NR_OK;
  nr_buffer b = {0};
  nr_status st = read_one(m, f, false, i, &b, err);
  if (!st) {
    shape->rank = b.rank;
    memcpy(shape->dims, b.dims, sizeof shape->dims);
  }
  nr_buffer_free(&b);
  return st;
}

/* Every free input's shape is read and checked before any is set, so a folder that
 * contradicts the model leaves the model as it was. */
static nr_status fix_from_folder(nr_model *m, const pair_dir *f, nr_error *err) {
  int ni = nr_model_input_count(m);
  nr_buffer *shapes = calloc((size_t)ni + 1, sizeof *shapes);
  if (!shapes)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < ni; i++)
    shapes[i].rank = -1;
  nr_status st = NR_OK;
  for (int i = 0; !st && i < ni; i++)
    st = free_input_shape(m, f, i, &shapes[i], err);
  for (int i = 0; !st && i < ni; i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    if (shapes[i].rank >= 0)
      st = nr_model_set_input_shape(m, info.name, shapes[i].rank, shapes[i].dims, err);
  }
  free(shapes);
  return st;
}

nr_status nr_pairs_fix_shapes(nr_model *m, const char *dir, nr_error *err) {
  if (!m || !dir)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "reference pairs: NULL argument");
  if (!any_free_input(m))
    return NR_OK;
  char *first = NULL;
  nr_status st = nr_pairs_first_folder(dir, &first, err);
  pair_dir f = {first, LAYOUT_NPY, {0}};
  if (!st)
    st = detect_layout(m, first, &f.lay, err);
  if (!st)
    st = f.lay == LAYOUT_PB ? scan_pb(&f, err) : check_npy_names(m, first, err);
  if (!st)
    st = check_no_extra(&f, false, nr_model_input_count(m), err);
  if (!st)
    st = fix_from_folder(m, &f, err);
  nr_testdata_set_free(&f.pb);
  free(first);
  return st;
}

nr_status nr_pairs_load_dir(nr_model *m, const char *dir, nr_pair_set *set,
                            nr_error *err) {
  if (!dir)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "reference pairs: NULL folder");
  nr_pair_set before = set ? *set : (nr_pair_set){0};
  nr_status st = m && set ? nr_pairs_fix_shapes(m, dir, err) : NR_OK;
  if (!st)
    st = set_begin(m, set, err);
  set_dir *dirs = NULL;
  int n_dirs = 0;
  if (!st)
    st = list_set_dirs(dir, &dirs, &n_dirs, err);
  pending q = {0};
  for (int i = 0; !st && i < n_dirs; i++)
    st = load_folder(m, dirs[i].path, set, &q, err);
  if (!st && n_dirs == 0)
    st = load_folder(m, dir, set, &q, err);
  if (!st)
    st = compute_pending(m, set, &q, err);
  free(q.idx);
  free_set_dirs(dirs, n_dirs);
  if (st && set)
    set_restore(set, &before);
  return st;
}

/* ---- generated pairs ---------------------------------------------------------------- */

static uint64_t next_random(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The generator state pair k starts from: the seed itself for pair 0 (as the CLI's
 * random inputs), a hash of (seed, k) for the others. */
static uint64_t pair_state(uint64_t seed, int k) {
  if (k == 0)
    return seed;
  uint64_t s = seed ^ ((uint64_t)k * 0xd1b54a32d192ed03ull);
  return next_random(&s);
}

/* How one input is drawn: floats lo + (hi - lo) * u with u in [0, 1); integers
 * ilo + r mod width (width 0: the whole 64-bit draw). */
typedef struct draw_rule {
  bool is_float;
  double lo, hi;
  int64_t ilo;
  uint64_t width;
} draw_rule;

/* Largest and smallest value an integer dtype holds (uint64 capped at INT64_MAX,
 * the most nr_store_i64 writes); bool is 0..1. */
static void int_limits(nr_dtype t, double *lo, double *hi) {
  switch (t) {
  case NR_DTYPE_BOOL: *lo = 0, *hi = 1; return;
  case NR_DTYPE_UINT8: *lo = 0, *hi = 255; return;
  case NR_DTYPE_INT8: *lo = -128, *hi = 127; return;
  case NR_DTYPE_UINT16: *lo = 0, *hi = 65535; return;
  case NR_DTYPE_INT16: *lo = -32768, *hi = 32767; return;
  case NR_DTYPE_UINT32: *lo = 0, *hi = 4294967295.0; return;
  case NR_DTYPE_INT32: *lo = -2147483648.0, *hi = 2147483647.0; return;
  case NR_DTYPE_UINT64: *lo = 0, *hi = 9223372036854775807.0; return;
  default: *lo = -9223372036854775808.0, *hi = 9223372036854775807.0; return;
  }
}

/* Follows an integer tensor back through nodes that pass values through unchanged,
 * to the tensor the values come from. */
static int value_source(const nr_graph *g, int t) {
  static const char *const passthrough[] = {"Cast", "Identity", "Reshape", "Squeeze",
                                            "Unsqueeze", "Flatten"};
  for (int steps = 0; t >= 0 && steps < g->n_nodes; steps++) {
    int p = g->tensors[t].producer;
    if (p < 0 || g->nodes[p].n_inputs < 1)
      return t;
    bool pass = false;
    for (size_t i = 0; i < sizeof passthrough / sizeof *passthrough; i++)
      pass = pass || !strcmp(g->nodes[p].op_type, passthrough[i]);
    if (!pass)
      return t;
    t = g->nodes[p].inputs[0];
  }
  return t;
}

/* The fewest rows among the constant tables that input tensor t indexes through a
 * Gather; -1 when it indexes none. */
static int64_t table_rows(const nr_graph *g, int t) {
  int64_t rows = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const nr_node *n = &g->nodes[i];
    if (strcmp(n->op_type, "Gather") || n->n_inputs < 2 || n->inputs[0] < 0 ||
        value_source(g, n->inputs[1]) != t)
      continue;
    const nr_tensor *data = &g->tensors[n->inputs[0]];
    int rank = data->value.rank;
    int64_t axis = nr_attr_int(n, "axis", 0);
    axis = axis < 0 ? axis + rank : axis;
    if (!(data->flags & NR_TENSOR_CONST) || axis < 0 || axis >= rank)
      continue;
    int64_t r = data->value.dims[axis];
    if (r > 0 && (rows < 0 || r < rows))
      rows = r;
  }
  return rows;
}

/* Integer rule from a user range [lo, hi): the integers ceil(lo) .. ceil(hi) - 1. */
static nr_status int_rule(const nr_io_info *info, double lo, double hi, draw_rule *r,
                          nr_error *err) {
  double a = ceil(lo), b = ceil(hi), dmin, dmax;
  int_limits(info->dtype, &dmin, &dmax);
  if (!(a < b))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "range [%g, %g) of input '%s' (%s) holds no integer", lo, hi,
                     info->name, nr_dtype_name(info->dtype));
  if (a < dmin || b - 1 > dmax)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "range [%g, %g) of input '%s' leaves %s (%.0f to %.0f)", lo, hi,
                     info->name, nr_dtype_name(info->dtype), dmin, dmax);
  r->ilo = (int64_t)a;
  r->width = b - a >= 18446744073709551616.0 ? 0 : (uint64_t)(b - a);
  return NR_OK;
}

/* The rule for one input: the user's range if any, else the defaults. */
static nr_status rule_for(nr_model *m, int i, const nr_input_range *range,
                          draw_rule *r, nr_error *err) {
  nr_io_info info;
  nr_model_input_info(m, i, &info);
  *r = (draw_rule){.is_float = nr_dtype_is_float(info.dtype), .lo = -1, .hi = 1,
                   .ilo = 0, .width = info.dtype == NR_DTYPE_BOOL ? 2 : 16};
  if (nr_dtype_size(info.dtype) == 0)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "input '%s': cannot generate %s data",
                     info.name, nr_dtype_name(info.dtype));
  if (range && !(isfinite(range->lo) && isfinite(range->hi) && range->lo <= range->hi))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "range [%g, %g] of input '%s' is not lo <= hi with both finite",
                     range->lo, range->hi, info.name);
  if (range && r->is_float) {
    r->lo = range->lo;
    r->hi = range->hi;
    return NR_OK;
  }
  if (range)
    return int_rule(&info, range->lo, range->hi, r, err);
  nr_graph *g = nr_model_graph(m);
  int64_t rows = info.dtype == NR_DTYPE_BOOL || r->is_float
                     ? -1 : table_rows(g, g->inputs[i]);
  double dmin, dmax;
  int_limits(info.dtype, &dmin, &dmax);
  if (rows > 0)
    r->width = (double)rows - 1 > dmax ? (uint64_t)dmax + 1 : (uint64_t)rows;
  return NR_OK;
}

/* The range that applies to input name: its own, else the one for every input. */
static const nr_input_range *range_for(const char *name, const nr_input_range *ranges,
                                       int n) {
  const nr_input_range *all = NULL;
  for (int i = 0; i < n; i++) {
    if (ranges[i].name && !strcmp(ranges[i].name, name))
      return &ranges[i];
    if (!ranges[i].name)
      all = &ranges[i];
  }
  return all;
}

/* Every rule, after checking that each named range names an input (a typo would
 * otherwise be ignored silently). */
static nr_status make_rules(nr_model *m, const nr_input_range *ranges, int n_ranges,
                            draw_rule *rules, nr_error *err) {
  int ni = nr_model_input_count(m);
  for (int k = 0; k < n_ranges; k++) {
    bool known = !ranges[k].name;
    for (int i = 0; !known && i < ni; i++) {
      nr_io_info info;
      nr_model_input_info(m, i, &info);
      known = !strcmp(info.name, ranges[k].name);
    }
    if (!known)
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                       "a range is given for '%s', which is not an input of the model",
                       ranges[k].name);
  }
  for (int i = 0; i < ni; i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    nr_status st = rule_for(m, i, range_for(info.name, ranges, n_ranges), &rules[i], err);
    if (st)
      return st;
  }
  return NR_OK;
}

static void draw(nr_value *v, const draw_rule *r, uint64_t *state) {
  int64_t n = nr_value_count(v);
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = next_random(state);
    if (r->is_float) {
      double u = (double)(x >> 11) * 0x1p-53;
      nr_store_f64(v->dtype, v->data, i, r->lo + (r->hi - r->lo) * u);
    } else {
      uint64_t k = r->width ? x % r->width : x;
      nr_store_i64(v->dtype, v->data, i, (int64_t)((uint64_t)r->ilo + k));
    }
  }
}

/* Pair k of seed: drawn inputs (its outputs are computed later, with the others). */
static nr_status generate_one(nr_model *m, const draw_rule *rules, uint64_t seed, int k,
                              nr_pair_set *set, pending *q, nr_error *err) {
  char origin[64];
  snprintf(origin, sizeof origin, "generated seed %llu #%d", (unsigned long long)seed, k);
  nr_pair p = {0};
  nr_status st = pair_alloc(&p, set->n_inputs, set->n_outputs, origin, err);
  uint64_t state = pair_state(seed, k);
  for (int i = 0; !st && i < set->n_inputs; i++) {
    nr_io_info info;
    nr_value v = {0};
    nr_model_input_info(m, i, &info);
    st = nr_value_alloc(&v, info.dtype, info.rank, info.dims, err);
    if (st)
      break;
    draw(&v, &rules[i], &state);
    p.inputs[i] = (nr_buffer){v.dtype, v.rank, {0}, v.data};
    memcpy(p.inputs[i].dims, v.dims, sizeof p.inputs[i].dims);
  }
  if (st) {
    pair_free(&p, set->n_inputs, set->n_outputs);
    return st;
  }
  st = set_push(set, &p, err); /* takes p, or frees it on failure */
  if (!st && set->n_outputs > 0)
    st = pending_add(q, set->n - 1, err);
  return st;
}

nr_status nr_pairs_generate(nr_model *m, int count, uint64_t seed,
                            const nr_input_range *ranges, int n_ranges,
                            nr_pair_set *set, nr_error *err) {
  if (count < 0 || n_ranges < 0 || (n_ranges > 0 && !ranges))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "generating pairs: count %d, %d ranges", count, n_ranges);
  nr_pair_set before = set ? *set : (nr_pair_set){0};
  nr_status st = set_begin(m, set, err);
  if (st)
    return st;
  draw_rule *rules = calloc((size_t)set->n_inputs + 1, sizeof *rules);
  st = rules ? make_rules(m, ranges, n_ranges, rules, err)
             : nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  pending q = {0};
  for (int k = 0; !st && k < count; k++)
    st = generate_one(m, rules, seed, k, set, &q, err);
  if (!st)
    st = compute_pending(m, set, &q, err);
  free(q.idx);
  free(rules);
  if (st)
    set_restore(set, &before);
  return st;
}

/* ---- hash --------------------------------------------------------------------------- */

/* FNV-1a, 64-bit. Integers are fed as fixed-width little-endian bytes so the hash does
 * not depend on struct padding; element data as stored (little-endian hosts). */
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv_bytes(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * FNV_PRIME;
  return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++)
    h = (h ^ ((v >> (8 * i)) & 0xff)) * FNV_PRIME;
  return h;
}

static uint64_t hash_buffer(uint64_t h, const nr_buffer *b) {
  h = fnv_u64(h, (uint64_t)b->dtype);
  h = fnv_u64(h, (uint64_t)b->rank);
  for (int d = 0; d < b->rank && d < NR_MAX_RANK; d++)
    h = fnv_u64(h, (uint64_t)b->dims[d]);
  if (b->data)
    h = fnv_bytes(h, b->data, nr_buffer_count(b) * nr_dtype_size(b->dtype));
  return h;
}

/* The origin strings are left out: the same data read from another folder is the
 * same data. */
uint64_t nr_pairs_hash(const nr_pair_set *set) {
  uint64_t h = FNV_OFFSET;
  if (!set)
    return h;
  h = fnv_u64(h, (uint64_t)set->n);
  h = fnv_u64(h, (uint64_t)set->n_inputs);
  h = fnv_u64(h, (uint64_t)set->n_outputs);
  for (int p = 0; p < set->n; p++) {
    for (int i = 0; i < set->n_inputs; i++)
      h = hash_buffer(h, &set->pairs[p].inputs[i]);
    for (int o = 0; o < set->n_outputs; o++)
      h = hash_buffer(h, &set->pairs[p].outputs[o]);
  }
  return h;
}

/* ---- disjoint sets ------------------------------------------------------------------ */

static uint64_t inputs_hash(const nr_pair_set *set, int k) {
  uint64_t h = fnv_u64(FNV_OFFSET, (uint64_t)set->n_inputs);
  for (int i = 0; i < set->n_inputs; i++)
    h = hash_buffer(h, &set->pairs[k].inputs[i]);
  return h;
}

static bool same_buffer(const nr_buffer *x, const nr_buffer *y) {
  if (x->dtype != y->dtype || x->rank != y->rank)
    return false;
  for (int d = 0; d < x->rank && d < NR_MAX_RANK; d++)
    if (x->dims[d] != y->dims[d])
      return false;
  size_t bytes = nr_buffer_count(x) * nr_dtype_size(x->dtype);
  return bytes == 0 || (x->data && y->data && !memcmp(x->data, y->data, bytes));
}

bool nr_pair_inputs_equal(const nr_pair_set *a, int i, const nr_pair_set *b, int j) {
  if (!a || !b || i < 0 || i >= a->n || j < 0 || j >= b->n || a->n_inputs != b->n_inputs)
    return false;
  for (int k = 0; k < a->n_inputs; k++)
    if (!same_buffer(&a->pairs[i].inputs[k], &b->pairs[j].inputs[k]))
      return false;
  return true;
}

nr_status nr_pairs_check_disjoint(const nr_pair_set *held, const char *held_what,
                                  const nr_pair_set *used, const char *used_what,
                                  nr_error *err) {
  if (!held || !used || held->n == 0 || used->n == 0)
    return NR_OK;
  uint64_t *h = malloc(sizeof *h * (size_t)used->n);
  if (!h)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory comparing %ss with %ss", held_what,
                     used_what);
  for (int j = 0; j < used->n; j++)
    h[j] = inputs_hash(used, j);
  nr_status st = NR_OK;
  for (int i = 0; !st && i < held->n; i++) {
    uint64_t hi = inputs_hash(held, i);
    for (int j = 0; !st && j < used->n; j++)
      if (h[j] == hi && nr_pair_inputs_equal(held, i, used, j))
        st = nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                       "%s '%s' has the same inputs as %s '%s'",
                       held_what, held->pairs[i].origin, used_what, used->pairs[j].origin);
  }
  free(h);
  return st;
}
