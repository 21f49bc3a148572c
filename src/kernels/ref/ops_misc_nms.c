/* ops_misc_nms.c - reference NonMaxSuppression (opset 10/11).
 *
 * Per (batch, class): candidates above score_threshold (when given) are sorted by
 * score, highest first, ties going to the lower box index; the greedy pass keeps a
 * box unless its IoU with an already kept box exceeds iou_threshold, stopping at
 * max_output_boxes_per_class. The number of selected boxes depends on the data, so
 * the row sets NR_OP_ALLOCATES_OUTPUTS and run() sizes the [num_selected, 3] output. */
#include "kernels/ref/misc.h"
#include "kernels/ref/ref_util.h"

#include <stdlib.h>
#include <string.h>

typedef struct nms_cand {
  double score;
  int64_t idx;
} nms_cand;

typedef struct nms_rect {
  double x0, y0, x1, y1;
} nms_rect;

nr_status nr_misc_nms_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 5);
  if (!st)
    st = nr_misc_need_float(ctx, 0, "boxes");
  if (!st)
    st = nr_misc_need_float(ctx, 1, "scores");
  if (st)
    return st;
  const nr_value *b = nr_op_in(ctx, 0), *s = nr_op_in(ctx, 1), *m = nr_op_in(ctx, 2);
  if (m && m->dtype && m->dtype != NR_DTYPE_INT64)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "max_output_boxes_per_class must be int64");
  if ((b->rank >= 0 && b->rank != 3) || (s->rank >= 0 && s->rank != 3))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "boxes and scores must be 3-D");
  if (b->rank == 3 && b->dims[2] >= 0 && b->dims[2] != 4)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "boxes must be [batch, spatial, 4]");
  if (b->rank == 3 && s->rank == 3 &&
      ((b->dims[0] >= 0 && s->dims[0] >= 0 && b->dims[0] != s->dims[0]) ||
       (b->dims[1] >= 0 && s->dims[2] >= 0 && b->dims[1] != s->dims[2])))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "scores must be [batch, classes, spatial] "
                      "matching boxes");
  int64_t dims[2] = {NR_DIM_UNKNOWN, 3};
  return nr_op_set_output(ctx, 0, NR_DTYPE_INT64, 2, dims);
}

static int nms_cmp(const void *a, const void *b) {
  const nms_cand *x = a, *y = b;
  if (x->score != y->score)
    return x->score > y->score ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static nms_rect nms_rect_of(const nr_value *boxes, int64_t off, bool center) {
  double v[4];
  for (int k = 0; k < 4; k++)
    v[k] = nr_load_f64(boxes->dtype, boxes->data, off + k);
  if (center)
    return (nms_rect){v[0] - v[2] / 2, v[1] - v[3] / 2, v[0] + v[2] / 2, v[1] + v[3] / 2};
  /* corners [y1, x1, y2, x2] may come in either diagonal order */
  return (nms_rect){v[1] < v[3] ? v[1] : v[3], v[0] < v[2] ? v[0] : v[2],
                    v[1] < v[3] ? v[3] : v[1], v[0] < v[2] ? v[2] : v[0]};
}

static bool nms_suppress(nms_rect a, nms_rect b, double thr) {
  double ix0 = a.x0 > b.x0 ? a.x0 : b.x0, ix1 = a.x1 < b.x1 ? a.x1 : b.x1;
  double iy0 = a.y0 > b.y0 ? a.y0 : b.y0, iy1 = a.y1 < b.y1 ? a.y1 : b.y1;
  if (ix1 <= ix0 || iy1 <= iy0)
    return false;
  double inter = (ix1 - ix0) * (iy1 - iy0);
  double area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0)
    return false;
  return inter / uni > thr;
}

typedef struct nms_params {
  int64_t max_out;
  double iou, score;
  bool has_score, center;
} nms_params;

static nms_params nms_params_of(nr_op_ctx *ctx) {
  const nr_value *m = nr_op_in(ctx, 2), *io = nr_op_in(ctx, 3), *sc = nr_op_in(ctx, 4);
  nms_params p = {0};
  p.max_out = m && nr_value_count(m) > 0 ? nr_value_get_i64(m, 0) : 0;
  p.max_out = p.max_out < 0 ? 0 : p.max_out;
  p.iou = io && nr_value_count(io) > 0 ? nr_value_get_f64(io, 0) : 0;
  p.has_score = sc && nr_value_count(sc) > 0;
  p.score = p.has_score ? nr_value_get_f64(sc, 0) : 0;
  p.center = nr_attr_int(ctx->node, "center_point_box", 0) != 0;
  return p;
}

/* Selects boxes of one (batch, class); appends their indices to kept, returns count. */
static int64_t nms_class(nr_op_ctx *ctx, const nms_params *p, int64_t b, int64_t c,
                         nms_cand *cand, int64_t *kept) {
  const nr_value *boxes = nr_op_in(ctx, 0), *scores = nr_op_in(ctx, 1);
  int64_t ns = boxes->dims[1], nc = scores->dims[1], n = 0, nk = 0;
  for (int64_t i = 0; i < ns; i++) {
    double s = nr_load_f64(scores->dtype, scores->data, (b * nc + c) * ns + i);
    if (!p->has_score || s > p->score)
      cand[n++] = (nms_cand){s, i};
  }
  qsort(cand, (size_t)n, sizeof *cand, nms_cmp);
  for (int64_t i = 0; i < n && nk < p->max_out; i++) {
    nms_rect r = nms_rect_of(boxes, (b * ns + cand[i].idx) * 4, p->center);
    bool keep = true;
    for (int64_t k = 0; keep && k < nk; k++)
      keep = !nms_suppress(r, nms_rect_of(boxes, (b * ns + kept[k]) * 4, p->center),
                           p->iou);
    if (keep)
      kept[nk++] = cand[i].idx;
  }
  return nk;
}

nr_status nr_misc_nms_run(nr_op_ctx *ctx) {
  const nr_value *boxes = nr_op_in(ctx, 0), *scores = nr_op_in(ctx, 1);
  nms_params p = nms_params_of(ctx);
  int64_t nb = boxes->dims[0], ns = boxes->dims[1], nc = scores->dims[1], total = 0;
  if (scores->dims[0] != nb || scores->dims[2] != ns)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "scores do not match boxes");
  size_t cap = (size_t)(ns > 0 ? ns : 1);
  nms_cand *cand = malloc(sizeof *cand * cap);
  int64_t *kept = malloc(sizeof *kept * cap);
  int64_t *sel = malloc(sizeof *sel * 3 * cap * (size_t)(nb * nc > 0 ? nb * nc : 1));
  nr_status st = cand && kept && sel ? NR_OK : nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory");
  for (int64_t b = 0; !st && b < nb; b++) {
    for (int64_t c = 0; c < nc; c++) {
      int64_t nk = nms_class(ctx, &p, b, c, cand, kept);
      for (int64_t k = 0; k < nk; k++, total++)
        memcpy(sel + total * 3, (int64_t[]){b, c, kept[k]}, sizeof(int64_t) * 3);
    }
  }
  int64_t dims[2] = {total, 3};
  nr_value *y = nr_op_out(ctx, 0);
  if (!st && !(st = nr_value_alloc(y, NR_DTYPE_INT64, 2, dims, ctx->err)) && total)
    memcpy(y->data, sel, sizeof(int64_t) * 3 * (size_t)total);
  free(cand);
  free(kept);
  free(sel);
  return st;
}
