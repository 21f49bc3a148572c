/* engine_format.c - the engine file format: serialize a built engine, parse and
 * validate one. This comment is the specification (docs/engine-format.md explains it
 * at more length).
 *
 * Key decision: nothing in a file is trusted until it has been checked, and checks
 * go from the outside in: header, section table, checksum, environment, then each
 * section, then every cross-reference (slot offsets, step slots, tactic ids, node
 * indices) before a single pointer is formed from file data. WEIGHTS is the last
 * section so that a loader can read it straight into a 64-byte-aligned buffer that
 * becomes the plan's weights, with no second copy.
 *
 * ENGINE FILE, format version 2. All integers little-endian; strings are bytes
 * without a NUL (UTF-8 by convention).
 *
 *   offset  size  header
 *        0     8  magic "NRENGINE"
 *        8     4  u32 format version (2); a reader refuses any other
 *       12     4  u32 header size (32); the section table starts here
 *       16     4  u32 section count n (1..16)
 *       20     4  u32 reserved, 0
 *       24     8  u64 file size (the whole file, checksum included)
 *       32  24*n  section table, entries {u32 id, u32 reserved 0, u64 offset, u64 size}
 *
 * Sections follow, each at an offset that is a multiple of 64, in table order,
 * ascending and non-overlapping; the bytes between the table and the first section
 * and between sections are zero padding (< 64 bytes each). Ids: 1 META, 2 GRAPH,
 * 3 PLAN, 4 WEIGHTS, each exactly once, and optionally 5 CALIB and 6 AUTH once each,
 * before WEIGHTS; readers skip other ids. WEIGHTS is the last section, and the file ends right after it with a
 * 32-byte SHA-256 over every byte before the checksum.
 *
 * META: records {u32 key, u32 length, payload}, keys strictly ascending; unknown keys
 * are skipped, all of keys 1-15 are required.
 *    1 nnroute version (string)   2 knob schema (string, 16 hex digits)
 *    3 canonical route (string)   4 model SHA-256 (32 bytes)
 *    5 build time, ms (u64)       6 threads the plan was built for (i32)
 *    7-13 fingerprint: cpu vendor, cpu model, isa flags (strings), cores (i32),
 *         OpenBLAS version, oneDNN version, compiler (strings)
 *   14 inputs, 15 outputs: u32 count, then per tensor {u32 name length, name,
 *      u32 dtype (ONNX numbering), i32 rank, i64 dims[rank]}; they must equal the
 *      plan's input/output slots.
 *   16-22, device engines only (absent: the engine runs on the CPU): device ("cuda"),
 *      GPU name, compute capability, driver's CUDA version, CUDA runtime, cuBLAS and
 *      cuDNN versions (strings). Every step's tactic must run on that device; the
 *      environment check compares these fields (and the compiler) instead of the
 *      CPU's.
 *
 * GRAPH: the plan's optimized graph as a serialized ONNX ModelProto (see
 * engine_graph.c for the nnroute metadata entries it carries).
 *
 * PLAN:
 *   u32 slot count, u32 step count, u32 input count, u32 output count,
 *   u32 graph node count, u32 graph tensor count (must match GRAPH),
 *   u64 arena size, u64 scratch size, u64 weights size (must equal WEIGHTS' size)
 *   slots: {u32 name length, name, u32 dtype, i32 rank, i64 dims[rank],
 *           u32 layout, u32 kind, u64 nbytes, u64 offset,
 *           i32 first use, i32 last use, i32 alias of}
 *   steps: {u32 tactic id length, tactic id, i32 node, u32 n_in, u32 n_out,
 *           i32 in[n_in], i32 out[n_out], u64 packed offset, u64 packed size,
 *           u64 scratch, i32 threads, u8 params[96]}
 *   i32 input slots[input count], i32 output slots[output count]
 *   The section must end exactly there.
 *
 * WEIGHTS: the plan's weights bytes (constants and tactic-packed data).
 *
 * CALIB: the calibration table the engine was built with (src/plan/quant.c's
 * "NRCALIB1" byte form), present only when the build had one.
 *
 * AUTH (signed engines only, engine_sign.c): u32 algorithm (1: HMAC-SHA-256), u32
 * reserved 0, 32-byte MAC under the signing key of every byte before the checksum,
 * the MAC's own 32 bytes read as zeros. Checked, when the loader has a key, right
 * after the checksum: an unsigned file or another key is refused.
 *
 * Validation: slot dtype storable, rank 0..8, dims >= 0, nbytes at least the
 * logical size; ARENA slots nr_inside the arena, CONST slots nr_inside WEIGHTS, INPUT
 * slots naming an input index, ABSORBED slots (kind 3: a constant stored only as its
 * readers' packed data) at offset 0, plain, read only by steps with packed data; no
 * step writes a CONST or ABSORBED slot; alias and first/last use in range; each step's
 * tactic id known to this nnroute (an unknown one is named), node index -1 or in the
 * graph, slot indices in range, packed range nr_inside WEIGHTS, scratch within the
 * plan's scratch size. Any failure: NR_ERR_INVALID_MODEL "engine: <SECTION> section
 * (file offset N): ...". With the environment check on, a different fingerprint,
 * nnroute version or knob schema, or a tactic needing an ISA this process lacks,
 * gives NR_ERR_INVALID_ARGUMENT naming every difference. Last, every step is checked
 * against what a build would make of it (engine_validate.c: the tactic runs the node's
 * op, the step's slots are the node's tensors with their shapes, the op's shape rule
 * gives the outputs, the tactic's validate() hook or a second prepare() agrees with
 * the params record), and a tactic needing an ISA this process lacks is refused even
 * with the environment check off. */
#include "engine/engine_internal.h"
#include "plan/quant.h"
#include "util/error.h"

#include <assert.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t align_up(uint64_t v) {
  return (v + NR_ENGINE_ALIGN - 1) / NR_ENGINE_ALIGN * NR_ENGINE_ALIGN;
}

static const char *section_name(uint32_t id) {
  switch (id) {
  case NR_SECTION_META: return "META";
  case NR_SECTION_GRAPH: return "GRAPH";
  case NR_SECTION_PLAN: return "PLAN";
  case NR_SECTION_WEIGHTS: return "WEIGHTS";
  case NR_SECTION_CALIB: return "CALIB";
  case NR_SECTION_AUTH: return "AUTH";
  }
  return "unknown";
}

static nr_status check_writable(const nr_engine *e, nr_error *err) {
  const nr_plan *p = e ? e->plan : NULL;
  if (!p || !p->graph)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "engine has no plan or graph");
  if (p->weights_size && !p->weights)
    return nr_errorf(err, NR_ERR_INTERNAL, "plan has a weights size but no weights");
  if (p->n_steps < 0 || p->n_slots < 0 || p->n_inputs < 0 || p->n_outputs < 0)
    return nr_errorf(err, NR_ERR_INTERNAL, "plan has negative counts");
  for (int i = 0; i < p->n_steps; i++) {
    const nr_step *st = &p->steps[i];
    if (!st->tactic || !st->tactic->id || st->n_in < 0 || st->n_in > NR_STEP_MAX_IO ||
        st->n_out < 0 || st->n_out > NR_STEP_MAX_IO)
      return nr_errorf(err, NR_ERR_INTERNAL, "plan step %d has no tactic or bad counts", i);
  }
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].rank < 0 || p->slots[i].rank > NR_MAX_RANK)
      return nr_errorf(err, NR_ERR_INTERNAL, "plan slot %d has rank %d", i,
                       p->slots[i].rank);
  for (int i = 0; i < p->n_inputs + p->n_outputs; i++) {
    int s = i < p->n_inputs ? p->inputs[i] : p->outputs[i - p->n_inputs];
    if (s < 0 || s >= p->n_slots)
      return nr_errorf(err, NR_ERR_INTERNAL, "plan input/output %d names slot %d", i, s);
  }
  return NR_OK;
}

static void sha256_file(const uint8_t *head, size_t head_len, const uint8_t *tail,
                        size_t tail_len, uint8_t out[32]) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned n = 0;
  if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ||
      (head_len && !EVP_DigestUpdate(ctx, head, head_len)) ||
      (tail_len && !EVP_DigestUpdate(ctx, tail, tail_len)) ||
      !EVP_DigestFinal_ex(ctx, out, &n))
    memset(out, 0, 32); /* cannot happen short of OOM; the file then fails to load */
  EVP_MD_CTX_free(ctx);
}

nr_status nr_engine_serialize(const nr_engine *e, uint8_t **data, size_t *len,
                              nr_error *err) {
  nr_status st = check_writable(e, err);
  if (st)
    return st;
  const nr_plan *p = e->plan;
  wbuf meta = {0}, plan = {0}, file = {0};
  uint8_t *graph = NULL, *calib = NULL;
  size_t graph_len = 0, calib_len = 0;
  nr_engine_write_meta(&meta, e);
  nr_engine_write_plan(&plan, p);
  st = nr_engine_graph_encode(p, &graph, &graph_len, err);
  if (st)
    goto done;
  if (e->calib && (st = nr_calib_serialize(e->calib, &calib, &calib_len, err)))
    goto done;
  /* META, GRAPH, PLAN, then CALIB and AUTH when present, WEIGHTS last. */
  uint8_t auth[NR_ENGINE_AUTH_SIZE] = {NR_ENGINE_AUTH_HMAC_SHA256}; /* MAC zero for now */
  uint32_t id[6] = {NR_SECTION_META, NR_SECTION_GRAPH, NR_SECTION_PLAN};
  const uint8_t *body[6] = {meta.p, graph, plan.p};
  uint64_t size[6] = {meta.len, graph_len, plan.len}, off[6];
  int ns = 3, auth_at = -1;
  if (e->calib)
    id[ns] = NR_SECTION_CALIB, body[ns] = calib, size[ns++] = calib_len;
  if (e->sign_key_len)
    auth_at = ns, id[ns] = NR_SECTION_AUTH, body[ns] = auth, size[ns++] = sizeof auth;
  int w = ns++;
  id[w] = NR_SECTION_WEIGHTS;
  body[w] = p->weights;
  size[w] = p->weights_size;
  uint64_t at = align_up(NR_ENGINE_HEADER_SIZE + (uint64_t)ns * NR_ENGINE_TABLE_ENTRY);
  for (int i = 0; i < ns; i++) {
    off[i] = at;
    at = align_up(at + size[i]);
  }
  uint64_t file_size = off[w] + size[w] + NR_ENGINE_CHECKSUM_SIZE;
  nr_wbuf_bytes(&file, NR_ENGINE_MAGIC, 8);
  nr_wbuf_u32(&file, NR_ENGINE_FORMAT_VERSION);
  nr_wbuf_u32(&file, NR_ENGINE_HEADER_SIZE);
  nr_wbuf_u32(&file, (uint32_t)ns);
  nr_wbuf_u32(&file, 0);
  nr_wbuf_u64(&file, file_size);
  for (int i = 0; i < ns; i++) {
    nr_wbuf_u32(&file, id[i]);
    nr_wbuf_u32(&file, 0);
    nr_wbuf_u64(&file, off[i]);
    nr_wbuf_u64(&file, size[i]);
  }
  for (int i = 0; i < ns; i++) {
    assert(file.oom || file.len <= off[i]); /* sections ascend: no negative padding */
    nr_wbuf_bytes(&file, NULL, off[i] - file.len);
    nr_wbuf_bytes(&file, body[i], size[i]);
  }
  uint8_t sum[32];
  if (!file.oom && auth_at >= 0) { /* the MAC over the file with its own bytes zero */
    nr_bytes all = {file.p, file.len};
    st = nr_engine_mac(&all, 1, e->sign_key, e->sign_key_len, file.p + off[auth_at] + 8, err);
    if (st)
      goto done;
  }
  if (!file.oom) {
    sha256_file(file.p, file.len, NULL, 0, sum);
    nr_wbuf_bytes(&file, sum, 32);
    assert(file.oom || file.len == file_size); /* the size the header promised */
  }
  if (meta.oom || plan.oom || file.oom) {
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory serializing the engine");
    goto done;
  }
  *data = file.p;
  *len = file.len;
  file.p = NULL;
done:
  free(meta.p);
  free(plan.p);
  free(file.p);
  free(graph);
  free(calib);
  return st;
}

/* ---- container ---------------------------------------------------------------------- */

typedef struct section {
  uint64_t off, size;
  const uint8_t *p;
} section;

typedef struct file_view {
  const uint8_t *head;
  size_t head_len;
  const uint8_t *tail;
  size_t tail_len;
  uint64_t size;
  section sec[7]; /* by id */
} file_view;

static nr_status bad_file(nr_error *err, uint64_t off, const char *fmt, ...) NR_PRINTF(3, 4);
static nr_status bad_file(nr_error *err, uint64_t off, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return nr_errorf(err, NR_ERR_INVALID_MODEL, "engine: header (file offset %llu): %s",
                   (unsigned long long)off, msg);
}

/* Pointer to [off, off+size) when it lies wholly in head or wholly in tail. */
static const uint8_t *view_at(const file_view *v, uint64_t off, uint64_t size) {
  if (nr_inside(off, size, v->head_len))
    return v->head + off;
  if (v->tail && off >= v->head_len && nr_inside(off - v->head_len, size, v->tail_len))
    return v->tail + (off - v->head_len);
  return NULL;
}

static bool all_zero(const uint8_t *p, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i])
      return false;
  return true;
}

static nr_status read_header(file_view *v, uint32_t *count, nr_error *err) {
  uint64_t total = (uint64_t)v->head_len + v->tail_len;
  if (v->head_len < NR_ENGINE_HEADER_SIZE)
    return bad_file(err, 0, "truncated: %llu bytes, less than the %u-byte header",
                    (unsigned long long)total, NR_ENGINE_HEADER_SIZE);
  const uint8_t *h = v->head;
  if (memcmp(h, NR_ENGINE_MAGIC, 8))
    return bad_file(err, 0, "not an nnroute engine (magic is not \"NRENGINE\")");
  uint32_t version = nr_le32(h + 8);
  if (version != NR_ENGINE_FORMAT_VERSION)
    return bad_file(err, 8, "engine format version %u; this nnroute reads version %u "
                    "(rebuild the engine)", version, NR_ENGINE_FORMAT_VERSION);
  if (nr_le32(h + 12) != NR_ENGINE_HEADER_SIZE || nr_le32(h + 20))
    return bad_file(err, 12, "header size %u (expected %u) or reserved field set",
                    nr_le32(h + 12), NR_ENGINE_HEADER_SIZE);
  *count = nr_le32(h + 16);
  if (*count < 1 || *count > NR_ENGINE_MAX_SECTIONS)
    return bad_file(err, 16, "section count %u (1 to %u)", *count, NR_ENGINE_MAX_SECTIONS);
  v->size = nr_le64(h + 24);
  if (v->size != total)
    return bad_file(err, 24, "header says %llu bytes but there are %llu (truncated or "
                    "padded file)", (unsigned long long)v->size, (unsigned long long)total);
  if (NR_ENGINE_HEADER_SIZE + *count * NR_ENGINE_TABLE_ENTRY > v->head_len)
    return bad_file(err, 32, "truncated section table");
  return NR_OK;
}

static nr_status read_table(file_view *v, uint32_t count, nr_error *err) {
  uint64_t end = NR_ENGINE_HEADER_SIZE + (uint64_t)count * NR_ENGINE_TABLE_ENTRY;
  uint64_t limit = v->size - NR_ENGINE_CHECKSUM_SIZE; /* size >= header: no underflow */
  for (uint32_t i = 0; i < count; i++) {
    uint64_t at = NR_ENGINE_HEADER_SIZE + (uint64_t)i * NR_ENGINE_TABLE_ENTRY;
    const uint8_t *e = v->head + at;
    uint32_t id = nr_le32(e);
    uint64_t off = nr_le64(e + 8), size = nr_le64(e + 16);
    if (nr_le32(e + 4))
      return bad_file(err, at + 4, "section entry %u has its reserved field set", i);
    if (off % NR_ENGINE_ALIGN || off < end || off - end >= NR_ENGINE_ALIGN)
      return bad_file(err, at + 8, "section %s at offset %llu is misplaced (must be "
                      "64-byte aligned, ascending, after at most 63 padding bytes)",
                      section_name(id), (unsigned long long)off);
    if (!nr_inside(off, size, limit))
      return bad_file(err, at + 16, "section %s (offset %llu, %llu bytes) runs past the "
                      "end of the file", section_name(id), (unsigned long long)off,
                      (unsigned long long)size);
    const uint8_t *pad = view_at(v, end, off - end);
    if (!pad || !all_zero(pad, off - end))
      return bad_file(err, end, "non-zero padding before section %s", section_name(id));
    if (id >= 1 && id <= NR_SECTION_AUTH) {
      if (v->sec[id].p)
        return bad_file(err, at, "section %s appears twice", section_name(id));
      if (!(v->sec[id].p = view_at(v, off, size)) && size)
        return bad_file(err, at, "section %s straddles the WEIGHTS boundary",
                        section_name(id));
      if (!v->sec[id].p)
        v->sec[id].p = (const uint8_t *)""; /* empty: any non-NULL marker */
      v->sec[id].off = off;
      v->sec[id].size = size;
    }
    end = off + size;
  }
  for (uint32_t id = 1; id <= 4; id++)
    if (!v->sec[id].p)
      return bad_file(err, 16, "section %s is missing", section_name(id));
  if (end != limit || v->sec[NR_SECTION_WEIGHTS].off + v->sec[NR_SECTION_WEIGHTS].size != end)
    return bad_file(err, end, "WEIGHTS must be the last section and the checksum must "
                    "follow it directly");
  return NR_OK;
}

/* Bytes [off, off+len) of the file, as at most two pieces (head, tail). */
static int file_pieces(const file_view *v, uint64_t off, uint64_t len, nr_bytes *out) {
  int n = 0;
  if (off < v->head_len) {
    uint64_t k = len < v->head_len - off ? len : v->head_len - off;
    out[n++] = (nr_bytes){v->head + off, (size_t)k};
    off += k, len -= k;
  }
  if (len && v->tail)
    out[n++] = (nr_bytes){v->tail + (off - v->head_len), (size_t)len};
  return n;
}

/* With a key: the AUTH section must hold the MAC of the file under it. */
static nr_status check_auth(const file_view *v, nr_bytes key, nr_error *err) {
  const section *a = &v->sec[NR_SECTION_AUTH];
  if (!a->p)
    return bad_file(err, 16, "the engine is not signed (built without a signing key), "
                    "and a verification key was given");
  if (a->size != NR_ENGINE_AUTH_SIZE || nr_le32(a->p) != NR_ENGINE_AUTH_HMAC_SHA256 ||
      nr_le32(a->p + 4))
    return bad_file(err, a->off, "AUTH section of %llu bytes, algorithm %u: not an "
                    "HMAC-SHA-256 signature", (unsigned long long)a->size,
                    a->size >= 4 ? nr_le32(a->p) : 0);
  static const uint8_t zeros[32];
  uint64_t mac_off = a->off + 8, body = v->size - NR_ENGINE_CHECKSUM_SIZE;
  nr_bytes parts[5];
  int n = file_pieces(v, 0, mac_off, parts);
  parts[n++] = (nr_bytes){zeros, 32};
  n += file_pieces(v, mac_off + 32, body - mac_off - 32, parts + n);
  uint8_t mac[32];
  nr_status st = nr_engine_mac(parts, n, key.p, key.len, mac, err);
  if (!st && !nr_engine_mac_equal(mac, a->p + 8))
    st = bad_file(err, mac_off, "signature mismatch: the engine was signed with another "
                  "key, or changed after signing");
  return st;
}

static nr_status check_sum(const file_view *v, nr_error *err) {
  uint64_t body = v->size - NR_ENGINE_CHECKSUM_SIZE;
  const uint8_t *stored = view_at(v, body, NR_ENGINE_CHECKSUM_SIZE);
  size_t head = body < v->head_len ? (size_t)body : v->head_len;
  uint8_t sum[32];
  sha256_file(v->head, head, v->tail, (size_t)(body - head), sum);
  if (!stored || memcmp(sum, stored, 32))
    return bad_file(err, body, "checksum mismatch: the file is corrupt");
  return NR_OK;
}

uint64_t nr_engine_split_point(const uint8_t *head, size_t head_len, uint64_t file_size) {
  if (head_len < NR_ENGINE_HEADER_SIZE || memcmp(head, NR_ENGINE_MAGIC, 8))
    return file_size;
  uint32_t count = nr_le32(head + 16);
  uint64_t table_end = NR_ENGINE_HEADER_SIZE + (uint64_t)count * NR_ENGINE_TABLE_ENTRY;
  if (count < 1 || count > NR_ENGINE_MAX_SECTIONS || table_end > head_len)
    return file_size;
  for (uint32_t i = 0; i < count; i++) {
    const uint8_t *e = head + NR_ENGINE_HEADER_SIZE + i * NR_ENGINE_TABLE_ENTRY;
    uint64_t off = nr_le64(e + 8);
    if (nr_le32(e) == NR_SECTION_WEIGHTS && off % NR_ENGINE_ALIGN == 0 && off < file_size &&
        off >= table_end)
      return off;
  }
  return file_size;
}

/* ---- environment -------------------------------------------------------------------- */

static void append(char *buf, size_t cap, const char *fmt, ...) NR_PRINTF(3, 4);
static void append(char *buf, size_t cap, const char *fmt, ...) {
  size_t n = strlen(buf);
  if (n + 1 >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + n, cap - n, fmt, ap);
  va_end(ap);
}

static nr_status check_env(const nr_engine *e, nr_error *err) {
  char diff[900] = "";
  nr_fingerprint here;
  nr_error fe = {0};
  nr_fingerprint_current_for(&here, e->fingerprint.device);
  if (nr_fingerprint_compare(&e->fingerprint, &here, &fe))
    append(diff, sizeof diff, "%s", fe.message);
  if (strcmp(e->nnroute_version, NR_VERSION_STRING))
    append(diff, sizeof diff, "%snnroute_version: engine '%s', this nnroute '%s'",
           *diff ? "; " : "", e->nnroute_version, NR_VERSION_STRING);
  char schema[17];
  nr_knob_schema(schema);
  if (strcmp(e->knob_schema, schema))
    append(diff, sizeof diff, "%sknob_schema: engine '%s', this nnroute '%s'",
           *diff ? "; " : "", e->knob_schema, schema);
  unsigned isa = nr_cpu_isa();
  for (int i = 0; i < e->plan->n_steps; i++) {
    const nr_tactic *t = e->plan->steps[i].tactic;
    if (t->isa & ~isa) {
      append(diff, sizeof diff, "%stactic '%s' needs ISA bits 0x%x, this process has 0x%x",
             *diff ? "; " : "", t->id, t->isa, isa);
      break;
    }
  }
  if (!*diff)
    return NR_OK;
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                   "engine was built for another environment (%s); rebuild it, or pass "
                   "--unsafe-ignore-environment", diff);
}

/* ---- assembly --------------------------------------------------------------------- */

static rbuf section_reader(const file_view *v, int id, nr_error *err) {
  rbuf r = {v->sec[id].p, (size_t)v->sec[id].size, 0, v->sec[id].off, section_name(id),
            err, NR_OK};
  return r;
}

/* Points main-graph constants at the weights their value_info names; a constant whose
 * slot is absorbed (only its readers' packed form was stored) gets no data. */
static nr_status bind_constants(rbuf *r, nr_plan *p, const int *bind) {
  nr_graph *g = p->graph;
  for (int i = 0; i < g->n_tensors; i++) {
    if (bind[i] < 0)
      continue;
    nr_value *v = &g->tensors[i].value;
    const nr_slot *s = bind[i] < p->n_slots ? &p->slots[bind[i]] : NULL;
    if (!s || (s->kind != NR_SLOT_CONST && s->kind != NR_SLOT_ABSORBED) ||
        s->layout != NR_LAYOUT_PLAIN ||
        s->dtype != v->dtype || s->rank != v->rank ||
        memcmp(s->dims, v->dims, sizeof v->dims[0] * s->rank))
      return nr_rbuf_fail(r, "constant '%.200s' names slot %d, which does not hold it",
                    g->tensors[i].name, bind[i]);
    v->data = p->weights && s->kind == NR_SLOT_CONST ? p->weights + s->offset : NULL;
    v->owned = false;
  }
  return NR_OK;
}

static nr_status parse_graph(const file_view *v, nr_plan *p, const plan_counts *c,
                             int **bind, nr_error *err) {
  rbuf r = section_reader(v, NR_SECTION_GRAPH, err);
  nr_status st = nr_engine_graph_decode(r.p, r.len, &p->graph, bind, err);
  /* The decoder's tensor budget is the section's length here, so a tensor over it is
   * a corrupt section, not a lack of memory. */
  if (st == NR_ERR_NOMEM && err && !strstr(err->message, "tensor data limit"))
    return st;
  if (st) {
    char why[sizeof err->message];
    snprintf(why, sizeof why, "%s", err ? err->message : "invalid graph");
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "engine: GRAPH section (file offset %llu): "
                     "%s", (unsigned long long)r.base, why);
  }
  if ((uint32_t)p->graph->n_nodes != c->n_nodes ||
      (uint32_t)p->graph->n_tensors != c->n_tensors)
    return nr_rbuf_fail(&r, "graph has %d nodes and %d tensors; PLAN says %u and %u",
                  p->graph->n_nodes, p->graph->n_tensors, c->n_nodes, c->n_tensors);
  if (p->graph->n_inputs != p->n_inputs || p->graph->n_outputs != p->n_outputs)
    return nr_rbuf_fail(&r, "graph has %d inputs and %d outputs; PLAN has %d and %d",
                  p->graph->n_inputs, p->graph->n_outputs, p->n_inputs, p->n_outputs);
  return NR_OK;
}

/* Weights: adopt tail when WEIGHTS starts it, else copy into an aligned buffer. */
static nr_status take_weights(const file_view *v, nr_plan *p, uint8_t *tail,
                              bool *adopted, nr_error *err) {
  const section *w = &v->sec[NR_SECTION_WEIGHTS];
  if (tail && w->p == tail) {
    p->weights = tail;
    p->weights_cap = v->tail_len;
    *adopted = true;
    return NR_OK;
  }
  if (!w->size)
    return NR_OK;
  if (!(p->weights = aligned_alloc(NR_ENGINE_ALIGN, align_up(w->size))))
    return nr_errorf(err, NR_ERR_NOMEM, "cannot allocate %llu bytes of weights",
                     (unsigned long long)w->size);
  memcpy(p->weights, w->p, w->size);
  p->weights_cap = align_up(w->size);
  return NR_OK;
}

static nr_status parse_sections(const file_view *v, bool env, nr_engine *e, meta *m,
                                int **bind, uint8_t *tail, bool *adopted, nr_error *err) {
  nr_plan *p = e->plan;
  plan_counts c = {0};
  uint64_t wsize = 0;
  rbuf rm = section_reader(v, NR_SECTION_META, err);
  rbuf rp = section_reader(v, NR_SECTION_PLAN, err);
  if (nr_engine_read_meta(&rm, e, m))
    return rm.st;
  nr_engine_read_plan(&rp, p, &c, &wsize);
  if (rp.st)
    return rp.st;
  p->route = m->route;
  m->route = NULL;
  p->device = e->fingerprint.device;
  for (int k = 0; k < p->n_steps; k++)
    if (p->steps[k].tactic && p->steps[k].tactic->device != p->device)
      return nr_rbuf_fail(&rp, "step %d: tactic '%s' runs on %s, the engine on %s", k,
                          p->steps[k].tactic->id,
                          nr_device_name(p->steps[k].tactic->device),
                          nr_device_name(p->device));
  if (env && check_env(e, err))
    return NR_ERR_INVALID_ARGUMENT;
  if (wsize != v->sec[NR_SECTION_WEIGHTS].size)
    return nr_rbuf_fail(&rp, "weights size %llu differs from the WEIGHTS section's %llu",
                  (unsigned long long)wsize,
                  (unsigned long long)v->sec[NR_SECTION_WEIGHTS].size);
  p->weights_size = wsize;
  if (nr_engine_check_plan(&rp, p, &c) || nr_engine_check_io(&rm, p, m))
    return rp.st ? rp.st : rm.st;
  nr_status st = parse_graph(v, p, &c, bind, err);
  if (!st && v->sec[NR_SECTION_CALIB].p &&
      (st = nr_calib_deserialize(v->sec[NR_SECTION_CALIB].p, v->sec[NR_SECTION_CALIB].size,
                                 &e->calib, err)))
    nr_error_prefix(err, "engine: CALIB section (file offset %llu): ",
                    (unsigned long long)v->sec[NR_SECTION_CALIB].off);
  if (!st)
    st = take_weights(v, p, tail, adopted, err);
  if (!st)
    st = bind_constants(&rp, p, *bind);
  if (!st)
    st = nr_engine_validate_steps(e, err);
  return st;
}

nr_status nr_engine_parse_split(const uint8_t *head, size_t head_len, uint8_t *tail,
                                size_t tail_len, bool check_env_flag, nr_bytes key,
                                bool *tail_adopted, nr_engine **out, nr_error *err) {
  *out = NULL;
  *tail_adopted = false;
  file_view v = {head, head_len, tail, tail ? tail_len : 0, 0, {{0}}};
  uint32_t count = 0;
  nr_status st = read_header(&v, &count, err);
  if (!st)
    st = read_table(&v, count, err);
  if (!st)
    st = check_sum(&v, err);
  if (!st && key.len)
    st = check_auth(&v, key, err);
  if (st)
    return st;
  nr_engine *e = calloc(1, sizeof *e);
  meta m = {0};
  int *bind = NULL;
  if (!e || !(e->plan = calloc(1, sizeof *e->plan))) {
    free(e);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory loading the engine");
  }
  /* Once the tail is adopted the plan owns it, failure or not. */
  st = parse_sections(&v, check_env_flag, e, &m, &bind, tail, tail_adopted, err);
  nr_engine_meta_free(&m);
  free(bind);
  if (st) {
    nr_engine_free(e);
    return st;
  }
  *out = e;
  return NR_OK;
}

nr_status nr_engine_parse(const uint8_t *data, size_t len, bool check_env_flag,
                          nr_engine **out, nr_error *err) {
  if (!out || (!data && len))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_engine_parse: no data or no out");
  bool adopted;
  return nr_engine_parse_split(data ? data : (const uint8_t *)"", len, NULL, 0,
                               check_env_flag, (nr_bytes){NULL, 0}, &adopted, out, err);
}
