/* ref_gemm.c - blocked plain-C GEMM for float, double and int64 (see ref_gemm.h).
 *
 * Loop order: blocks of NC columns, then blocks of KC depth; op(B)'s KC x NC panel is
 * packed contiguous (scaled by alpha) unless B is already usable as is; then four rows
 * of C at a time take rank-1 updates c_r[j] += a_r * b_p[j] along the panel. The four
 * C rows (NC elements each) stay in L1 and the B panel in L2, and the j loop is
 * contiguous and restrict-qualified so that gcc vectorizes it. The float and double
 * versions are one body instantiated twice by a macro, the only way C offers to keep
 * them from drifting apart. */
#include "kernels/ref/ref_gemm.h"

#include "kernels/ref/ref_util.h"

#include <stdlib.h>
#include <string.h>

enum { GEMM_NC = 512, GEMM_KC = 128 };

#define NR_DEFINE_GEMM(NAME, T)                                                          \
  /* C rows r0..r3 += A block (packed [kc][4]) * panel (kc x nc, row stride ldp). */     \
  static void NAME##_rows4(int64_t kc, int64_t nc, const T *ap, const T *bp,             \
                           int64_t ldp, T *restrict c0, T *restrict c1, T *restrict c2,  \
                           T *restrict c3) {                                             \
    for (int64_t p = 0; p < kc; p++) {                                                   \
      const T *restrict b = bp + p * ldp;                                                \
      T x0 = ap[4 * p], x1 = ap[4 * p + 1], x2 = ap[4 * p + 2], x3 = ap[4 * p + 3];      \
      for (int64_t j = 0; j < nc; j++) {                                                 \
        T bj = b[j];                                                                     \
        c0[j] += x0 * bj;                                                                \
        c1[j] += x1 * bj;                                                                \
        c2[j] += x2 * bj;                                                                \
        c3[j] += x3 * bj;                                                                \
      }                                                                                  \
    }                                                                                    \
  }                                                                                      \
                                                                                         \
  static void NAME##_row1(int64_t kc, int64_t nc, const T *ap, const T *bp, int64_t ldp, \
                          T *restrict c0) {                                              \
    for (int64_t p = 0; p < kc; p++) {                                                   \
      const T *restrict b = bp + p * ldp;                                                \
      T x0 = ap[p];                                                                      \
      for (int64_t j = 0; j < nc; j++)                                                   \
        c0[j] += x0 * b[j];                                                              \
    }                                                                                    \
  }                                                                                      \
                                                                                         \
  /* Packs alpha * op(B)[p0 .. p0+kc, j0 .. j0+nc] into dst (row stride nc). */          \
  static void NAME##_pack_b(bool tb, const T *b, int64_t ldb, int64_t p0, int64_t j0,    \
                            int64_t kc, int64_t nc, T alpha, T *dst) {                   \
    for (int64_t p = 0; p < kc; p++)                                                     \
      for (int64_t j = 0; j < nc; j++) {                                                 \
        T v = tb ? b[(j0 + j) * ldb + p0 + p] : b[(p0 + p) * ldb + j0 + j];              \
        dst[p * nc + j] = alpha * v;                                                     \
      }                                                                                  \
  }                                                                                      \
                                                                                         \
  /* Multiplies rows i0.. of op(A)'s depth block [p0, p0+kc) by the panel. */            \
  static void NAME##_block(bool ta, int64_t m, int64_t kc, int64_t nc, const T *a,       \
                           int64_t lda, int64_t p0, const T *bp, int64_t ldp, T *c,      \
                           int64_t ldc, T *apack) {                                      \
    int64_t i = 0;                                                                       \
    for (; i + 4 <= m; i += 4) {                                                         \
      for (int64_t p = 0; p < kc; p++)                                                   \
        for (int r = 0; r < 4; r++)                                                      \
          apack[4 * p + r] = ta ? a[(p0 + p) * lda + i + r] : a[(i + r) * lda + p0 + p]; \
      NAME##_rows4(kc, nc, apack, bp, ldp, c + i * ldc, c + (i + 1) * ldc,               \
                   c + (i + 2) * ldc, c + (i + 3) * ldc);                                \
    }                                                                                    \
    for (; i < m; i++) {                                                                 \
      for (int64_t p = 0; p < kc; p++)                                                   \
        apack[p] = ta ? a[(p0 + p) * lda + i] : a[i * lda + p0 + p];                     \
      NAME##_row1(kc, nc, apack, bp, ldp, c + i * ldc);                                  \
    }                                                                                    \
  }                                                                                      \
                                                                                         \
  static void NAME##_scale_c(int64_t m, int64_t n, T beta, T *c, int64_t ldc) {          \
    for (int64_t i = 0; i < m; i++)                                                      \
      for (int64_t j = 0; j < n; j++)                                                    \
        c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];                          \
  }                                                                                      \
                                                                                         \
  nr_status NAME(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T *a, \
                 int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {      \
    if (beta != 1)                                                                       \
      NAME##_scale_c(m, n, beta, c, ldc);                                                \
    if (m <= 0 || n <= 0 || k <= 0)                                                      \
      return NR_OK;                                                                      \
    bool direct = !tb && alpha == 1;                                                     \
    T *bpack = direct ? NULL : malloc(sizeof(T) * GEMM_KC * GEMM_NC);                    \
    T *apack = malloc(sizeof(T) * GEMM_KC * 4);                                          \
    if ((!direct && !bpack) || !apack) {                                                 \
      free(bpack);                                                                       \
      free(apack);                                                                       \
      return NR_ERR_NOMEM;                                                               \
    }                                                                                    \
    for (int64_t j0 = 0; j0 < n; j0 += GEMM_NC) {                                        \
      int64_t nc = n - j0 < GEMM_NC ? n - j0 : GEMM_NC;                                  \
      for (int64_t p0 = 0; p0 < k; p0 += GEMM_KC) {                                      \
        int64_t kc = k - p0 < GEMM_KC ? k - p0 : GEMM_KC;                                \
        const T *bp = bpack;                                                             \
        int64_t ldp = nc;                                                                \
        if (direct) {                                                                    \
          bp = b + p0 * ldb + j0;                                                        \
          ldp = ldb;                                                                     \
        } else {                                                                         \
          NAME##_pack_b(tb, b, ldb, p0, j0, kc, nc, alpha, bpack);                       \
        }                                                                                \
        NAME##_block(ta, m, kc, nc, a, lda, p0, bp, ldp, c + j0, ldc, apack);            \
      }                                                                                  \
    }                                                                                    \
    free(bpack);                                                                         \
    free(apack);                                                                         \
    return NR_OK;                                                                        \
  }

NR_DEFINE_GEMM(nr_ref_sgemm, float)
NR_DEFINE_GEMM(nr_ref_dgemm, double)

void nr_ref_igemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const int64_t *a,
                  int64_t lda, const int64_t *b, int64_t ldb, int64_t *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++) {
      uint64_t x = (uint64_t)(ta ? a[p * lda + i] : a[i * lda + p]);
      for (int64_t j = 0; j < n; j++) {
        uint64_t y = (uint64_t)(tb ? b[j * ldb + p] : b[p * ldb + j]);
        c[i * ldc + j] = (int64_t)((uint64_t)c[i * ldc + j] + x * y);
      }
    }
}

void *nr_ref_stage(const nr_value *v, nr_dtype want, bool *owned) {
  *owned = false;
  int64_t n = nr_value_count(v);
  if (v->dtype == want && n > 0)
    return v->data;
  /* empty tensors may have no data: hand out a (never read) one-element buffer */
  size_t esize = want == NR_DTYPE_FLOAT ? sizeof(float) : sizeof(double);
  void *buf = malloc(esize * (size_t)(n > 0 ? n : 1));
  if (!buf)
    return NULL;
  *owned = true;
  for (int64_t i = 0; i < n; i++)
    nr_store_f64(want, buf, i, nr_load_f64(v->dtype, v->data, i));
  return buf;
}

void nr_ref_unstage(nr_value *dst, const void *src, nr_dtype from, int64_t count) {
  if (src == dst->data)
    return;
  for (int64_t i = 0; i < count; i++)
    nr_store_f64(dst->dtype, dst->data, i, nr_load_f64(from, src, i));
}
