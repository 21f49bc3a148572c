/* deconv_patch.c - nr_f32_deconv_patch: a ConvTranspose whose kernel equals its stride
 * and that has no padding (the 2x2 stride-2 upsampling of U-Nets and text detectors),
 * where every input pixel writes its own kh x kw patch of the output and no two patches
 * overlap.
 *
 * Key decision: then the whole layer is one GEMM and a pixel shuffle, with no col2im
 * sums: T[(m, ky, kx), p] = sum_c W[c, (m, ky, kx)] X[c, p] over the input pixels p
 * (A = W^T, packed at build into the engine; B = X as it is), and Y[m, iy * kh + ky,
 * ix * kw + kx] = T[(m, ky, kx), iy * W + ix] + bias[m], the shuffle running in
 * parallel over (m, input row). T lives in the step's scratch. */
#include "kernels/cpu/conv/deconv.h"

#include "util/error.h"
#include "util/threadpool.h"

#include <emmintrin.h>
#include <stdlib.h>
#include <string.h>

#define PATCH_MAX_THREADS 16       /* threads the GEMM's packing scratch is sized for */
#define PATCH_MAX_T (256ull << 20) /* bytes of T at most */

static int64_t rows_t(const deconv_p *p) { return (int64_t)p->m * p->kh * p->kw; }
static int64_t pixels(const deconv_p *p) { return (int64_t)p->h * p->w; }
static uint64_t t_bytes(const deconv_p *p) {
  return ((uint64_t)rows_t(p) * (uint64_t)pixels(p) * 4 + 63) / 64 * 64;
}

static bool is_patch(const deconv_p *p) {
  return p->group == 1 && p->kh == p->sh && p->kw == p->sw && p->dh == 1 && p->dw == 1 &&
         !p->pt && !p->pl && !p->pb && !p->pr && p->oh == p->h * p->sh &&
         p->ow == p->w * p->sw && t_bytes(p) <= PATCH_MAX_T;
}

bool nr_deconv_patch_supports(const nr_tactic_ctx *c) {
  deconv_p p;
  return nr_gemm_ukernel_count() > 0 && nr_deconv_parse(c, &p) && is_patch(&p);
}

nr_status nr_deconv_patch_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  deconv_p p;
  if (!nr_deconv_parse(c, &p) || !is_patch(&p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: the node no longer parses",
                     st->tactic->id);
  const float *w = nr_step_const(c, 1);
  if (!w)
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: W has no data", st->tactic->id);
  int64_t mt = rows_t(&p);
  p.gemm = nr_gemm_default_cfg(mt, pixels(&p), p.c);
  size_t bytes = nr_gemm_packed_a_size(p.gemm, mt, p.c);
  float *pa = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!pa)
    return nr_errorf(c->err, NR_ERR_NOMEM, "%s: no memory to pack W", st->tactic->id);
  nr_gemm_pack_a(p.gemm, mt, p.c, (nr_gemm_operand){w, mt, true, false}, pa);
  nr_status s = nr_plan_add_weights(plan, pa, bytes, &st->packed_offset, c->err);
  free(pa);
  if (s)
    return s;
  st->packed_size = bytes;
  st->scratch = t_bytes(&p) +
                nr_gemm_scratch_size(p.gemm, mt, pixels(&p), p.c, PATCH_MAX_THREADS);
  memcpy(st->params, &p, sizeof p);
  nr_step_absorb(st, 1);
  return NR_OK;
}

typedef struct shuffle_job {
  const deconv_p *p;
  const float *t, *bias;
  float *y; /* image n's output */
} shuffle_job;

/* y[2 i] = t0[i] + b, y[2 i + 1] = t1[i] + b: the kw = 2 interleave, in SSE2 (the
 * x86-64 baseline: no dispatch needed). */
static void interleave2(float *y, const float *t0, const float *t1, float b, int64_t n) {
  __m128 vb = _mm_set1_ps(b);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m128 a = _mm_add_ps(_mm_loadu_ps(t0 + i), vb),
           c = _mm_add_ps(_mm_loadu_ps(t1 + i), vb);
    _mm_storeu_ps(y + 2 * i, _mm_unpacklo_ps(a, c));
    _mm_storeu_ps(y + 2 * i + 4, _mm_unpackhi_ps(a, c));
  }
  for (; i < n; i++)
    y[2 * i] = t0[i] + b, y[2 * i + 1] = t1[i] + b;
}

/* Output rows iy * kh + ky of channel m, for items (m, iy) in [begin, end). */
static void shuffle(void *arg, int64_t begin, int64_t end, int thread) {
  const shuffle_job *j = arg;
  const deconv_p *p = j->p;
  int64_t hw = pixels(p);
  for (int64_t it = begin; it < end; it++) {
    int64_t m = it / p->h, iy = it % p->h;
    float b = j->bias ? j->bias[m] : 0.0f;
    for (int ky = 0; ky < p->kh; ky++) {
      float *y = j->y + (m * p->oh + iy * p->kh + ky) * p->ow;
      const float *t = j->t + ((m * p->kh + ky) * p->kw) * hw + iy * p->w;
      if (p->kw == 2) {
        interleave2(y, t, t + hw, b, p->w);
        continue;
      }
      for (int kx = 0; kx < p->kw; kx++)
        for (int64_t ix = 0; ix < p->w; ix++)
          y[ix * p->kw + kx] = t[kx * hw + ix] + b;
    }
  }
}

nr_status nr_deconv_patch_run(const nr_exec_args *a) {
  const deconv_p *p = (const deconv_p *)(const void *)a->step->params;
  int64_t mt = rows_t(p), hw = pixels(p);
  if (!a->packed || !is_patch(p) || p->gemm.ukernel >= nr_gemm_ukernel_count() ||
      a->step->packed_size != nr_gemm_packed_a_size(p->gemm, mt, p->c) ||
      a->step->scratch <
          t_bytes(p) + nr_gemm_scratch_size(p->gemm, mt, hw, p->c, PATCH_MAX_THREADS))
    return nr_errorf(a->err, NR_ERR_INVALID_MODEL, "%s: bad params", a->step->tactic->id);
  int threads = nr_threadpool_size(a->pool);
  if (a->step->threads > 0 && a->step->threads < threads)
    threads = a->step->threads;
  threads = threads < PATCH_MAX_THREADS ? threads : PATCH_MAX_THREADS;
  float *t = a->scratch;
  void *gs = (char *)a->scratch + t_bytes(p);
  nr_epilogue ep = {0};
  for (int64_t n = 0; n < p->n; n++) {
    const float *x = (const float *)a->in[0] + n * p->c * hw;
    nr_gemm(p->gemm, mt, hw, p->c, 1.0f, (nr_gemm_operand){a->packed, mt, false, true},
            (nr_gemm_operand){x, hw, false, false}, t, hw, &ep, gs, a->pool, threads);
    shuffle_job j = {p, t, p->has_bias ? a->in[2] : NULL,
                     (float *)a->out[0] + n * (int64_t)p->m * p->oh * p->ow};
    nr_parallel_for(a->pool, (int64_t)p->m * p->h, 8, threads, shuffle, &j);
  }
  return NR_OK;
}
