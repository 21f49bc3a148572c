/* gemm_openblas.c - the openblas_sgemm tactic: cblas_sgemm per product, then the
 * epilogue (bias, residual, activation) as a separate pass over C. It packs nothing
 * at build time (OpenBLAS packs internally on every call) and uses OpenBLAS's own
 * threads, as many as the step may use (extlib.h), so it is the baseline the nnroute
 * kernels are measured against. */
#include "kernels/cpu/extlib.h"
#include "kernels/cpu/gemm/gemm_tactic.h"

#include <cblas.h>
#include <string.h>

nr_status gemm_openblas_run(const nr_exec_args *x) {
  nr_gemm_step_params p;
  memcpy(&p, x->step->params, sizeof p);
  if (p.m <= 0 || p.n <= 0)
    return NR_OK;
  nr_extlib_blas_threads(nr_extlib_threads(x));
  bool ta = p.flags & GEMM_F_TA, tb = p.flags & GEMM_F_TB;
  for (int64_t i = 0; i < p.batch; i++) {
    gemm_product pr;
    nr_epilogue ep;
    gemm_product_get(x, &p, i, &pr);
    gemm_epilogue_get(x, &p, pr.r, &ep);
    if (p.k > 0)
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                  tb ? CblasTrans : CblasNoTrans, (blasint)p.m, (blasint)p.n, (blasint)p.k,
                  p.alpha, pr.a, (blasint)(ta ? p.m : p.k), pr.b,
                  (blasint)(tb ? p.k : p.n), 0.0f, pr.c, (blasint)p.n);
    else
      memset(pr.c, 0, sizeof(float) * (size_t)(p.m * p.n));
    if (ep.bias || ep.residual || ep.act != NR_ACT_NONE)
      nr_gemm_epilogue_apply(&ep, 0, 0, p.m, p.n, pr.c, p.n);
  }
  return NR_OK;
}
