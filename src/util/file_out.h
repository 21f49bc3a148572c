/* file_out.h - writing an output file so that its name never holds a partial file:
 * engines, calibration tables, tuning reports, tensor files.
 *
 * The bytes go to a temporary file in the destination's own directory (so the rename
 * stays on one file system), created with O_CREAT | O_EXCL under a random name
 * (".NAME.tmp-<16 hex digits>"): never a name another process can guess and plant a
 * link or a file at, never one shared by two writers. Once every byte is written and
 * the file closed, it is renamed over the destination; any failure on the way removes
 * the temporary and leaves the destination as it was. The file gets the permissions
 * fopen would give it (0666 less the umask). A destination that is a symbolic link is
 * replaced through the link, as fopen writes through it. A destination that exists and
 * is not a regular file (a FIFO, /dev/stdout) is written in place: there is nothing
 * to replace there.
 *
 * Key decision: no fsync. A process that dies at any point leaves the old file or the
 * new one, whole, plus at worst a stray temporary (SIGKILL gives no chance to remove
 * it); surviving a power cut is left to the file system, as before. */
#ifndef NR_UTIL_FILE_OUT_H
#define NR_UTIL_FILE_OUT_H

#include "util/error.h"

#include <stddef.h>
#include <stdio.h>

typedef struct nr_file_out {
  FILE *f;          /* write here; NULL once committed or aborted */
  char *path;       /* the destination (a symbolic link resolved) */
  char *tmp;        /* the temporary's path; NULL when writing in place */
  const char *what; /* "engine", "report", ...: names the file in messages */
} nr_file_out;

/* Opens the temporary for path; what (a static string) names the kind of file in
 * messages. On failure nothing is created and *o needs no abort. */
nr_status nr_file_out_open(nr_file_out *o, const char *path, const char *what,
                           nr_error *err);
/* Closes the temporary and renames it over the destination. On any failure (a write
 * error kept by the stream, the close, the rename) removes the temporary and names
 * the destination and the reason. Releases o either way. */
nr_status nr_file_out_commit(nr_file_out *o, nr_error *err);
/* Closes and removes the temporary; the destination is untouched. Releases o; a
 * zeroed, committed or aborted o is a no-op. */
void nr_file_out_abort(nr_file_out *o);

/* The whole of data, len bytes, to path through the three calls above. */
nr_status nr_file_write_whole(const char *path, const void *data, size_t len,
                              const char *what, nr_error *err);

#endif
