/* extlib.h - the thread count of the steps that external libraries run: oneDNN
 * (Debian's libdnnl is its OpenMP build) and OpenBLAS (its pthreads build). Such a
 * step keeps to the same limit as nnroute's own kernels: the step's threads within the
 * context's pool.
 *
 * Both libraries default to every online CPU. Before this, a --threads 1 engine whose
 * GEMMs ran on onednn_matmul used both cores of a 2-core machine (bert_tiny: 6.6 s of
 * CPU in 3.5 s of wall time), and at 2 threads oneDNN's OpenMP worker and the pool's
 * worker took turns on the second core.
 *
 * oneDNN fixes a primitive's thread count when it is created (from the calling
 * thread's OpenMP team size) and asks for that many threads when it runs, so the
 * team size is set around creation and execution both, and the primitive caches key
 * on it. The OpenMP functions are looked up at run time (nnroute links no OpenMP
 * itself; libdnnl brings it). */
#ifndef NR_KERNELS_CPU_EXTLIB_H
#define NR_KERNELS_CPU_EXTLIB_H

#include "plan/tactic.h"

/* Threads a step may use at run time: step->threads (0 = all) within the pool. */
int nr_extlib_threads(const nr_exec_args *a);
/* The same at build time, for the engine's thread count (0: the online CPUs). */
int nr_extlib_build_threads(const nr_tactic_ctx *c);

/* Sets the calling thread's OpenMP team size to n; returns the previous size, or 0
 * when no OpenMP runtime is loaded or n < 1 (nothing set). Restore with the result:
 * nr_extlib_team(0) is a no-op. */
int nr_extlib_team(int n);

/* OpenBLAS's thread count (process-wide), set only when it differs. */
void nr_extlib_blas_threads(int n);

#endif
