/* scratch_dir.h - a fresh folder under /tmp for one test, and its removal with
 * whatever the test left in it: files, links, FIFOs, SQLite's -wal and -shm, empty
 * folders. `path` names the test's usual file in it. */
#ifndef NR_TEST_SCRATCH_DIR_H
#define NR_TEST_SCRATCH_DIR_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct nr_scratch_dir {
  char dir[40];
  char path[96];
} nr_scratch_dir;

/* /tmp/TAG_XXXXXX, with path = dir/FILE; false when the folder cannot be made. */
static inline bool nr_scratch_make(nr_scratch_dir *d, const char *tag, const char *file) {
  snprintf(d->dir, sizeof d->dir, "/tmp/%s_XXXXXX", tag);
  if (!mkdtemp(d->dir))
    return false;
  snprintf(d->path, sizeof d->path, "%s/%s", d->dir, file);
  return true;
}

static inline void nr_scratch_free(nr_scratch_dir *d) {
  DIR *dh = opendir(d->dir);
  struct dirent *e;
  char p[512];
  while (dh && (e = readdir(dh))) {
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", d->dir, e->d_name);
      if (unlink(p) != 0)
        rmdir(p);
    }
  }
  if (dh)
    closedir(dh);
  rmdir(d->dir);
}

#endif
