/* conv_winograd.c - Winograd F(2,3) and F(4,3) for 3x3 stride-1 undilated group-1
 * convolutions (nr_f32_conv_winograd_f23, nr_f32_conv_winograd_f43; PLAIN).
 *
 * Per image: the input transform writes V[xi][C][T] (T tiles, alpha = tile + 2,
 * xi < alpha^2), one GEMM per tile position computes M[xi] = U[xi] (M x C, transformed
 * and packed at build time) * V[xi], and the output transform folds M back into
 * tile x tile outputs, then the epilogue adds bias and residual and applies the
 * activation per output plane. F(4,3) does 36 products for 16 outputs instead of 144
 * multiplies, at the price of larger transform constants (more rounding); the
 * conv.algo knob carries the accuracy flag for both. The epilogue runs per output
 * plane in the output transform, or (conv.epilogue=separate) in a pass of its own. */
#include "kernels/cpu/conv/conv_internal.h"

#include <string.h>

static const float bt23[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const float bt43[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0},
                                 {0, 4, -4, -1, 1, 0}, {0, -2, -1, 2, 1, 0},
                                 {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const float at23[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
static const float at43[4][6] = {{1, 1, 1, 1, 1, 0},
                                 {0, 1, -1, 2, -2, 0},
                                 {0, 1, 1, 4, 4, 0},
                                 {0, 1, -1, 8, -8, 1}};

typedef struct wino_job {
  const conv_p *p;
  int tile, alpha;
  int64_t th, tw, t;
  const float *x, *bias, *res;
  float *v, *mb, *y;
} wino_job;

/* out = L d L^T for an r x a matrix L and an a x a tile d. */
static void sandwich(const float *L, int r, int a, const float *d, float *out) {
  float tmp[6][6];
  for (int i = 0; i < r; i++)
    for (int j = 0; j < a; j++) {
      float s = 0;
      for (int k = 0; k < a; k++)
        s += L[i * a + k] * d[k * a + j];
      tmp[i][j] = s;
    }
  for (int i = 0; i < r; i++)
    for (int j = 0; j < r; j++) {
      float s = 0;
      for (int k = 0; k < a; k++)
        s += tmp[i][k] * L[j * a + k];
      out[i * r + j] = s;
    }
}

static void input_task(void *arg, int64_t begin, int64_t end, int thread) {
  const wino_job *j = arg;
  const conv_p *p = j->p;
  int a = j->alpha;
  const float *bt = a == 4 ? &bt23[0][0] : &bt43[0][0];
  for (int64_t c = begin; c < end; c++) {
    const float *x = j->x + c * (int64_t)p->h * p->w;
    for (int64_t t = 0; t < j->t; t++) {
      int64_t ih0 = (t / j->tw) * j->tile - p->pt, iw0 = (t % j->tw) * j->tile - p->pl;
      float d[36], o[36];
      for (int r = 0; r < a; r++)
        for (int s = 0; s < a; s++) {
          int64_t ih = ih0 + r, iw = iw0 + s;
          d[r * a + s] = (ih >= 0 && ih < p->h && iw >= 0 && iw < p->w) ? x[ih * p->w + iw]
                                                                         : 0.0f;
        }
      sandwich(bt, a, a, d, o);
      for (int xi = 0; xi < a * a; xi++)
        j->v[((int64_t)xi * p->c + c) * j->t + t] = o[xi];
    }
  }
}

static void output_task(void *arg, int64_t begin, int64_t end, int thread) {
  const wino_job *j = arg;
  const conv_p *p = j->p;
  int a = j->alpha, r = j->tile;
  const float *at = a == 4 ? &at23[0][0] : &at43[0][0];
  int64_t ohw = (int64_t)p->oh * p->ow;
  for (int64_t m = begin; m < end; m++) {
    float *y = j->y + m * ohw;
    for (int64_t t = 0; t < j->t; t++) {
      float d[36], o[16];
      for (int xi = 0; xi < a * a; xi++)
        d[xi] = j->mb[((int64_t)xi * p->m + m) * j->t + t];
      sandwich(at, r, a, d, o);
      int64_t oh0 = (t / j->tw) * r, ow0 = (t % j->tw) * r;
      for (int u = 0; u < r && oh0 + u < p->oh; u++)
        for (int v = 0; v < r && ow0 + v < p->ow; v++)
          y[(oh0 + u) * p->ow + ow0 + v] = o[u * r + v];
    }
    if (!(p->opts & CONV_OPT_SPLIT_EPI))
      nr_conv_epilogue(y, j->res ? j->res + m * ohw : NULL, ohw,
                       j->bias ? j->bias[m] : 0.0f, p);
  }
}

nr_status nr_conv_winograd_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  wino_job j = {&q, (int)q.extra, (int)q.extra + 2};
  j.th = (q.oh + j.tile - 1) / j.tile, j.tw = (q.ow + j.tile - 1) / j.tile;
  j.t = j.th * j.tw;
  int64_t aa = (int64_t)j.alpha * j.alpha;
  char *s = a->scratch;
  const char *packed = nr_conv_packed_w(a, &q, CONV_PACK_WINOGRAD, &s);
  j.v = (float *)s;
  j.mb = j.v + aa * q.c * j.t;
  void *gs = s + nr_conv_align64(sizeof(float) * (size_t)(aa * j.t * (q.c + q.m)));
  size_t sa = nr_conv_align64(nr_gemm_packed_a_size(q.gemm, q.m, q.c));
  int threads = nr_conv_threads(a);
  int64_t hw = (int64_t)q.h * q.w, ohw = (int64_t)q.oh * q.ow;
  j.bias = q.has_bias ? a->in[2] : NULL;
  nr_epilogue none = {0};
  for (int64_t n = 0; n < q.n; n++) {
    j.x = (const float *)a->in[0] + n * q.c * hw;
    j.y = (float *)a->out[0] + n * q.m * ohw;
    j.res = res ? res + n * q.m * ohw : NULL;
    nr_parallel_for(a->pool, q.c, 1, threads, input_task, &j);
    for (int64_t xi = 0; xi < aa; xi++) {
      nr_gemm_operand A = {(const float *)(packed + sa * xi), q.c, false, true};
      nr_gemm_operand B = {j.v + xi * q.c * j.t, j.t, false, false};
      nr_gemm(q.gemm, q.m, j.t, q.c, 1.0f, A, B, j.mb + xi * q.m * j.t, j.t, &none, gs,
              a->pool, threads);
    }
    nr_parallel_for(a->pool, q.m, 1, threads, output_task, &j);
  }
  if (q.opts & CONV_OPT_SPLIT_EPI)
    nr_conv_epilogue_pass(a, NR_LAYOUT_PLAIN, &q, j.bias, res, threads);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
