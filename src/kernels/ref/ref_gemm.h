/* ref_gemm.h - the one plain-C matrix multiply shared by the reference Conv,
 * ConvTranspose, Gemm and MatMul kernels.
 *
 * C[m x n] = alpha * op(A) * op(B) + beta * C, all row-major with leading dimensions
 * (elements between rows). op(X) is X or its transpose. The kernel is cache-blocked
 * and its innermost loop runs along a contiguous row of B and C, so the compiler
 * vectorizes it without intrinsics; it is the reference, not the fast path. Integer
 * types go through nr_ref_igemm, which accumulates exactly in int64. */
#ifndef NR_KERNELS_REF_GEMM_H
#define NR_KERNELS_REF_GEMM_H

#include "ir/ir.h"

#include <stdbool.h>
#include <stdint.h>

/* Fails only with NR_ERR_NOMEM (a packing buffer could not be allocated). When beta
 * is 0, C is overwritten without being read, so it may hold garbage. */
nr_status nr_ref_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, int64_t lda, const float *b,
                       int64_t ldb, float beta, float *c, int64_t ldc);
nr_status nr_ref_dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                       double alpha, const double *a, int64_t lda, const double *b,
                       int64_t ldb, double beta, double *c, int64_t ldc);

/* C[m x n] += op(A) * op(B) in int64 (wrapping like two's complement would). */
void nr_ref_igemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  const int64_t *a, int64_t lda, const int64_t *b, int64_t ldb,
                  int64_t *c, int64_t ldc);

/* Operand staging for GEMM callers: returns v's elements as want (NR_DTYPE_FLOAT or
 * NR_DTYPE_DOUBLE): v's own data when it already has that type (*owned = false), else
 * a malloc'ed converted copy (*owned = true). NULL on allocation failure. */
void *nr_ref_stage(const nr_value *v, nr_dtype want, bool *owned);
/* Stores count elements of src (float or double, as from says) into dst's data. */
void nr_ref_unstage(nr_value *dst, const void *src, nr_dtype from, int64_t count);

#endif
