/* test_file_out.c - output files written whole or not at all (src/util/file_out.h):
 * the temporary is a hidden, unpredictable name beside the destination, created
 * O_EXCL; a write that fails (a file-size limit in a forked child), a rename that
 * fails and an abort all leave the old file and no temporary; a symbolic link is
 * written through and a FIFO in place; and nr_engine_save ignores a link planted at
 * the name an older nnroute used for its temporary ("PATH.tmpPID").
 *
 * Each test works in its own mkdtemp directory under /tmp and removes it. */
#include "io/tensor_io.h"
#include "ir/ir.h"
#include "scratch_dir.h"
#include "unit.h"
#include "util/file_out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TINY_CNN NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx"

typedef nr_scratch_dir fo_dir;

static bool fo_make(fo_dir *d) { return nr_scratch_make(d, "nr_file_out", "out.bin"); }
static void fo_free(fo_dir *d) { nr_scratch_free(d); }

/* How many entries the directory holds, and how many look like a temporary. */
static int fo_entries(const fo_dir *d, int *temps) {
  DIR *dh = opendir(d->dir);
  struct dirent *e;
  int n = 0;
  *temps = 0;
  while (dh && (e = readdir(dh))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    n++;
    *temps += strstr(e->d_name, ".tmp") != NULL;
  }
  if (dh)
    closedir(dh);
  return n;
}

static bool put(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  bool ok = f && fputs(text, f) >= 0;
  return (f && fclose(f) == 0) && ok;
}

/* The file's first bytes as a string ("" when unreadable). */
static const char *get(const char *path) {
  static char buf[256];
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f)
    fclose(f);
  buf[n] = '\0';
  return buf;
}

NR_TEST(file_out_writes_whole_and_leaves_no_temporary) {
  fo_dir d;
  REQUIRE(fo_make(&d));
  nr_error err = {0};
  int temps;
  CHECK(nr_file_write_whole(d.path, "hello", 5, "test file", &err) == NR_OK, "%s",
        err.message);
  CHECK(!strcmp(get(d.path), "hello"));
  CHECK(nr_file_write_whole(d.path, "bye", 3, "test file", &err) == NR_OK, "%s",
        err.message);
  CHECK(!strcmp(get(d.path), "bye"), "replaced: '%s'", get(d.path));
  CHECK(fo_entries(&d, &temps) == 1 && temps == 0, "left %d temporaries", temps);
  mode_t mask = umask(0);
  umask(mask);
  struct stat st;
  CHECK(stat(d.path, &st) == 0 && (st.st_mode & 0777) == (0666 & ~mask),
        "mode %o, fopen would give %o", (unsigned)(st.st_mode & 0777),
        (unsigned)(0666 & ~mask));
  CHECK(nr_file_write_whole(d.path, "", 0, "test file", &err) == NR_OK && !*get(d.path),
        "an empty file: %s", err.message);
  fo_free(&d);
}

/* Two writers of one destination at once get two temporaries, both hidden in the
 * destination's folder; the last to commit wins and neither is left over. */
NR_TEST(file_out_temporaries_are_private_and_beside_the_destination) {
  fo_dir d;
  REQUIRE(fo_make(&d));
  nr_error err = {0};
  nr_file_out a, b;
  REQUIRE(nr_file_out_open(&a, d.path, "test file", &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_file_out_open(&b, d.path, "test file", &err) == NR_OK, "%s", err.message);
  size_t dl = strlen(d.dir);
  CHECK(a.tmp && b.tmp && strcmp(a.tmp, b.tmp) != 0, "%s, %s", a.tmp, b.tmp);
  CHECK(!strncmp(a.tmp, d.dir, dl) && a.tmp[dl] == '/' && a.tmp[dl + 1] == '.' &&
            !strchr(a.tmp + dl + 1, '/'),
        "%s is not hidden in %s", a.tmp, d.dir);
  struct stat st;
  CHECK(lstat(a.tmp, &st) == 0 && S_ISREG(st.st_mode), "%s", a.tmp);
  CHECK(access(d.path, F_OK) != 0, "the destination exists before any commit");
  fputs("first", a.f);
  fputs("second", b.f);
  CHECK(nr_file_out_commit(&a, &err) == NR_OK, "%s", err.message);
  CHECK(!strcmp(get(d.path), "first"));
  CHECK(nr_file_out_commit(&b, &err) == NR_OK, "%s", err.message);
  CHECK(!strcmp(get(d.path), "second"));
  int temps;
  CHECK(fo_entries(&d, &temps) == 1 && temps == 0, "left %d temporaries", temps);
  nr_file_out_abort(&a); /* committed: a no-op */
  fo_free(&d);
}

NR_TEST(file_out_abort_leaves_the_old_file) {
  fo_dir d;
  REQUIRE(fo_make(&d));
  REQUIRE(put(d.path, "old"));
  nr_error err = {0};
  nr_file_out o;
  REQUIRE(nr_file_out_open(&o, d.path, "test file", &err) == NR_OK, "%s", err.message);
  fputs("new", o.f);
  nr_file_out_abort(&o);
  nr_file_out_abort(&o);
  CHECK(!strcmp(get(d.path), "old"));
  int temps;
  CHECK(fo_entries(&d, &temps) == 1 && temps == 0, "left %d temporaries", temps);
  fo_free(&d);
}

/* The rename fails when the destination became a folder meanwhile. */
NR_TEST(file_out_failed_rename_removes_the_temporary) {
  fo_dir d;
  REQUIRE(fo_make(&d));
  nr_error err = {0};
  nr_file_out o;
  REQUIRE(nr_file_out_open(&o, d.path, "test file", &err) == NR_OK, "%s", err.message);
  fputs("data", o.f);
  REQUIRE(mkdir(d.path, 0755) == 0);
  CHECK(nr_file_out_commit(&o, &err) == NR_ERR_IO && strstr(err.message, d.path) &&
            strstr(err.message, "renaming"),
        "%s", err.message);
  int temps;
  CHECK(fo_entries(&d, &temps) == 1 && temps == 0, "left %d temporaries", temps);
  fo_free(&d);
}

/* In a child with a 4 KiB file-size limit (SIGXFSZ ignored, so write fails with
 * EFBIG): 64 KiB through the helper, an engine through nr_engine_save and a 64 KiB
 * tensor through nr_npy_write. The exit status has one bit per check that failed. */
static _Noreturn void fsize_child(const char *path, nr_engine *e) {
  static char big[1 << 16];
  memset(big, 'x', sizeof big);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {4096, 4096};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    _exit(64);
  nr_error err = {0};
  int bad = 0;
  if (nr_file_write_whole(path, big, sizeof big, "test file", &err) != NR_ERR_IO ||
      !strstr(err.message, path))
    bad |= 1;
  if (strcmp(get(path), "old"))
    bad |= 2;
  if (e && (nr_engine_save(e, path, &err) != NR_ERR_IO || strcmp(get(path), "old")))
    bad |= 4;
  nr_value v = {0};
  int64_t dims[1] = {16384};
  if (nr_value_alloc(&v, NR_DTYPE_FLOAT, 1, dims, &err) ||
      nr_npy_write(path, &v, &err) != NR_ERR_IO || strcmp(get(path), "old"))
    bad |= 8;
  _exit(bad);
}

NR_TEST(file_out_failed_write_keeps_the_old_file) {
  fo_dir d;
  REQUIRE(fo_make(&d));
  REQUIRE(put(d.path, "old"));
  nr_model *m = NULL;
  nr_engine *e = NULL;
  nr_error err = {0};
  nr_build_options bo = {sizeof bo, NULL, 1, NR_DEVICE_CPU, NULL};
  REQUIRE(!nr_model_load(TINY_CNN, NULL, &m, &err) && !nr_engine_build(m, &bo, &e, &err),
          "%s", err.message);
  nr_model_destroy(m);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0)
    fsize_child(d.path, e);
  int status = -1;
  REQUIRE(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "status %#x: bit 1 the helper did not fail, 2 the old file changed, 4 "
        "nr_engine_save and 8 nr_npy_write did not fail or changed it",
        status);
  CHECK(!strcmp(get(d.path), "old"));
  int temps;
  CHECK(fo_entries(&d, &temps) == 1 && temps == 0, "left %d temporaries", temps);
  nr_engine_destroy(e);
  fo_free(&d);
}

NR_TEST(file_out_writes_through_a_link_and_into_a_fifo) {
  fo_dir d;
  REQUIRE(fo_make(&d));
  nr_error err = {0};
  char target[128], link[128], fifo[128];
  snprintf(target, sizeof target, "%s/target", d.dir);
  snprintf(link, sizeof link, "%s/link", d.dir);
  snprintf(fifo, sizeof fifo, "%s/fifo", d.dir);
  REQUIRE(put(target, "old") && symlink(target, link) == 0 && mkfifo(fifo, 0600) == 0);
  CHECK(nr_file_write_whole(link, "new", 3, "test file", &err) == NR_OK, "%s",
        err.message);
  struct stat st;
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced");
  CHECK(!strcmp(get(target), "new"), "target: '%s'", get(target));
  int rfd = open(fifo, O_RDONLY | O_NONBLOCK); /* a reader: the writer's open returns */
  REQUIRE(rfd >= 0);
  CHECK(nr_file_write_whole(fifo, "piped", 5, "test file", &err) == NR_OK, "%s",
        err.message);
  char buf[16] = {0};
  CHECK(read(rfd, buf, sizeof buf - 1) == 5 && !strcmp(buf, "piped"), "read '%s'", buf);
  close(rfd);
  CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
  int temps;
  CHECK(fo_entries(&d, &temps) == 3 && temps == 0, "left %d temporaries", temps);
  fo_free(&d);
}

NR_TEST(file_out_refuses_a_folder_and_a_missing_folder) {
  fo_dir d;
  REQUIRE(fo_make(&d));
  nr_error err = {0};
  char missing[128];
  snprintf(missing, sizeof missing, "%s/no/such/out.bin", d.dir);
  CHECK(nr_file_write_whole(missing, "x", 1, "engine", &err) == NR_ERR_IO &&
            strstr(err.message, missing) && strstr(err.message, "engine"),
        "%s", err.message);
  CHECK(nr_file_write_whole(d.dir, "x", 1, "engine", &err) == NR_ERR_IO &&
            strstr(err.message, "directory"),
        "%s", err.message);
  CHECK(nr_file_write_whole("", "x", 1, "engine", &err) == NR_ERR_INVALID_ARGUMENT);
  int temps;
  CHECK(fo_entries(&d, &temps) == 0, "something was created");
  fo_free(&d);
}

/* An older nnroute wrote engines to "PATH.tmpPID" with fopen: a link planted there
 * had the engine written through it into whatever it named. */
NR_TEST(engine_save_ignores_a_planted_temporary_name) {
  fo_dir d;
  REQUIRE(fo_make(&d));
  char victim[128], planted[160];
  snprintf(victim, sizeof victim, "%s/victim", d.dir);
  snprintf(planted, sizeof planted, "%s.tmp%ld", d.path, (long)getpid());
  REQUIRE(put(victim, "keep") && symlink(victim, planted) == 0);
  nr_model *m = NULL;
  nr_engine *e = NULL, *back = NULL;
  nr_error err = {0};
  nr_build_options bo = {sizeof bo, NULL, 1, NR_DEVICE_CPU, NULL};
  REQUIRE(!nr_model_load(TINY_CNN, NULL, &m, &err) && !nr_engine_build(m, &bo, &e, &err),
          "%s", err.message);
  CHECK(nr_engine_save(e, d.path, &err) == NR_OK, "%s", err.message);
  CHECK(!strcmp(get(victim), "keep"), "the engine went through the planted link");
  CHECK(nr_engine_load(d.path, NULL, &back, &err) == NR_OK, "%s", err.message);
  struct stat st;
  CHECK(lstat(d.path, &st) == 0 && S_ISREG(st.st_mode), "the engine is not a file");
  nr_engine_destroy(back);
  nr_engine_destroy(e);
  nr_model_destroy(m);
  fo_free(&d);
}
