/* backend.c - the list of device backends this build carries, and the check that a
 * device can run here.
 *
 * Key decision: the list is decided at compile time (NR_HAVE_CUDA, set by CMake when
 * the CUDA backend is built), so a CPU-only build links no CUDA library and still
 * answers a request for a CUDA engine with a sentence rather than a link error. */
#include "backends/backend.h"
#include "util/error.h"

#include <stdio.h>

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
