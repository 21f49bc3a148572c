/* extlib.c - thread counts for the oneDNN and OpenBLAS steps (contract: extlib.h). */
#include "kernels/cpu/extlib.h"

#include "util/threadpool.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

void openblas_set_num_threads(int n); /* libopenblas; not in every cblas.h */
int openblas_get_num_threads(void);

int nr_extlib_threads(const nr_exec_args *a) {
  int n = nr_threadpool_size(a->pool);
  int t = a->step->threads;
  return t > 0 && t < n ? t : n;
}

int nr_extlib_build_threads(const nr_tactic_ctx *c) {
  int n = nr_threads_or_online(c->threads);
  int t = c->step ? c->step->threads : 0;
  return t > 0 && t < n ? t : n;
}

static void (*omp_set)(int);
static int (*omp_max)(void);
static pthread_once_t omp_once = PTHREAD_ONCE_INIT;

static void find_omp(void) {
  void *set = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  void *get = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
  if (set && get) {
    memcpy(&omp_set, &set, sizeof set);
    memcpy(&omp_max, &get, sizeof get);
  }
}

int nr_extlib_team(int n) {
  pthread_once(&omp_once, find_omp);
  if (!omp_set || n < 1)
    return 0;
  int old = omp_max();
  if (old != n)
    omp_set(n);
  return old;
}

void nr_extlib_blas_threads(int n) {
  if (n >= 1 && openblas_get_num_threads() != n)
    openblas_set_num_threads(n);
}
