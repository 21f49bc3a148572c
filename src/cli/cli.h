/* cli.h - what the command files share: the command table entry points and small
 * argument helpers. Only the CLI turns statuses into exit codes and messages. */
#ifndef NR_CLI_CLI_H
#define NR_CLI_CLI_H

#include "nnroute.h"
#include "ir/ir.h"

#include <stdbool.h>

int nr_cli_run(int argc, char **argv);
int nr_cli_conformance(int argc, char **argv);
int nr_cli_ops(int argc, char **argv);
int nr_cli_build(int argc, char **argv);
int nr_cli_check_routes(int argc, char **argv);
int nr_cli_check_knobs(int argc, char **argv);
int nr_cli_knobs(int argc, char **argv);
int nr_cli_inspect(int argc, char **argv);
int nr_cli_bench(int argc, char **argv);
int nr_cli_tune(int argc, char **argv);
int nr_cli_report(int argc, char **argv);

/* Parses "1x3x224x224" (also "1,3,224,224"; "" or "scalar" = rank 0). */
bool nr_cli_parse_dims(const char *text, int *rank, int64_t *dims);
/* Splits "NAME=VALUE" at the last '=' into a newly allocated name; NULL on error. */
char *nr_cli_split_assign(const char *arg, const char **value);
/* File-safe form of a tensor name: [A-Za-z0-9._-] kept, others become '_'. */
void nr_cli_safe_name(const char *name, char *out, size_t cap);
/* Applies one --shape NAME=DIMS to a model; returns an exit code (0 ok, 1 error
 * reported, 2 malformed option). */
int nr_cli_apply_shape(nr_model *m, const char *spec, nr_error *err);
/* Reads a .npy or .pb tensor file by extension. */
nr_status nr_cli_read_tensor(const char *path, nr_value *out, nr_error *err);
/* --sign / --verify KEYFILE: the file's bytes, the HMAC key (1 to 4096 bytes;
 * malloc'ed, the caller wipes and frees it with nr_cli_free_key). */
nr_status nr_cli_read_key(const char *path, uint8_t **key, size_t *len, nr_error *err);
void nr_cli_free_key(uint8_t *key, size_t len);
/* Loads engine path (--unsafe-ignore-environment when unsafe; verified against the key
 * in file verify_key when that is not NULL). */
nr_status nr_cli_load_engine(const char *path, bool unsafe, const char *verify_key,
                             nr_engine **out, nr_error *err);
/* Prints "nnroute: <status>: <message>" to stderr; returns exit code 1. */
int nr_cli_fail(const nr_error *err);
/* --calibration SPEC: a calibration table file (nr_calibration_save), a directory of
 * input sets (ONNX test-data layout or .npy, as the tuner's --pairs), or random:N (N
 * seeded random input sets: a smoke test, real data calibrates better). NULL spec:
 * *out stays NULL. */
nr_status nr_cli_calibration(nr_model *m, const char *spec, nr_calibration **out,
                             nr_error *err);
/* Fills v with seeded random data suited to its dtype. */
void nr_cli_random_fill(nr_value *v, uint64_t *state);
/* The next value of the commands' seeded generator (splitmix64) at *state. */
uint64_t nr_cli_random_u64(uint64_t *state);
/* DIR/<name>.npy (the name made safe for a file name, nr_cli_safe_name). */
nr_status nr_cli_read_dir_tensor(const char *dir, const char *name, nr_value *v,
                                 nr_error *err);
/* Warns on stderr about every step of e on the reference tactic and counts them
 * (cli_refwarn.c); step_ms: per-step times of a run (shares), or NULL. */
void nr_cli_warn_reference(const nr_engine *e, const double *step_ms);
/* Per-step milliseconds of one run of e on random inputs after a warm-up run
 * (malloc'ed, nr_engine_step_count entries); NULL when a run fails. */
double *nr_cli_step_times(const nr_engine *e, int threads);

/* ---- random routes (cli_routes.c) --------------------------------------------------
 * Routes over a model's knob list (api/nnroute_tools.h) as choice vectors. */
struct nr_knob_list;
/* A seeded random route: each knob instance leaves its default with probability p,
 * to a uniformly drawn valid value; the precision@NODE instances with probability
 * min(p, precision_changes / their number), so that about precision_changes nodes of
 * a route are in reduced precision at most; knobs of reduced precision without a
 * documented bound per value stay at their default. */
void nr_cli_draw_route(const struct nr_knob_list *l, int *choice, double p,
                       double precision_changes, uint64_t *state);
#define NR_CLI_PRECISION_CHANGES 2.0 /* the commands' default precision_changes */
/* The relative L2 error a route may add: base, plus the bound of every accuracy-knob
 * instance off its default (the value's own bound for the precision knob), plus once
 * per knob whose default is itself approximate (NR_KNOB_INFO_APPROX_DEFAULT) and that
 * some instance leaves at that default. */
double nr_cli_route_bound(const struct nr_knob_list *l, const int *choice, double base);
/* Whether the route puts some node in int8 (the build then needs a calibration). */
bool nr_cli_route_needs_calibration(const struct nr_knob_list *l, const int *choice);
/* Relative L2 error of got against want (absolute when want is all zeros); a shape or
 * dtype mismatch, or NaN or Inf where want has none, gives +inf. */
double nr_cli_rel_l2(const nr_buffer *got, const nr_buffer *want);

#endif
