/* rnn_rules.h - where RNN, GRU and LSTM read and write, written once for the reference
 * operators (ops_rnn.c) and the fast LSTM tactic (kernels/cpu/rnn/tactics_lstm.c): the
 * element offsets of X, Y and the states (initial_h, initial_c, Y_h, Y_c) under the
 * layout attribute (0: sequence first, 1: batch first). */
#ifndef NR_KERNELS_REF_RNN_RULES_H
#define NR_KERNELS_REF_RNN_RULES_H

#include <stdbool.h>
#include <stdint.h>

/* The sizes the offsets depend on. */
typedef struct nr_rnn_dims {
  bool layout;
  int64_t seq, batch, dirs, input, hidden;
} nr_rnn_dims;

/* Offset of X[t, b, 0] (layout 1: X[b, t, 0]). */
static inline int64_t nr_rnn_x_off(const nr_rnn_dims *d, int64_t t, int64_t b) {
  return (d->layout ? b * d->seq + t : t * d->batch + b) * d->input;
}
/* Offset of Y[t, dir, b, 0] (layout 1: Y[b, t, dir, 0]). */
static inline int64_t nr_rnn_y_off(const nr_rnn_dims *d, int64_t t, int dir, int64_t b) {
  if (d->layout)
    return ((b * d->seq + t) * d->dirs + dir) * d->hidden;
  return ((t * d->dirs + dir) * d->batch + b) * d->hidden;
}
/* Offset of a state's [dir, b, 0] (layout 1: [b, dir, 0]). */
static inline int64_t nr_rnn_s_off(const nr_rnn_dims *d, int dir, int64_t b) {
  return (d->layout ? b * d->dirs + dir : dir * d->batch + b) * d->hidden;
}

#endif
