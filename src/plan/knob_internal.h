/* knob_internal.h - the knob machinery over explicit tables, shared by knob.c, the
 * route parser and the unit tests.
 *
 * knob.h works on the tables listed in families.h. Everything here takes the tables
 * as an argument instead, so tests can build spaces from small local tables and stay
 * independent of which real knobs exist. A space remembers the tables it was built
 * from (they must outlive it), so the route parser can tell "unknown knob" from
 * "knob that has no instance in this graph" and suggest close names. */
#ifndef NR_PLAN_KNOB_INTERNAL_H
#define NR_PLAN_KNOB_INTERNAL_H

#include "plan/knob.h"

#include <stddef.h>

/* Checks tables: names well formed and unique, values non-empty, at most
 * NR_KNOB_MAX_VALUES, no duplicates, the default among them, error bounds
 * consistent with NR_KNOB_ACCURACY. NR_ERR_INTERNAL naming the knob otherwise. */
nr_status nr_knob_tables_validate(const nr_knob_def *const *tables, int n, nr_error *err);
/* FNV-1a 64 over every row's name, values, default, scope, flags and error bound. */
uint64_t nr_knob_hash_tables(const nr_knob_def *const *tables, int n);
/* nr_knob_space_build over explicit tables (validated first); test_knobs decides
 * whether NR_KNOB_TEST rows are listed. tables must outlive the space. */
nr_status nr_knob_space_build_tables(const nr_knob_def *const *tables, int n,
                                     const nr_graph *g, bool test_knobs,
                                     nr_knob_space *out, nr_error *err);
/* The same for builds on device d (the tables given count as shared families: a row
 * is listed when its own device mask is 0 or holds d). */
nr_status nr_knob_space_build_tables_for(const nr_knob_def *const *tables, int n,
                                         const nr_graph *g, bool test_knobs,
                                         nr_device device, nr_knob_space *out,
                                         nr_error *err);

/* The definition named name[0..len) among the tables space was built from. */
const nr_knob_def *nr_knob_space_def(const nr_knob_space *s, const char *name,
                                     size_t len);
/* Index of instance "name" (node NULL) or "name@node", or -1; O(1). */
int nr_knob_space_find_parts(const nr_knob_space *s, const char *name, size_t len,
                             const char *node);
/* Writes up to a few knob names of the space's tables close to name[0..len)
 * (same family, or a small edit distance), comma separated; "" if none. */
void nr_knob_space_suggest(const nr_knob_space *s, const char *name, size_t len,
                           char *buf, size_t cap);
/* Number of values in a '|' list. */
int nr_knob_value_count(const char *values);

#endif
