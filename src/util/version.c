/* version.c - the build's version strings (version.h); the text itself is generated
 * (build/gen/nr_version.c), this file only hands it out. */
#include "nnroute.h"
#include "util/version.h"

#include <stdio.h>

extern const char nr_build_version[];
extern const char nr_build_sources[];

const char *nr_version(void) { return nr_build_version; }

const char *nr_version_sources(void) { return nr_build_sources; }

const char *nr_version_full(void) {
  static char full[128];
  if (!full[0]) /* written once with the same text: harmless if two threads race */
    snprintf(full, sizeof full, "%s sources %s", nr_build_version, nr_build_sources);
  return full;
}
