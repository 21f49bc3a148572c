/* fuzz_engine.c - libFuzzer harness for engine files: parse (environment checked),
 * create a one-thread context, run once on zeros.
 *
 * Key decision: the harness rewrites the header's file size and the trailing SHA-256
 * of every input before parsing it, so what is fuzzed is everything behind the
 * checksum (step records, slots, plan fields, the graph), which is where a tampered
 * engine hurts; a regression input is replayed the same way. The custom mutator is
 * structure-aware: it reads the section table and mostly overwrites fields of the
 * PLAN section in place with boundary values (0, 1, -1, sizes), keeping the length;
 * one mutation in eight is libFuzzer's own, which may also change the length.
 * Engines built on another machine are refused by the environment check, so the seed
 * engines are built on the machine that fuzzes (tests/fuzz/make_seeds.sh). */
#include "engine/engine.h"
#include "fuzz_util.h"
#include "plan/plan.h"
#include "util/sha256.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#define HEADER 32u
#define ENTRY 24u
#define CHECKSUM 32u

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> 8 * i);
}
static void wr64(uint8_t *p, uint64_t v) {
  wr32(p, (uint32_t)v);
  wr32(p + 4, (uint32_t)(v >> 32));
}

/* Makes the header's size field and the checksum agree with the bytes. */
static void fix_file(uint8_t *d, size_t n) {
  if (n < HEADER + CHECKSUM)
    return;
  wr64(d + 24, n);
  nr_sha256(d, n - CHECKSUM, d + n - CHECKSUM);
}

static uint64_t next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Section [*off, *off + *len) of id in d, or the whole body when absent. */
static void find_section(const uint8_t *d, size_t n, uint32_t want, size_t *off, size_t *len) {
  *off = HEADER;
  *len = n > HEADER + CHECKSUM ? n - HEADER - CHECKSUM : 0;
  uint32_t count = rd32(d + 16);
  for (uint32_t i = 0; i < count && i < 16 && HEADER + (i + 1) * ENTRY <= n; i++) {
    const uint8_t *e = d + HEADER + i * ENTRY;
    uint64_t o = rd64(e + 8), l = rd64(e + 16);
    if (rd32(e) == want && o < n && l <= n - o && l) {
      *off = (size_t)o;
      *len = (size_t)l;
      return;
    }
  }
}

static const uint64_t interesting[] = {0, 1, 2, 3, 4, 7, 8, 15, 16, 63, 64, 255, 256,
                                       4096, 65535, 0x7fffffff, 0x80000000u,
                                       0xffffffffu, 0xffffffffffffffffull,
                                       0x8000000000000000ull};
#define N_INTERESTING (sizeof interesting / sizeof interesting[0])

/* One in-place edit of a field: in PLAN five times in eight, else in GRAPH, META or
 * the header and section table (id 0). */
static void mutate_field(uint8_t *d, size_t n, uint64_t *rng) {
  static const uint32_t pick[8] = {3, 3, 3, 3, 3, 2, 1, 0};
  uint32_t id = pick[next(rng) % 8];
  size_t off = 0, len = HEADER + 4 * ENTRY < n - CHECKSUM ? HEADER + 4 * ENTRY : 0;
  if (id)
    find_section(d, n, id, &off, &len);
  if (len == 0)
    return;
  size_t at = off + (size_t)(next(rng) % len);
  uint64_t v = interesting[next(rng) % N_INTERESTING], r = next(rng);
  switch (r % 6) {
  case 0: d[at] ^= (uint8_t)(1u << (r >> 8) % 8); break;
  case 1: d[at] = (uint8_t)v; break;
  case 2: if (at + 4 <= off + len) wr32(d + at, (uint32_t)v); break;
  case 3: if (at + 8 <= off + len) wr64(d + at, v); break;
  case 4: if (at + 4 <= off + len) wr32(d + at, rd32(d + at) + (uint32_t)((r >> 8) % 33) - 16); break;
  default: if (at + 4 <= off + len) wr32(d + at, (uint32_t)(len - (at - off))); break;
  }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed) {
  uint64_t rng = seed;
  if (size < HEADER + CHECKSUM || memcmp(data, "NRENGINE", 8) || next(&rng) % 8 == 0)
    return LLVMFuzzerMutate(data, size, max_size);
  int edits = 1 + (int)(next(&rng) % 4);
  for (int i = 0; i < edits; i++)
    mutate_field(data, size, &rng);
  return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  fix_file(copy, size);
  nr_engine *e = NULL;
  if (!nr_engine_parse(copy, size, true, &e, NULL) && e->plan &&
      e->plan->arena_size <= FUZZ_MAX_TOTAL_BYTES &&
      e->plan->scratch_size <= FUZZ_MAX_TOTAL_BYTES)
    fuzz_run_engine(e);
  nr_engine_free(e);
  free(copy);
  return 0;
}

/* NR_FUZZ_ENGINE_SEEDS=DIR fuzz_engine MODEL...: builds each model along the default
 * route for one thread and saves DIR/<n>.engine, then exits. The seeds must come from
 * this program: the environment check compares the compiler too. */
static int write_seeds(const char *dir, int argc, char **argv) {
  int made = 0;
  for (int i = 1; i < argc; i++) {
    nr_model *m = NULL;
    nr_engine *e = NULL;
    nr_error err = {0};
    nr_build_options bo = {sizeof bo, NULL, 1, NR_DEVICE_CPU, NULL};
    char out[4096];
    snprintf(out, sizeof out, "%s/%d.engine", dir, i);
    if (!nr_model_load(argv[i], NULL, &m, &err) && !fuzz_fix_inputs(m) &&
        !nr_engine_build(m, &bo, &e, &err) && !nr_engine_save(e, out, &err))
      made++;
    nr_engine_destroy(e);
    nr_model_destroy(m);
  }
  fprintf(stderr, "fuzz_engine: %d seed engines from %d models in %s\n", made, argc - 1, dir);
  return made ? 0 : 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *dir = getenv("NR_FUZZ_ENGINE_SEEDS");
  if (dir)
    exit(write_seeds(dir, *argc, *argv));
  return 0;
}
