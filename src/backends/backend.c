/* backend.c - the list of device backends this build carries, and the check that a
 * device can run here.
 *
 * Key decision: the list is decided at compile time (NR_HAVE_CUDA, set by CMake when
 * the CUDA backend is built), so a CPU-only build links no CUDA library and still
 * answers a request for a CUDA engine with a sentence rather than a link error. */
#include "backends/backend.h"
#include "util/error.h"

#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef NR_HAVE_CUDA
extern const nr_backend nr_backend_cuda;
#endif

const nr_backend *nr_backend_for(nr_device d) {
#ifdef NR_HAVE_CUDA
  if (d == NR_DEVICE_CUDA)
    return &nr_backend_cuda;
#endif
  (void)d;
  return NULL;
}

nr_status nr_backend_check(nr_device d, nr_error *err) {
  if (d == NR_DEVICE_CPU)
    return NR_OK;
  const nr_backend *be = nr_backend_for(d);
  if (!be && d == NR_DEVICE_CUDA)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "device cuda: this nnroute was built without "
                     "the CUDA backend (configure with -DNR_CUDA=ON on a machine where "
                     "CMake finds nvcc)");
  if (!be)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "device %d: nnroute has no backend for it",
                     (int)d);
  return be->check(err);
}

/* The child computes the fingerprint and writes the struct to a pipe; any failure
 * leaves the device fields saying so. */
void nr_fingerprint_current_isolated(nr_fingerprint *fp, nr_device d) {
  nr_fingerprint_current(fp);
  if (d == NR_DEVICE_CPU)
    return;
  fp->device = d;
  snprintf(fp->gpu, sizeof fp->gpu, "none (the fingerprint process failed)");
  int fds[2];
  if (pipe(fds))
    return;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    nr_fingerprint f;
    close(fds[0]);
    nr_fingerprint_current_for(&f, d);
    ssize_t w = write(fds[1], &f, sizeof f);
    _exit(w == (ssize_t)sizeof f ? 0 : 1);
  }
  close(fds[1]);
  nr_fingerprint got;
  size_t have = 0;
  while (pid > 0 && have < sizeof got) {
    ssize_t n = read(fds[0], (char *)&got + have, sizeof got - have);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    have += (size_t)n;
  }
  close(fds[0]);
  if (pid > 0)
    waitpid(pid, NULL, 0);
  if (have == sizeof got)
    *fp = got;
}
