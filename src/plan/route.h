/* route.h - build routes (one value per knob instance) and route expressions (a set
 * of allowed values per instance, which the tuner enumerates).
 *
 * Syntax follows TensorRT 11.1's trtexec build routes: space-separated tokens
 *   -knob=value          pin a global knob, or every instance of a per-node knob
 *   -knob@NODE=value     pin the instance on one node
 *   -knob@*=value        every instance of the knob (in an expression each instance
 *                        varies on its own)
 *   -knob@<OpType>=value the instances on nodes of one op type
 * and, in expressions only, value may be [a|b|c] (these values) or * (all values).
 * A token naming several instances sets those where its value is valid and leaves
 * the others be (at least one must take it): -cuda.precision@*=fp32 pins the
 * convolutions and leaves the products, whose auto already is fp32 and which offer
 * no fp32 value of their own. A route that names, at one node, a value the knob
 * leaves out there because it builds what the default builds (nr_knob_def's
 * same_as_dflt) sets the default: -cuda.precision@fc=fp32 on a product.
 * The canonical text lists only non-default instances, in knob-space order, one
 * `-id=value` token each, so equal routes compare equal and the default route is "".
 * Errors name the offending token and list the allowed values. */
#ifndef NR_PLAN_ROUTE_H
#define NR_PLAN_ROUTE_H

#include "plan/knob.h"

typedef struct nr_route {
  const nr_knob_space *space; /* not owned; must outlive the route */
  int *choice;                /* per instance: index into values */
  /* NULL, or per instance the NR_ROUTE_* bits of how a build read it (nr_route_track).
   * Reads record through a const route: the record is not the route's value. */
  uint8_t *use;
} nr_route;

/* ---- knob use ---------------------------------------------------------------------
 * A build records how it reads its route, so that a value the compiler reconciled away
 * is known as such. Every read through nr_route_get, nr_route_get_def or nr_route_is
 * marks the instance READ, and also EFFECTIVE when its answer may differ from the
 * answer the instance's default value gives there (nr_route_is compares both answers;
 * a value read as text is EFFECTIVE whenever it is not the default). Code that may
 * reconcile a value away reads it with nr_route_peek_def, which marks READ only, and
 * calls nr_route_mark_effective when it acted on the value (tactic selection: a
 * restriction that no candidate satisfies is skipped). After a build:
 *   - a non-default instance that is not EFFECTIVE was ignored: at every read the
 *     build behaved as with the default, so the build is the one of the route with
 *     that instance at its default (its canonical route leaves it out);
 *   - an instance never READ cannot have changed anything, whatever its value: the
 *     routes that differ from this one only there build the same plan.
 * The record costs nothing when it is off (use NULL: engine loading, valid()). */
enum {
  NR_ROUTE_READ = 1u << 0,      /* some read may depend on the value */
  NR_ROUTE_EFFECTIVE = 1u << 1, /* the value made the build differ from its default */
};
/* Starts recording (allocates r->use, every entry 0); the record ends with the route. */
nr_status nr_route_track(nr_route *r, nr_error *err);

/* The default route of space. */
nr_status nr_route_init(nr_route *r, const nr_knob_space *space, nr_error *err);
void nr_route_free(nr_route *r);
nr_status nr_route_copy(nr_route *dst, const nr_route *src, nr_error *err);
/* Applies the tokens of text to r (a concrete route: no [..] or *). */
nr_status nr_route_parse(nr_route *r, const char *text, nr_error *err);
/* Canonical text (malloc'ed, caller frees); "" for the default route. */
char *nr_route_canonical(const nr_route *r);
/* Number of instances not at their default. */
int nr_route_changes(const nr_route *r);
/* Value of knob id for node (NULL: the global knob). Knobs that have no instance
 * there (not applicable, or not in the space's device) give NULL, which callers
 * treat as "not steerable here". */
const char *nr_route_get(const nr_route *r, nr_knob_id id, const nr_node *node);
/* nr_route_get compared with a value. EFFECTIVE only when the default's answer
 * differs (conv.threads=1 asked "is it 1?" is; memory.views=off asked "is it on?" too). */
bool nr_route_is(const nr_route *r, nr_knob_id id, const nr_node *node,
                 const char *value);
/* The same for a definition of the tables the space was built from (spaces built from
 * explicit tables, knob_internal.h); NULL where def has no instance. */
const char *nr_route_get_def(const nr_route *r, const nr_knob_def *def,
                             const nr_node *node);
/* nr_route_get_def that marks READ only: for code that may reconcile the value away;
 * it calls nr_route_mark_effective once the value acted. */
const char *nr_route_peek_def(const nr_route *r, const nr_knob_def *def,
                              const nr_node *node);
void nr_route_mark_effective(const nr_route *r, const nr_knob_def *def,
                             const nr_node *node);
/* The instance's record bits (0 without a record or an instance). */
unsigned nr_route_use(const nr_route *r, const nr_knob_def *def, const nr_node *node);
/* Whether instance i is set to a value the build ignored: not its default, recorded,
 * not EFFECTIVE. */
bool nr_route_ignored(const nr_route *r, int i);

/* A route expression: per instance, the bit set of allowed value indices. */
typedef struct nr_route_expr {
  const nr_knob_space *space;
  uint64_t *allowed;
} nr_route_expr;

/* Parses an expression; instances it does not name stay pinned to their default. */
nr_status nr_route_expr_parse(nr_route_expr *e, const nr_knob_space *space,
                              const char *text, nr_error *err);
/* Every instance free over all its values (the tuner's default space). */
nr_status nr_route_expr_all(nr_route_expr *e, const nr_knob_space *space, nr_error *err);
void nr_route_expr_free(nr_route_expr *e);
/* Number of routes the expression spans (saturating at UINT64_MAX). */
uint64_t nr_route_expr_count(const nr_route_expr *e);

#endif
