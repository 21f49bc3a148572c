/* quant.c - the calibration table and the activation quantization int8 tactics ask
 * for (see quant.h for the design).
 *
 * The histogram's upper edge is always a power of two just above the largest |x|
 * seen, so merging bins when it grows is exact and the final table does not depend
 * on the order in which calibration inputs arrive. */
#include "plan/compile_knobs.h"
#include "plan/quant.h"
#include "plan/route.h"
#include "util/error.h"
#include "util/sha256.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void nr_calib_destroy(nr_calib *c) {
  if (!c)
    return;
  for (int i = 0; i < c->n; i++)
    free(c->t[i].name);
  free(c->t);
  free(c);
}

void nr_calibration_destroy(nr_calibration *c) { nr_calib_destroy(c); }

const nr_calib_tensor *nr_calib_find(const nr_calib *c, const char *name) {
  for (int i = 0; c && name && i < c->n; i++)
    if (!strcmp(c->t[i].name, name))
      return &c->t[i];
  return NULL;
}

static nr_calib_tensor *entry(nr_calib *c, const char *name, nr_error *err) {
  nr_calib_tensor *t = (nr_calib_tensor *)nr_calib_find(c, name);
  if (t)
    return t;
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    nr_calib_tensor *nt = realloc(c->t, sizeof *nt * (size_t)cap);
    if (!nt) {
      nr_errorf(err, NR_ERR_NOMEM, "calibration: out of memory");
      return NULL;
    }
    c->t = nt;
    c->cap = cap;
  }
  t = &c->t[c->n];
  memset(t, 0, sizeof *t);
  if (!(t->name = strdup(name))) {
    nr_errorf(err, NR_ERR_NOMEM, "calibration: out of memory");
    return NULL;
  }
  t->min = INFINITY;
  t->max = -INFINITY;
  c->n++;
  return t;
}

/* Halves the resolution: bin j takes bins 2j and 2j+1; the edge doubles. */
static void widen(nr_calib_tensor *t) {
  for (int j = 0; j < NR_CALIB_BINS / 2; j++)
    t->hist[j] = t->hist[2 * j] + t->hist[2 * j + 1];
  memset(t->hist + NR_CALIB_BINS / 2, 0, sizeof(t->hist[0]) * NR_CALIB_BINS / 2);
  t->hist_max *= 2;
}

nr_status nr_calib_observe(nr_calib *c, const char *name, const float *x, size_t n,
                           nr_error *err) {
  nr_calib_tensor *t = entry(c, name, err);
  if (!t)
    return err ? err->status : NR_ERR_NOMEM;
  float lo = t->min, hi = t->max, amax = 0;
  for (size_t i = 0; i < n; i++) {
    float v = x[i];
    if (!isfinite(v))
      return nr_errorf(err, NR_ERR_RUNTIME, "calibration: tensor '%s' holds %s at "
                       "element %zu", name, isnan(v) ? "NaN" : "Inf", i);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    amax = fabsf(v) > amax ? fabsf(v) : amax;
  }
  t->min = lo;
  t->max = hi;
  if (amax == 0)
    return NR_OK; /* zeros say nothing about the range; min/max already have them */
  if (t->hist_max == 0) /* smallest power of two strictly above amax */
    t->hist_max = ldexpf(1.0f, ilogbf(amax) + 1);
  while (amax >= t->hist_max)
    widen(t);
  float per_bin = NR_CALIB_BINS / t->hist_max;
  for (size_t i = 0; i < n; i++) {
    int b = (int)(fabsf(x[i]) * per_bin);
    t->hist[b < NR_CALIB_BINS ? b : NR_CALIB_BINS - 1]++;
  }
  return NR_OK;
}

/* ---- methods ---------------------------------------------------------------------- */

static double hist_total(const nr_calib_tensor *t) {
  double s = 0;
  for (int i = 0; i < NR_CALIB_BINS; i++)
    s += (double)t->hist[i];
  return s;
}

/* Upper edge of the bin where the cumulative count reaches fraction q of the total. */
static float percentile_edge(const nr_calib_tensor *t, double q) {
  double total = hist_total(t), acc = 0;
  for (int i = 0; i < NR_CALIB_BINS; i++) {
    acc += (double)t->hist[i];
    if (acc >= q * total)
      return (float)(i + 1) * t->hist_max / NR_CALIB_BINS;
  }
  return t->hist_max;
}

/* KL(P || Q) of the first n bins of h clipped (the tail folded into bin n-1) against
 * the same bins quantized to `levels` levels and expanded back over their non-empty
 * bins. */
static double clipped_kl(const double *h, int n, int levels, double *p, double *q) {
  double tail = 0;
  for (int i = n; i < NR_CALIB_BINS; i++)
    tail += h[i];
  for (int i = 0; i < n; i++)
    p[i] = h[i];
  p[n - 1] += tail;
  for (int l = 0; l < levels; l++) {
    int a = (int)((int64_t)l * n / levels), b = (int)((int64_t)(l + 1) * n / levels);
    double sum = 0;
    int nonzero = 0;
    for (int i = a; i < b; i++) {
      sum += h[i];
      nonzero += h[i] != 0;
    }
    for (int i = a; i < b; i++)
      q[i] = h[i] != 0 && nonzero ? sum / nonzero : 0;
  }
  double sp = 0, sq = 0, kl = 0;
  for (int i = 0; i < n; i++) {
    sp += p[i];
    sq += q[i];
  }
  if (sp <= 0 || sq <= 0)
    return INFINITY;
  for (int i = 0; i < n; i++) {
    if (p[i] <= 0)
      continue;
    double pi = p[i] / sp, qi = q[i] / sq;
    kl += pi * log(pi / (qi > 0 ? qi : 1e-12 / sq));
  }
  return kl;
}

/* The clipping threshold on |x| with the least KL divergence (TensorRT's entropy
 * calibration), searched over bin edges from `levels` bins up. The first bin is left
 * out: after a ReLU it holds half of all values, exact zeros the grid represents
 * exactly, and spreading that spike over a level's bins would make the divergence
 * favour the narrowest range (one bin per level) whatever the tail holds. */
static float entropy_edge(const nr_calib_tensor *t, int levels) {
  double *p = malloc(sizeof(double) * NR_CALIB_BINS), *q = malloc(sizeof(double) * NR_CALIB_BINS);
  double *h = malloc(sizeof(double) * NR_CALIB_BINS);
  int last = 0;
  for (int i = 0; i < NR_CALIB_BINS; i++) {
    if (t->hist[i])
      last = i + 1;
    if (h)
      h[i] = i ? (double)t->hist[i] : 0;
  }
  float edge = t->hist_max;
  if (p && q && h && last > levels) {
    double best = INFINITY;
    int best_n = last;
    for (int n = levels; n <= last; n += 4) {
      double kl = clipped_kl(h, n, levels, p, q);
      if (kl < best) {
        best = kl;
        best_n = n;
      }
    }
    edge = (float)best_n * t->hist_max / NR_CALIB_BINS;
  } else if (last) {
    edge = (float)last * t->hist_max / NR_CALIB_BINS;
  }
  free(p);
  free(q);
  free(h);
  return edge;
}

void nr_calib_range(const nr_calib_tensor *t, nr_calib_method m, float *lo, float *hi) {
  float a = t->min < 0 ? t->min : 0, b = t->max > 0 ? t->max : 0;
  if (!(t->min <= t->max)) /* never observed */
    a = b = 0;
  float edge = INFINITY;
  if (m == NR_CALIB_PERCENTILE && t->hist_max > 0)
    edge = percentile_edge(t, 0.9999);
  else if (m == NR_CALIB_ENTROPY && t->hist_max > 0)
    edge = entropy_edge(t, a < 0 ? 128 : 256);
  *lo = a < -edge ? -edge : a;
  *hi = b > edge ? edge : b;
}

nr_qparams nr_qparams_asym(float lo, float hi, int qmax) {
  lo = lo < 0 ? lo : 0;
  hi = hi > 0 ? hi : 0;
  nr_qparams q = {1.0f, 0};
  if (hi - lo <= 0)
    return q; /* a constant-zero tensor: any scale represents it exactly */
  q.scale = (hi - lo) / (float)qmax;
  long zp = lroundf(-lo / q.scale);
  q.zero_point = (int32_t)(zp < 0 ? 0 : zp > qmax ? qmax : zp);
  return q;
}

/* ---- the tactic's question --------------------------------------------------------- */

static const char *const method_names[] = {"minmax", "percentile", "entropy"};

/* The step writing slot s, or NULL (slot uses are not planned yet at prepare time). */
static const nr_step *producer(const nr_plan *p, int s) {
  for (int k = 0; k < p->n_steps; k++)
    for (int o = 0; o < p->steps[k].n_out; o++)
      if (p->steps[k].out[o] == s)
        return &p->steps[k];
  return NULL;
}

/* The entry of a slot that a layout reorder copies into a calibrated one: when a
 * graph output is written by a step in another layout, the layout pass has the step
 * write a renamed copy ("X.nhwc") and a reorder produce X itself from it. */
static const nr_calib_tensor *reordered_into(const nr_tactic_ctx *c, int s) {
  const nr_plan *p = c->plan;
  for (int k = 0; k < p->n_steps; k++) {
    const nr_step *st = &p->steps[k];
    if (st->node < 0 && st->n_in >= 1 && st->in[0] == s && st->n_out >= 1 &&
        st->out[0] >= 0) {
      const nr_calib_tensor *t = nr_calib_find(c->calib, p->slots[st->out[0]].name);
      if (t)
        return t;
    }
  }
  return NULL;
}

/* The calibrated tensor behind slot s: itself, what layout reorders copied into it,
 * or what it is reordered into. */
static const nr_calib_tensor *slot_entry(const nr_tactic_ctx *c, int s) {
  for (int hops = 0; s >= 0 && hops < 4; hops++) {
    const nr_calib_tensor *t = nr_calib_find(c->calib, c->plan->slots[s].name);
    if (!t)
      t = reordered_into(c, s);
    const nr_step *prod = t ? NULL : producer(c->plan, s);
    if (t || !prod || prod->node >= 0 || prod->n_in < 1)
      return t;
    s = prod->in[0];
  }
  return NULL;
}

nr_status nr_quant_act_params(const nr_tactic_ctx *c, int i, int qmax, nr_qparams *q) {
  char node[256];
  const nr_node *n = c->node;
  const nr_attr *as = n && i == 0 ? nr_node_attr(n, "nr_x_scale") : NULL;
  const nr_attr *az = n && i == 0 ? nr_node_attr(n, "nr_x_zero_point") : NULL;
  if (as && az && as->type == NR_ATTR_FLOAT && az->type == NR_ATTR_INT) {
    /* A pre-quantized model's grid, rescaled to this kernel's range when narrower. */
    float lo = -as->f * (float)az->i, hi = as->f * (float)(255 - az->i);
    *q = qmax == 255 ? (nr_qparams){as->f, (int32_t)az->i} : nr_qparams_asym(lo, hi, qmax);
    return NR_OK;
  }
  const nr_slot *s = nr_step_in(c, i);
  if (!c->calib || !s)
    return nr_errorf(c->err, NR_ERR_INVALID_ARGUMENT, "%s: precision int8 needs "
                     "calibration data (nnroute build --calibration DIR; nnroute tune "
                     "calibrates on its reference inputs)",
                     n ? nr_node_describe(n, node, sizeof node) : "step");
  const nr_calib_tensor *t = slot_entry(c, c->step->in[i]);
  if (!t)
    return nr_errorf(c->err, NR_ERR_INVALID_ARGUMENT, "%s: the calibration table has no "
                     "entry for input tensor '%s' (was it collected on this model?)",
                     n ? nr_node_describe(n, node, sizeof node) : "step", s->name);
  const char *mv = nr_route_get(c->route, NR_KNOB_QUANT_CALIBRATION, NULL);
  nr_calib_method m = NR_CALIB_PERCENTILE; /* the knob's default */
  for (int k = 0; mv && k < 3; k++)
    if (!strcmp(mv, method_names[k]))
      m = (nr_calib_method)k;
  float lo, hi;
  nr_calib_range(t, m, &lo, &hi);
  *q = nr_qparams_asym(lo, hi, qmax);
  return NR_OK;
}

/* ---- bytes ------------------------------------------------------------------------- */

/* Layout (little-endian): "NRCALIB1", u32 tensors, u32 samples, then per tensor:
 * u32 name length, name, f32 min, f32 max, f32 hist_max, u32 non-empty bins, and per
 * non-empty bin u32 index + u64 count. */
typedef struct wbuf {
  uint8_t *p;
  size_t n, cap;
  bool oom;
} wbuf;

static void put(wbuf *b, const void *d, size_t n) {
  if (b->oom)
    return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n)
      cap *= 2;
    uint8_t *np = realloc(b->p, cap);
    if (!np) {
      b->oom = true;
      return;
    }
    b->p = np;
    b->cap = cap;
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}

static void put_u32(wbuf *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  put(b, x, 4);
}

static void put_u64(wbuf *b, uint64_t v) {
  put_u32(b, (uint32_t)v);
  put_u32(b, (uint32_t)(v >> 32));
}

static void put_f32(wbuf *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  put_u32(b, u);
}

nr_status nr_calib_serialize(const nr_calib *c, uint8_t **out, size_t *len, nr_error *err) {
  wbuf b = {0};
  put(&b, "NRCALIB1", 8);
  put_u32(&b, (uint32_t)c->n);
  put_u32(&b, (uint32_t)c->samples);
  for (int i = 0; i < c->n; i++) {
    const nr_calib_tensor *t = &c->t[i];
    uint32_t nl = (uint32_t)strlen(t->name), nz = 0;
    put_u32(&b, nl);
    put(&b, t->name, nl);
    put_f32(&b, t->min);
    put_f32(&b, t->max);
    put_f32(&b, t->hist_max);
    for (int k = 0; k < NR_CALIB_BINS; k++)
      nz += t->hist[k] != 0;
    put_u32(&b, nz);
    for (int k = 0; k < NR_CALIB_BINS; k++)
      if (t->hist[k]) {
        put_u32(&b, (uint32_t)k);
        put_u64(&b, t->hist[k]);
      }
  }
  if (b.oom) {
    free(b.p);
    return nr_errorf(err, NR_ERR_NOMEM, "calibration: out of memory");
  }
  *out = b.p;
  *len = b.n;
  return NR_OK;
}

typedef struct rbuf {
  const uint8_t *p;
  size_t n, at;
} rbuf;

static bool get(rbuf *b, void *d, size_t n) {
  if (b->n - b->at < n)
    return false;
  memcpy(d, b->p + b->at, n);
  b->at += n;
  return true;
}

static bool get_u32(rbuf *b, uint32_t *v) {
  uint8_t x[4];
  if (!get(b, x, 4))
    return false;
  *v = x[0] | (uint32_t)x[1] << 8 | (uint32_t)x[2] << 16 | (uint32_t)x[3] << 24;
  return true;
}

static bool get_u64(rbuf *b, uint64_t *v) {
  uint32_t lo, hi;
  if (!get_u32(b, &lo) || !get_u32(b, &hi))
    return false;
  *v = lo | (uint64_t)hi << 32;
  return true;
}

static bool get_f32(rbuf *b, float *f) {
  uint32_t u;
  if (!get_u32(b, &u))
    return false;
  memcpy(f, &u, 4);
  return true;
}

/* One tensor record; false with a message on the first field that does not fit. */
static bool read_tensor(rbuf *b, nr_calib *c, nr_error *err) {
  uint32_t nl, nz;
  size_t at = b->at;
  char name[4096];
  if (!get_u32(b, &nl) || nl == 0 || nl >= sizeof name || !get(b, name, nl))
    return !nr_errorf(err, NR_ERR_INVALID_MODEL, "calibration table: bad tensor name at "
                      "offset %zu", at);
  name[nl] = 0;
  if (nr_calib_find(c, name))
    return !nr_errorf(err, NR_ERR_INVALID_MODEL, "calibration table: tensor '%s' twice",
                      name);
  nr_calib_tensor *t = entry(c, name, err);
  if (!t)
    return false;
  if (!get_f32(b, &t->min) || !get_f32(b, &t->max) || !get_f32(b, &t->hist_max) ||
      !get_u32(b, &nz) || nz > NR_CALIB_BINS || !(t->hist_max >= 0) ||
      !isfinite(t->hist_max) || (t->min <= t->max && (!isfinite(t->min) || !isfinite(t->max))))
    return !nr_errorf(err, NR_ERR_INVALID_MODEL, "calibration table: tensor '%s': bad "
                      "range fields near offset %zu", name, b->at);
  for (uint32_t k = 0; k < nz; k++) {
    uint32_t idx;
    uint64_t cnt;
    if (!get_u32(b, &idx) || !get_u64(b, &cnt) || idx >= NR_CALIB_BINS)
      return !nr_errorf(err, NR_ERR_INVALID_MODEL, "calibration table: tensor '%s': bad "
                        "histogram bin near offset %zu", name, b->at);
    t->hist[idx] = cnt;
  }
  return true;
}

nr_status nr_calib_deserialize(const uint8_t *data, size_t len, nr_calib **out,
                               nr_error *err) {
  rbuf b = {data, len, 0};
  char magic[8];
  uint32_t n, samples;
  *out = NULL;
  if (!get(&b, magic, 8) || memcmp(magic, "NRCALIB1", 8) || !get_u32(&b, &n) ||
      !get_u32(&b, &samples))
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "calibration table: not an nnroute "
                     "calibration table (bad header)");
  if (n > len / 24)
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "calibration table: %u tensors cannot fit "
                     "in %zu bytes", n, len);
  nr_calib *c = calloc(1, sizeof *c);
  if (!c)
    return nr_errorf(err, NR_ERR_NOMEM, "calibration: out of memory");
  c->samples = (int)samples;
  for (uint32_t i = 0; i < n; i++)
    if (!read_tensor(&b, c, err)) {
      nr_calib_destroy(c);
      return err ? err->status : NR_ERR_INVALID_MODEL;
    }
  if (b.at != len) {
    nr_calib_destroy(c);
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "calibration table: %zu trailing bytes",
                     len - b.at);
  }
  *out = c;
  return NR_OK;
}

nr_status nr_calib_digest(const nr_calib *c, char hex[65], nr_error *err) {
  uint8_t *bytes, sum[32];
  size_t len;
  nr_status st = nr_calib_serialize(c, &bytes, &len, err);
  if (st)
    return st;
  nr_sha256(bytes, len, sum);
  nr_hex(sum, 32, hex);
  free(bytes);
  return NR_OK;
}
