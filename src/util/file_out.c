/* file_out.c - see file_out.h: a temporary beside the destination, created O_EXCL
 * under a random name, renamed over it once whole. */
#include "util/file_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How many random names are tried before giving up (each collision is a file that
 * someone made under a name nobody could predict: this is never reached in practice). */
#define NR_FILE_OUT_TRIES 64

/* 64 random bits: the kernel's, or, where getrandom fails (a kernel without it), the
 * clock, the pid and a counter mixed by splitmix64. O_EXCL, not the randomness, is
 * what keeps an existing file safe; the randomness keeps the name unguessable. */
static uint64_t random_bits(void) {
  uint64_t r;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
    return r;
  static uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t z = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
               ((uint64_t)getpid() << 17) ^ (++counter * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The destination as fopen would reach it: a symbolic link is followed to its target
 * (so renaming replaces the target, not the link); a dangling one stays as given. */
static char *resolve(const char *path) {
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    char *real = realpath(path, NULL);
    if (real)
      return real;
  }
  return strdup(path);
}

/* "DIR/.BASE.tmp-<hex>" for "DIR/BASE" (and ".BASE.tmp-<hex>" for "BASE"). */
static char *temp_name(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
  size_t n = strlen(path) + 32;
  char *t = malloc(n);
  if (t)
    snprintf(t, n, "%.*s.%s.tmp-%016llx", (int)dir_len, path, path + dir_len,
             (unsigned long long)random_bits());
  return t;
}

static void release(nr_file_out *o) {
  free(o->path);
  free(o->tmp);
  o->f = NULL;
  o->path = o->tmp = NULL;
}

/* Creates the temporary and a stream on it; NULL with errno set when it cannot, and
 * then nothing is left on disk. */
static FILE *open_temp(nr_file_out *o) {
  int fd = -1;
  for (int i = 0; i < NR_FILE_OUT_TRIES && fd < 0; i++) {
    free(o->tmp);
    if (!(o->tmp = temp_name(o->path))) {
      errno = ENOMEM;
      return NULL;
    }
    fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0 && errno != EEXIST)
      return NULL;
  }
  if (fd < 0)
    return NULL; /* errno is EEXIST */
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    int e = errno;
    close(fd);
    unlink(o->tmp);
    errno = e;
  }
  return f;
}

nr_status nr_file_out_open(nr_file_out *o, const char *path, const char *what,
                           nr_error *err) {
  *o = (nr_file_out){.what = what ? what : "file"};
  if (!path || !*path)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "writing the %s: no path", o->what);
  if (!(o->path = resolve(path)))
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory writing the %s '%s'", o->what,
                     path);
  struct stat st;
  bool in_place = stat(o->path, &st) == 0 && !S_ISREG(st.st_mode); /* a FIFO, a device */
  if (in_place && S_ISDIR(st.st_mode))
    errno = EISDIR;
  else
    o->f = in_place ? fopen(o->path, "wb") : open_temp(o);
  if (o->f)
    return NR_OK;
  int e = errno;
  nr_status s = nr_errorf(
      err, NR_ERR_IO, "cannot write the %s '%s': %s%s", o->what, path,
      in_place ? "" : "creating a temporary file beside it: ", strerror(e));
  release(o);
  return s;
}

nr_status nr_file_out_commit(nr_file_out *o, nr_error *err) {
  if (!o->f)
    return nr_errorf(err, NR_ERR_INTERNAL, "writing the %s: nothing open", o->what);
  errno = 0;
  bool ok = fflush(o->f) == 0 && !ferror(o->f);
  int e = errno;
  if (fclose(o->f) != 0 && ok) {
    ok = false;
    e = errno;
  }
  o->f = NULL;
  const char *step = "writing";
  if (ok && o->tmp && rename(o->tmp, o->path) != 0) {
    ok = false;
    e = errno;
    step = "renaming the temporary file over it";
  }
  nr_status st = NR_OK;
  if (!ok) {
    if (o->tmp)
      unlink(o->tmp);
    st = nr_errorf(err, NR_ERR_IO, "cannot write the %s '%s': %s: %s", o->what, o->path,
                   step, e ? strerror(e) : "write error");
  }
  release(o);
  return st;
}

void nr_file_out_abort(nr_file_out *o) {
  if (!o)
    return;
  if (o->f) {
    fclose(o->f);
    if (o->tmp)
      unlink(o->tmp);
  }
  release(o);
}

nr_status nr_file_write_whole(const char *path, const void *data, size_t len,
                              const char *what, nr_error *err) {
  nr_file_out o;
  nr_status st = nr_file_out_open(&o, path, what, err);
  if (st)
    return st;
  if (len && fwrite(data, 1, len, o.f) != len) {
    int e = errno;
    nr_file_out_abort(&o);
    return nr_errorf(err, NR_ERR_IO, "cannot write the %s '%s': %s", what ? what : "file",
                     path, e ? strerror(e) : "short write");
  }
  return nr_file_out_commit(&o, err);
}
