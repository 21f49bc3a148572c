/* tactic_registry.c - the list of tactic tables (families.h) and lookup by id. */
#include "plan/families.h"
#include "plan/tactic.h"

#include <string.h>

#define NR_DECLARE(f) extern const nr_tactic nr_tactics_##f[];
NR_TACTIC_FAMILIES(NR_DECLARE)
#undef NR_DECLARE

static const nr_tactic *const tables[] = {
#define NR_LIST(f) nr_tactics_##f,
    NR_TACTIC_FAMILIES(NR_LIST)
#undef NR_LIST
};

void nr_tactic_foreach(void (*fn)(const nr_tactic *t, void *user), void *user) {
  for (size_t f = 0; f < sizeof tables / sizeof tables[0]; f++)
    for (const nr_tactic *t = tables[f]; t->id; t++)
      fn(t, user);
}

const nr_tactic *nr_tactic_find(const char *id) {
  for (size_t f = 0; f < sizeof tables / sizeof tables[0]; f++)
    for (const nr_tactic *t = tables[f]; t->id; t++)
      if (!strcmp(t->id, id))
        return t;
  return NULL;
}
