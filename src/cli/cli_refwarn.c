/* cli_refwarn.c - the warning `nnroute build` and `nnroute bench --profile` print
 * when steps run on the reference tactic: one line per such step (op type, node name
 * and, where step times are at hand, its share of the run) and the count "N of M
 * steps on the reference tactic".
 *
 * Key decision: the warning reads the engine through the public step queries
 * (nr_engine_step_info), so a library user sees exactly what the command warns about.
 * `nnroute build` takes its shares from two runs on random inputs (the first warms
 * caches), and only when some step is on the reference tactic. */
#include "cli/cli.h"
#include "api/nnroute_tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nr_cli_warn_reference(const nr_engine *e, const double *step_ms) {
  int n = nr_engine_step_count(e), n_ref = nr_engine_reference_steps(e);
  if (!n_ref)
    return;
  double total = 0;
  for (int k = 0; step_ms && k < n; k++)
    total += step_ms[k];
  fprintf(stderr, "warning: %d of %d steps on the reference tactic (no fast kernel runs "
                  "them; each is slower than a fast tactic would be):\n", n_ref, n);
  for (int k = 0; k < n; k++) {
    nr_step_info s;
    if (nr_engine_step_info(e, k, &s) || !s.reference)
      continue;
    fprintf(stderr, "  step %4d  %-22s '%s'", k, s.op_type, s.node);
    if (step_ms && total > 0)
      fprintf(stderr, "  %.1f%% of the run", 100 * step_ms[k] / total);
    fputc('\n', stderr);
  }
}

static void add_ms(void *user, int step, double ms) { ((double *)user)[step] += ms; }

static void free_inputs(nr_buffer *in, int n) {
  for (int i = 0; in && i < n; i++)
    free(in[i].data);
  free(in);
}

/* Random inputs for engine e (seed 1), as `nnroute bench` makes them. */
static nr_buffer *random_inputs(const nr_engine *e, nr_error *err) {
  int n = nr_engine_input_count(e);
  nr_buffer *in = calloc((size_t)n + 1, sizeof *in);
  uint64_t state = 1;
  for (int i = 0; in && i < n; i++) {
    nr_io_info info;
    nr_value v = {0};
    if (nr_engine_input_info(e, i, &info) ||
        nr_value_alloc(&v, info.dtype, info.rank, info.dims, err)) {
      free_inputs(in, n);
      return NULL;
    }
    nr_cli_random_fill(&v, &state);
    in[i] = (nr_buffer){v.dtype, v.rank, {0}, v.data};
    memcpy(in[i].dims, v.dims, sizeof in[i].dims);
  }
  return in;
}

double *nr_cli_step_times(const nr_engine *e, int threads) {
  int n = nr_engine_step_count(e), n_in = nr_engine_input_count(e);
  int n_out = nr_engine_output_count(e);
  nr_error err = {0};
  nr_context *ctx = NULL;
  double *ms = calloc((size_t)n + 1, sizeof *ms);
  nr_buffer *in = random_inputs(e, &err);
  nr_buffer *out = calloc((size_t)n_out + 1, sizeof *out);
  bool ok = ms && in && out && !nr_context_create(e, threads, &ctx, &err);
  for (int r = 0; ok && r < 2; r++) {
    nr_context_time_steps(ctx, r ? add_ms : NULL, ms);
    ok = !nr_context_run(ctx, in, out, &err);
    for (int o = 0; o < n_out; o++) {
      nr_buffer_free(&out[o]);
      memset(&out[o], 0, sizeof out[o]);
    }
  }
  nr_context_destroy(ctx);
  free_inputs(in, n_in);
  free(out);
  if (!ok) {
    free(ms);
    return NULL;
  }
  return ms;
}
