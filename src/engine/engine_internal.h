/* engine_internal.h - what the engine's files (engine_format.c, engine_graph.c,
 * engine_api.c) share and nobody else needs.
 *
 * The split parse exists so that nr_engine_load() can read the file in two pieces:
 * everything before the WEIGHTS section into one buffer, and WEIGHTS (plus the
 * trailing checksum) into a separate 64-byte-aligned buffer that the plan then
 * adopts as its weights, so a loaded engine's weights are never copied twice. */
#ifndef NR_ENGINE_INTERNAL_H
#define NR_ENGINE_INTERNAL_H

#include "engine/engine.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NR_ENGINE_MAGIC "NRENGINE"
#define NR_ENGINE_FORMAT_VERSION 2u
#define NR_ENGINE_HEADER_SIZE 32u
#define NR_ENGINE_TABLE_ENTRY 24u
#define NR_ENGINE_MAX_SECTIONS 16u
#define NR_ENGINE_ALIGN 64u
#define NR_ENGINE_CHECKSUM_SIZE 32u

enum {
  NR_SECTION_META = 1,
  NR_SECTION_GRAPH = 2,
  NR_SECTION_PLAN = 3,
  NR_SECTION_WEIGHTS = 4,
  NR_SECTION_CALIB = 5, /* optional: the calibration table int8 steps were built from */
  NR_SECTION_AUTH = 6,  /* optional: HMAC-SHA-256 of the file (engine_sign.c) */
};
#define NR_ENGINE_AUTH_SIZE 40u /* u32 algorithm (1), u32 reserved, 32-byte MAC */
#define NR_ENGINE_AUTH_HMAC_SHA256 1u

/* ---- engine_sections.c: byte cursors, META and PLAN ------------------------------ */

static inline uint32_t nr_le32(const uint8_t *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}
static inline uint64_t nr_le64(const uint8_t *b) {
  return (uint64_t)nr_le32(b) | (uint64_t)nr_le32(b + 4) << 32;
}
/* [off, off+size) lies within [0, total), without overflow. */
static inline bool nr_inside(uint64_t off, uint64_t size, uint64_t total) {
  return off <= total && size <= total - off;
}

/* A growing output buffer; oom is sticky and checked once at the end. */
typedef struct wbuf {
  uint8_t *p;
  size_t len, cap;
  bool oom;
} wbuf;
void nr_wbuf_bytes(wbuf *w, const void *data, size_t n); /* data NULL: zeros */
void nr_wbuf_u32(wbuf *w, uint32_t v);
void nr_wbuf_u64(wbuf *w, uint64_t v);

/* A cursor over one section: the first failure is recorded as NR_ERR_INVALID_MODEL
 * "engine: <section> section (file offset N): ..." and every later read is a no-op. */
typedef struct rbuf {
  const uint8_t *p;
  size_t len, pos;
  uint64_t base; /* file offset of p[0] */
  const char *section;
  nr_error *err;
  nr_status st;
} rbuf;
nr_status nr_rbuf_fail(rbuf *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What META holds beyond the nr_engine fields: the route and the I/O lists. */
typedef struct meta_io {
  char *name;
  nr_dtype dtype;
  int rank;
  int64_t dims[NR_MAX_RANK];
} meta_io;
typedef struct meta {
  char *route;
  meta_io *io[2]; /* inputs, outputs */
  uint32_t n_io[2];
} meta;
/* Graph sizes PLAN records, checked against GRAPH. */
typedef struct plan_counts {
  uint32_t n_nodes, n_tensors;
} plan_counts;

void nr_engine_write_meta(wbuf *w, const nr_engine *e);
void nr_engine_write_plan(wbuf *w, const nr_plan *p);
nr_status nr_engine_read_meta(rbuf *r, nr_engine *e, meta *m);
void nr_engine_meta_free(meta *m);
/* Reads PLAN into p (slots, steps, I/O lists, sizes; tactics resolved by id). */
void nr_engine_read_plan(rbuf *r, nr_plan *p, plan_counts *c, uint64_t *weights_size);
/* Every slot, step and I/O cross-reference of p (weights_size already set). */
nr_status nr_engine_check_plan(rbuf *r, const nr_plan *p, const plan_counts *c);
/* META's input/output lists against the plan's slots. */
nr_status nr_engine_check_io(rbuf *r, const nr_plan *p, const meta *m);

/* ---- engine_graph.c: the GRAPH section (an ONNX ModelProto) ---------------------- */

/* Serializes plan->graph. Main-graph constants whose bytes a plain CONST slot of the
 * same name and shape already holds are referenced by slot instead of stored. */
nr_status nr_engine_graph_encode(const nr_plan *plan, uint8_t **out, size_t *len,
                                 nr_error *err);
/* Rebuilds a graph from GRAPH bytes. *bind (malloc'ed, one entry per main-graph
 * tensor) receives the slot whose weights hold a constant's data, or -1; the caller
 * validates the slot and points the tensor's data at the weights. Messages are not
 * prefixed with the section: the caller adds that. */
nr_status nr_engine_graph_decode(const uint8_t *data, size_t len, nr_graph **out,
                                 int **bind, nr_error *err);

/* ---- engine_validate.c: the semantic check of every step ----------------------- */

/* Every step of e's plan (graph, slots and weights in place) against what the build
 * would have made of it: the generic checks, then the tactic's validate() hook.
 * NR_ERR_INVALID_MODEL naming the step, tactic, node and field. */
nr_status nr_engine_validate_steps(const nr_engine *e, nr_error *err);

/* ---- engine_sign.c: the AUTH section's HMAC ------------------------------------------ */

typedef struct nr_bytes {
  const uint8_t *p;
  size_t len;
} nr_bytes;
/* HMAC-SHA-256 under key of the concatenation of parts[0..n). */
nr_status nr_engine_mac(const nr_bytes *parts, int n, const uint8_t *key, size_t key_len,
                        uint8_t out[32], nr_error *err);
bool nr_engine_mac_equal(const uint8_t a[32], const uint8_t b[32]); /* constant time */

/* ---- engine_format.c -------------------------------------------------------------- */

/* Given at least the first NR_ENGINE_HEADER_SIZE + table bytes of a file of file_size
 * bytes, returns in *split the offset of the WEIGHTS section when the header looks
 * sane, else file_size (read everything into one buffer; the parse reports why). */
uint64_t nr_engine_split_point(const uint8_t *head, size_t head_len, uint64_t file_size);
/* Parses the engine whose bytes are head[0, head_len) followed by tail[0, tail_len).
 * tail, when not NULL, must be 64-byte aligned and malloc'ed; when the WEIGHTS
 * section starts exactly at tail, the plan adopts it as its weights buffer and
 * *tail_adopted is set (the caller must not free it then). */
/* key, when its len is not 0, must have signed the file (the AUTH section): an
 * unsigned file or another key is NR_ERR_INVALID_MODEL, before any section is
 * parsed. */
nr_status nr_engine_parse_split(const uint8_t *head, size_t head_len, uint8_t *tail,
                                size_t tail_len, bool check_env, nr_bytes key,
                                bool *tail_adopted, nr_engine **out, nr_error *err);

#endif
