/* engine_api.c - the public engine calls: save, load, destroy and the queries on a
 * loaded engine.
 *
 * Key decision: loading reads the file in two pieces. Everything before the WEIGHTS
 * section goes into an ordinary buffer; WEIGHTS and the checksum go into one
 * 64-byte-aligned buffer that the plan adopts as its weights, so however large the
 * model, its weights are read once and never copied. Saving goes through
 * util/file_out.h: a temporary with a random name beside the target, renamed over it
 * once whole, so a crash never leaves half an engine under the real name. */
#include "backends/backend.h"
#include "engine/engine_internal.h"
#include "plan/quant.h"
#include "util/error.h"
#include "util/file_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Engines over this size are refused before anything is allocated. */
#define NR_ENGINE_MAX_FILE ((uint64_t)64 << 30)

void nr_engine_free(nr_engine *e) {
  if (!e)
    return;
  const nr_backend *be = e->plan ? nr_backend_for(e->plan->device) : NULL;
  if (be && e->device_state)
    be->engine_detach(e);
  nr_plan_destroy(e->plan);
  nr_calibration_destroy(e->calib);
  nr_engine_clear_sign_key(e);
  free(e);
}

void nr_engine_destroy(nr_engine *engine) {
  nr_engine_free(engine);
}

nr_status nr_engine_save(const nr_engine *engine, const char *path, nr_error *err) {
  if (!engine || !path)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_engine_save: no engine or path");
  uint8_t *data = NULL;
  size_t len = 0;
  nr_status st = nr_engine_serialize(engine, &data, &len, err);
  if (st)
    return st;
  st = nr_file_write_whole(path, data, len, "engine", err);
  free(data);
  return st;
}

static nr_status read_at(int fd, uint8_t *buf, size_t len, uint64_t off, const char *path,
                         nr_error *err) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return nr_errorf(err, NR_ERR_IO, "cannot read engine '%s' at offset %llu: %s", path,
                       (unsigned long long)(off + done), n ? strerror(errno) : "short read");
    done += (size_t)n;
  }
  return NR_OK;
}

static nr_status load_fd(int fd, uint64_t size, const char *path, bool env, nr_bytes key,
                         nr_engine **out, nr_error *err) {
  uint8_t probe[NR_ENGINE_HEADER_SIZE + NR_ENGINE_MAX_SECTIONS * NR_ENGINE_TABLE_ENTRY];
  size_t probe_len = size < sizeof probe ? (size_t)size : sizeof probe;
  nr_status st = read_at(fd, probe, probe_len, 0, path, err);
  if (st)
    return st;
  uint64_t split = nr_engine_split_point(probe, probe_len, size);
  uint8_t *head = malloc(split ? (size_t)split : 1);
  uint64_t tail_len = size - split;
  uint8_t *tail = tail_len ? aligned_alloc(NR_ENGINE_ALIGN, (tail_len + 63) / 64 * 64) : NULL;
  bool adopted = false;
  if (!head || (tail_len && !tail))
    st = nr_errorf(err, NR_ERR_NOMEM, "cannot allocate %llu bytes to load engine '%s'",
                   (unsigned long long)size, path);
  if (!st)
    st = read_at(fd, head, (size_t)split, 0, path, err);
  if (!st)
    st = read_at(fd, tail, (size_t)tail_len, split, path, err);
  if (!st)
    st = nr_engine_parse_split(head, (size_t)split, tail, (size_t)tail_len, env, key,
                               &adopted, out, err);
  free(head);
  if (!adopted)
    free(tail);
  return st;
}

nr_status nr_engine_load(const char *path, const nr_engine_load_options *opts,
                         nr_engine **out, nr_error *err) {
  if (!path || !out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_engine_load: no path or out");
  *out = NULL;
  nr_engine_load_options o = {sizeof o, 0};
  if (opts) /* an older caller's smaller struct leaves the newer fields at default */
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  bool env = !o.unsafe_ignore_environment;
  nr_bytes key = {o.verify_key_len ? o.verify_key : NULL, o.verify_key ? o.verify_key_len : 0};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return nr_errorf(err, NR_ERR_IO, "cannot open engine '%s': %s", path, strerror(errno));
  struct stat sb;
  nr_status st = NR_OK;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
    st = nr_errorf(err, NR_ERR_IO, "engine '%s' is not a readable regular file", path);
  else if ((uint64_t)sb.st_size > NR_ENGINE_MAX_FILE)
    st = nr_errorf(err, NR_ERR_NOMEM, "engine '%s' is %llu bytes, over the %llu-byte limit",
                   path, (unsigned long long)sb.st_size,
                   (unsigned long long)NR_ENGINE_MAX_FILE);
  else
    st = load_fd(fd, (uint64_t)sb.st_size, path, env, key, out, err);
  close(fd);
  if (st && st != NR_ERR_IO)
    nr_error_prefix(err, "'%s': ", path);
  return st;
}

int nr_engine_input_count(const nr_engine *engine) {
  return engine && engine->plan ? engine->plan->n_inputs : 0;
}

int nr_engine_output_count(const nr_engine *engine) {
  return engine && engine->plan ? engine->plan->n_outputs : 0;
}

static nr_status io_info(const nr_engine *e, int index, bool input, nr_io_info *info) {
  int n = input ? nr_engine_input_count(e) : nr_engine_output_count(e);
  if (!info || index < 0 || index >= n)
    return NR_ERR_INVALID_ARGUMENT;
  const nr_plan *p = e->plan;
  const nr_slot *s = &p->slots[input ? p->inputs[index] : p->outputs[index]];
  info->name = s->name ? s->name : "";
  info->dtype = s->dtype;
  info->rank = s->rank;
  memcpy(info->dims, s->dims, sizeof info->dims);
  return NR_OK;
}

nr_status nr_engine_input_info(const nr_engine *engine, int index, nr_io_info *info) {
  return io_info(engine, index, true, info);
}

nr_status nr_engine_output_info(const nr_engine *engine, int index, nr_io_info *info) {
  return io_info(engine, index, false, info);
}

int nr_engine_step_count(const nr_engine *engine) {
  return engine && engine->plan ? engine->plan->n_steps : 0;
}

nr_status nr_engine_step_info(const nr_engine *engine, int index, nr_step_info *info) {
  if (!info || index < 0 || index >= nr_engine_step_count(engine))
    return NR_ERR_INVALID_ARGUMENT;
  const nr_plan *p = engine->plan;
  const nr_step *st = &p->steps[index];
  const nr_node *n = st->node >= 0 && p->graph ? &p->graph->nodes[st->node] : NULL;
  info->node = n && n->name ? n->name : "";
  info->op_type = n ? n->op_type : "";
  info->tactic = st->tactic->id;
  info->reference = st->tactic->source && !strcmp(st->tactic->source, "ref");
  return NR_OK;
}

int nr_engine_reference_steps(const nr_engine *engine) {
  int n = 0;
  nr_step_info info;
  for (int k = 0; k < nr_engine_step_count(engine); k++)
    n += !nr_engine_step_info(engine, k, &info) && info.reference;
  return n;
}

const char *nr_engine_route(const nr_engine *engine) {
  return engine && engine->plan && engine->plan->route ? engine->plan->route : "";
}
