/* test_fuzz_loader.c - the loader against truncated and corrupted models.
 *
 * Inputs: the models test_loader.c builds in C, plus up to FUZZ_MAX_FILES *.onnx files
 * spread evenly over the tree named by NR_FUZZ_DIR (when set). Each model is loaded cut
 * at FUZZ_CUTS points and with FUZZ_MUTATIONS seeded corruptions (bit flips, byte
 * overwrites, length-field edits). Every load must either succeed or fail with a
 * message; crashes, leaks and undefined behaviour are caught by the ASan+UBSan build.
 * Failures print the seed; NR_FUZZ_SEED repeats a run, NR_FUZZ_VERBOSE=1 prints each
 * case before it runs (to find the one that crashes). */
#include "loader_models.h"
#include "onnx/onnx_load.h"
#include "io/tensor_io.h"
#include "rng.h"
#include "unit.h"

#include <ftw.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_FILES 200
#define FUZZ_CUTS 32
#define FUZZ_MUTATIONS 40
#define FUZZ_BIG_FILE ((size_t)1 << 20)   /* fewer cases above this size */
#define FUZZ_MAX_FILE ((size_t)64 << 20)  /* skipped above this size */
#define FUZZ_MAX_BYTES ((size_t)256 << 20) /* tensor budget per load */

static uint64_t fuzz_seed(void) {
  const char *s = getenv("NR_FUZZ_SEED");
  return s ? strtoull(s, NULL, 0) : 0x6e6e726f757465ull;
}

typedef struct fuzz_case {
  const char *label;
  const char *base_dir;
  uint64_t seed;
  int index;
} fuzz_case;

static void load_once(nr_test_state *t, const fuzz_case *c, const uint8_t *data,
                      size_t len) {
  if (getenv("NR_FUZZ_VERBOSE"))
    fprintf(stderr, "fuzz %s case %d seed 0x%llx\n", c->label, c->index,
            (unsigned long long)c->seed);
  nr_graph *g = NULL;
  nr_error err = {0};
  nr_status st = nr_onnx_load(data, len, c->base_dir, FUZZ_MAX_BYTES, &g, &err);
  if (st == NR_OK)
    CHECK(g != NULL, "%s case %d seed 0x%llx: OK without a graph", c->label, c->index,
          (unsigned long long)c->seed);
  else
    CHECK(g == NULL && err.message[0], "%s case %d seed 0x%llx: %s without message",
          c->label, c->index, (unsigned long long)c->seed, nr_status_str(st));
  nr_graph_destroy(g);
}

/* One corruption: flip bits, overwrite bytes with interesting values, or bump what
 * may be a length varint. */
static void mutate(uint8_t *d, size_t len, nr_rng *rng) {
  static const uint8_t interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x10, 0x3a};
  int edits = 1 + (int)(nr_rng_u32(rng) % 4);
  for (int e = 0; e < edits && len; e++) {
    size_t at = (size_t)(nr_rng_u32(rng) % len);
    switch (nr_rng_u32(rng) % 3) {
    case 0:
      d[at] ^= (uint8_t)(1u << (nr_rng_u32(rng) % 8));
      break;
    case 1:
      d[at] = interesting[nr_rng_u32(rng) % sizeof interesting];
      break;
    default:
      d[at] = (uint8_t)(d[at] + 1 + nr_rng_u32(rng) % 16);
      break;
    }
  }
}

static void fuzz_bytes(nr_test_state *t, const char *label, const char *base_dir,
                       const uint8_t *data, size_t len, int cuts, int mutations,
                       uint64_t seed) {
  fuzz_case c = {label, base_dir, seed, 0};
  for (int i = 0; i < cuts; i++, c.index++)
    load_once(t, &c, data, (size_t)((double)len * i / cuts));
  uint8_t *copy = malloc(len ? len : 1);
  if (!copy)
    return;
  for (int m = 0; m < mutations; m++, c.index++) {
    c.seed = seed ^ ((uint64_t)m * 0x100000001b3ull);
    nr_rng rng = nr_rng_make(c.seed);
    memcpy(copy, data, len);
    mutate(copy, len, &rng);
    load_once(t, &c, copy, len);
  }
  free(copy);
}

NR_TEST(fuzz_loader_built_models) {
  uint64_t seed = fuzz_seed();
  for (int i = 0; i < LM_N_SAMPLES; i++) {
    lm_arena a = {0};
    size_t len;
    uint8_t *bytes = lm_sample_model(&a, i, &len);
    char label[32];
    snprintf(label, sizeof label, "sample %d", i);
    nr_graph *g = NULL;
    nr_error err = {0};
    CHECK(nr_onnx_load(bytes, len, NULL, 0, &g, &err) == NR_OK, "%s: %s", label, err.message);
    nr_graph_destroy(g);
    /* Small models: every cut point, and more mutations. */
    fuzz_bytes(t, label, NULL, bytes, len, (int)len, 400, seed + (uint64_t)i);
    lm_free(&a);
  }
}

/* ---- models on disk ----------------------------------------------------------------- */

static char **found;
static int n_found, cap_found;

static int collect(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  size_t n = strlen(path);
  if (flag != FTW_F || n < 5 || strcmp(path + n - 5, ".onnx"))
    return 0;
  if (n_found == cap_found) {
    int cap = cap_found ? cap_found * 2 : 256;
    char **p = realloc(found, sizeof *p * (size_t)cap);
    if (!p)
      return 1;
    found = p;
    cap_found = cap;
  }
  if ((found[n_found] = strdup(path)))
    n_found++;
  return 0;
}

static int by_path(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void fuzz_file(nr_test_state *t, const char *path, uint64_t seed) {
  uint8_t *data = NULL;
  size_t len = 0;
  nr_error err = {0};
  if (nr_io_read_file(path, FUZZ_MAX_FILE, &data, &len, &err))
    return;
  char *dir = strdup(path);
  char *slash = dir ? strrchr(dir, '/') : NULL;
  if (slash)
    *slash = '\0';
  bool big = len > FUZZ_BIG_FILE;
  fuzz_bytes(t, path, slash ? dir : ".", data, len, big ? 8 : FUZZ_CUTS,
             big ? 8 : FUZZ_MUTATIONS, seed);
  free(dir);
  free(data);
}

/* Fuzzes up to FUZZ_MAX_FILES models spread evenly over the tree at root. */
static void fuzz_tree(nr_test_state *t, const char *root, uint64_t seed) {
  /* A tree NR_FUZZ_DIR names but that holds no model is missing data: a failure, so
   * a broken path cannot pass as a fuzzed suite. */
  int rc = nftw(root, collect, 32, FTW_PHYS);
  CHECK(rc == 0, "NR_FUZZ_DIR tree %s cannot be walked", root);
  CHECK(n_found > 0, "NR_FUZZ_DIR tree %s holds no .onnx model", root);
  qsort(found, (size_t)n_found, sizeof *found, by_path);
  int picks = n_found < FUZZ_MAX_FILES ? n_found : FUZZ_MAX_FILES;
  fprintf(stderr, "fuzz_loader: %d of %d models under %s, seed 0x%llx\n", picks, n_found,
          root, (unsigned long long)seed);
  for (int i = 0; i < picks; i++) {
    int k = (int)((int64_t)i * n_found / picks);
    fuzz_file(t, found[k], seed ^ (uint64_t)k);
  }
  for (int i = 0; i < n_found; i++)
    free(found[i]);
  free(found);
  found = NULL;
  n_found = cap_found = 0;
}

/* NR_FUZZ_DIR holds one or more trees separated by ':' (the node suite, the exported
 * real models). */
NR_TEST(fuzz_loader_model_files) {
  const char *env = getenv("NR_FUZZ_DIR");
  SKIP_UNLESS(env && *env, "NR_FUZZ_DIR not set (scripts/test.sh's asan stage sets it)");
  char *dirs = strdup(env), *save = NULL;
  uint64_t seed = fuzz_seed();
  for (char *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save))
    fuzz_tree(t, d, seed);
  free(dirs);
}
