/* testdata.c - whole-file reads and the layout of ONNX backend test folders:
 *
 *   test_foo/model.onnx
 *   test_foo/test_data_set_0/input_0.pb, input_1.pb, ..., output_0.pb, ...
 *
 * Directory order is arbitrary, so sets and files are sorted by their number (not by
 * name: test_data_set_10 comes after test_data_set_9), and a gap in the input or
 * output numbers is an error rather than a silently shifted binding. The scan of one
 * set folder is public on its own: the tuner's reference pairs (tune/pairs.c) read
 * such folders without a model.onnx beside them. */
#include "io/tensor_io.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

nr_status nr_io_read_file(const char *path, size_t max_len, uint8_t **data, size_t *len,
                          nr_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return nr_errorf(err, NR_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  nr_status st = NR_OK;
  uint8_t *buf = NULL;
  if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode))
    st = nr_errorf(err, NR_ERR_IO, "'%s' is not a regular file", path);
  else if ((uint64_t)sb.st_size > max_len || (uint64_t)sb.st_size > SIZE_MAX - 1)
    st = nr_errorf(err, NR_ERR_NOMEM, "'%s' is too large (%lld bytes)", path,
                   (long long)sb.st_size);
  else if (!(buf = malloc((size_t)sb.st_size + 1)))
    st = nr_errorf(err, NR_ERR_NOMEM, "cannot allocate %lld bytes for '%s'",
                   (long long)sb.st_size, path);
  else if (fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
    st = nr_errorf(err, NR_ERR_IO, "reading '%s' failed", path);
  fclose(f);
  if (st) {
    free(buf);
    return st;
  }
  *data = buf;
  *len = (size_t)sb.st_size;
  return NR_OK;
}

/* ---- numbered names --------------------------------------------------------------- */

/* Parses prefix<digits>suffix; returns the number or -1. */
static long numbered(const char *name, const char *prefix, const char *suffix) {
  size_t np = strlen(prefix), ns = strlen(suffix), n = strlen(name);
  if (n <= np + ns || strncmp(name, prefix, np) || strcmp(name + n - ns, suffix))
    return -1;
  long v = 0;
  for (size_t i = np; i < n - ns; i++) {
    if (name[i] < '0' || name[i] > '9' || v > 100000000)
      return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

typedef struct numbered_path {
  long k;
  char *path;
} numbered_path;

typedef struct path_list {
  numbered_path *items;
  int n, cap;
} path_list;

static bool list_push(path_list *l, long k, const char *dir, const char *name) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 8;
    numbered_path *p = realloc(l->items, sizeof *p * (size_t)cap);
    if (!p)
      return false;
    l->items = p;
    l->cap = cap;
  }
  char *path = malloc(strlen(dir) + strlen(name) + 2);
  if (!path)
    return false;
  sprintf(path, "%s/%s", dir, name);
  l->items[l->n++] = (numbered_path){k, path};
  return true;
}

static void list_free(path_list *l) {
  for (int i = 0; i < l->n; i++)
    free(l->items[i].path);
  free(l->items);
}

static int by_number(const void *a, const void *b) {
  long x = ((const numbered_path *)a)->k, y = ((const numbered_path *)b)->k;
  return (x > y) - (x < y);
}

/* Sorts l and moves its paths into a plain array; fails on a gap or duplicate. */
static nr_status list_take(path_list *l, const char *dir, const char *kind, char ***out,
                           int *n, nr_error *err) {
  if (l->n > 1)
    qsort(l->items, (size_t)l->n, sizeof *l->items, by_number);
  for (int i = 0; i < l->n; i++)
    if (l->items[i].k != i)
      return nr_errorf(err, NR_ERR_IO, "%s: %s_%d.pb is missing", dir, kind, i);
  *out = calloc(l->n > 0 ? (size_t)l->n : 1, sizeof **out);
  if (!*out)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing '%s'", dir);
  for (int i = 0; i < l->n; i++) {
    (*out)[i] = l->items[i].path;
    l->items[i].path = NULL;
  }
  *n = l->n;
  return NR_OK;
}

/* ---- one data set ----------------------------------------------------------------- */

nr_status nr_testdata_scan_set(nr_testdata_set *set, nr_error *err) {
  DIR *d = opendir(set->dir);
  if (!d)
    return nr_errorf(err, NR_ERR_IO, "cannot read folder '%s': %s", set->dir,
                     strerror(errno));
  path_list ins = {0}, outs = {0};
  nr_status st = NR_OK;
  for (struct dirent *e; !st && (e = readdir(d));) {
    long k;
    bool ok = true;
    if ((k = numbered(e->d_name, "input_", ".pb")) >= 0)
      ok = list_push(&ins, k, set->dir, e->d_name);
    else if ((k = numbered(e->d_name, "output_", ".pb")) >= 0)
      ok = list_push(&outs, k, set->dir, e->d_name);
    if (!ok)
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory listing '%s'", set->dir);
  }
  closedir(d);
  if (!st)
    st = list_take(&ins, set->dir, "input", &set->inputs, &set->n_inputs, err);
  if (!st)
    st = list_take(&outs, set->dir, "output", &set->outputs, &set->n_outputs, err);
  list_free(&ins);
  list_free(&outs);
  return st;
}

void nr_testdata_set_free(nr_testdata_set *s) {
  if (!s)
    return;
  for (int i = 0; s->inputs && i < s->n_inputs; i++)
    free(s->inputs[i]);
  for (int i = 0; s->outputs && i < s->n_outputs; i++)
    free(s->outputs[i]);
  free(s->inputs);
  free(s->outputs);
  free(s->dir);
  memset(s, 0, sizeof *s);
}

/* ---- the test folder -------------------------------------------------------------- */

static nr_status list_sets(const char *test_dir, path_list *sets, nr_error *err) {
  DIR *d = opendir(test_dir);
  if (!d)
    return nr_errorf(err, NR_ERR_IO, "cannot read folder '%s': %s", test_dir,
                     strerror(errno));
  nr_status st = NR_OK;
  for (struct dirent *e; !st && (e = readdir(d));) {
    long k = numbered(e->d_name, "test_data_set_", "");
    if (k >= 0 && !list_push(sets, k, test_dir, e->d_name))
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory listing '%s'", test_dir);
  }
  closedir(d);
  qsort(sets->items, (size_t)sets->n, sizeof *sets->items, by_number);
  return st;
}

static nr_status fill_sets(nr_testdata *td, path_list *sets, nr_error *err) {
  td->sets = calloc((size_t)(sets->n ? sets->n : 1), sizeof *td->sets);
  if (!td->sets)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < sets->n; i++) {
    nr_testdata_set *s = &td->sets[td->n_sets++];
    s->index = (int)sets->items[i].k;
    s->dir = sets->items[i].path;
    sets->items[i].path = NULL;
    nr_status st = nr_testdata_scan_set(s, err);
    if (st)
      return st;
  }
  return NR_OK;
}

nr_status nr_testdata_open(const char *test_dir, nr_testdata *out, nr_error *err) {
  nr_testdata td = {0};
  path_list sets = {0};
  struct stat sb;
  nr_status st = NR_OK;
  if (!(td.model_path = malloc(strlen(test_dir) + sizeof "/model.onnx")))
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  sprintf(td.model_path, "%s/model.onnx", test_dir);
  if (stat(td.model_path, &sb) || !S_ISREG(sb.st_mode))
    st = nr_errorf(err, NR_ERR_IO, "'%s' has no model.onnx", test_dir);
  if (!st)
    st = list_sets(test_dir, &sets, err);
  if (!st)
    st = fill_sets(&td, &sets, err);
  list_free(&sets);
  if (st) {
    nr_testdata_free(&td);
    return st;
  }
  *out = td;
  return NR_OK;
}

void nr_testdata_free(nr_testdata *td) {
  if (!td)
    return;
  for (int i = 0; i < td->n_sets; i++)
    nr_testdata_set_free(&td->sets[i]);
  free(td->sets);
  free(td->model_path);
  memset(td, 0, sizeof *td);
}
