/* gemm_common.c - the decisions the three GEMM drivers share (contract and the table
 * of what is shared: gemm_common.h). Key decision: a family differs from another
 * only in the numbers of its nr_gemm_family record, never in code here, so one rule
 * changed here changes all three (the thresholds come from gemm.c's measurements,
 * and lpgemm.c / qgemm.c say why their records differ). */
#include "kernels/cpu/gemm/gemm_common.h"
#include "util/threadpool.h"

#include <string.h>

bool nr_gemm_family_has(const nr_gemm_family *f, int i) {
  return i >= 0 && i < f->count;
}

int nr_gemm_family_find(const nr_gemm_family *f, const char *name) {
  for (int i = 0; name && i < f->count; i++)
    if (!strcmp(f->kernels[i].name, name))
      return i;
  return -1;
}

nr_gemm_blocking nr_gemm_blocking_get(const nr_gemm_family *f, nr_gemm_cfg cfg) {
  int uk = nr_gemm_family_has(f, cfg.ukernel) ? cfg.ukernel : f->fallback;
  const nr_gemm_kdesc *d = &f->kernels[uk];
  nr_gemm_blocking b = {uk, d->mr, d->nr, d->prefer, cfg.mc, cfg.kc, cfg.nc};
  b.mc = b.mc < b.mr ? b.mr : b.mc / b.mr * b.mr;
  b.nc = b.nc < b.nr ? b.nr : b.nc / b.nr * b.nr;
  b.kc = b.kc < f->kc_unit ? 256 : b.kc / f->kc_unit * f->kc_unit;
  return b;
}

uint16_t nr_gemm_even_kc(int64_t k, int64_t max, int quantum) {
  if (k <= max)
    return (uint16_t)(k < quantum ? quantum : nr_gemm_round_up(k, quantum));
  int64_t blocks = (k + max - 1) / max;
  return (uint16_t)nr_gemm_round_up((k + blocks - 1) / blocks, quantum);
}

int nr_gemm_pick_dim(const nr_gemm_blocking *bl, int64_t m, int64_t n, int threads) {
  int64_t mp = (m + bl->mr - 1) / bl->mr, np = (n + bl->nr - 1) / bl->nr;
  if (bl->prefer == NR_GEMM_DIM_M)
    return mp >= 2 * threads || mp * bl->mr >= np * bl->nr ? NR_GEMM_DIM_M : NR_GEMM_DIM_N;
  return np >= 2 * threads || np * bl->nr >= mp * bl->mr ? NR_GEMM_DIM_N : NR_GEMM_DIM_M;
}

int nr_gemm_parts_for(const nr_gemm_family *f, const nr_gemm_blocking *bl, int split,
                      int64_t m, int64_t n, int64_t k, int threads) {
  if (threads <= 1 || m <= 0 || n <= 0 || k <= 0)
    return 1;
  if (m <= f->small_m ? n * k < f->min_b_values : m * n * k < f->min_macs)
    return 1;
  if (split == NR_GEMM_DIM_AUTO)
    split = nr_gemm_pick_dim(bl, m, n, threads);
  int64_t panels = split == NR_GEMM_DIM_N ? (n + bl->nr - 1) / bl->nr
                                          : (m + bl->mr - 1) / bl->mr;
  return panels < threads ? (int)panels : threads;
}

int nr_gemm_call_threads(nr_threadpool *pool, int threads) {
  int t = nr_threads_or_online(threads), ps = nr_threadpool_size(pool);
  return t > ps ? ps : t;
}

nr_gemm_plan nr_gemm_plan_make(const nr_gemm_family *f, nr_gemm_cfg cfg, int split,
                               int64_t m, int64_t n, int64_t k, int threads) {
  nr_gemm_plan p = {.bl = nr_gemm_blocking_get(f, cfg), .m = m, .n = n};
  p.split = split == NR_GEMM_DIM_AUTO ? nr_gemm_pick_dim(&p.bl, m, n, threads) : split;
  p.parts = nr_gemm_parts_for(f, &p.bl, p.split, m, n, k, threads);
  if (p.parts < 1)
    p.parts = 1;
  return p;
}

void nr_gemm_plan_range(const nr_gemm_plan *p, int64_t part, int64_t *r0, int64_t *r1,
                        int64_t *c0, int64_t *c1) {
  *r0 = 0, *r1 = p->m, *c0 = 0, *c1 = p->n;
  if (p->split == NR_GEMM_DIM_N) {
    int64_t panels = (p->n + p->bl.nr - 1) / p->bl.nr;
    *c0 = panels * part / p->parts * p->bl.nr;
    *c1 = nr_gemm_min64(panels * (part + 1) / p->parts * p->bl.nr, p->n);
  } else {
    int64_t panels = (p->m + p->bl.mr - 1) / p->bl.mr;
    *r0 = panels * part / p->parts * p->bl.mr;
    *r1 = nr_gemm_min64(panels * (part + 1) / p->parts * p->bl.mr, p->m);
  }
}

void nr_gemm_plan_run(const nr_gemm_plan *p, nr_threadpool *pool, bool any_thread,
                      nr_task_fn fn, void *arg) {
  if (p->parts <= 1)
    fn(arg, 0, 1, 0);
  else if (any_thread)
    nr_parallel_for(pool, p->parts, 1, p->parts, fn, arg);
  else
    nr_parallel_parts(pool, p->parts, fn, arg);
}

int64_t nr_gemm_packed_elems(const nr_gemm_family *f, int width, int64_t extent,
                             int64_t k) {
  return nr_gemm_round_up(extent, width) * nr_gemm_round_up(k, f->kc_unit);
}

size_t nr_gemm_scratch_total(size_t per_thread, int threads) {
  return per_thread * (size_t)nr_threads_or_online(threads) + 64;
}
