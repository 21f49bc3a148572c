/* threadpool.h - the persistent thread pool steps run on.
 *
 * Workers are created once per pool and sleep between calls; nr_parallel_for hands
 * out chunks of [0, n) and returns when all are done. The calling thread works too,
 * so a pool of N threads has N-1 workers. A batch-1 mobilenet has over a hundred
 * steps, so dispatch cost matters: chunks are claimed with an atomic counter and
 * workers spin briefly before sleeping. A NULL pool runs everything on the caller. */
#ifndef NR_UTIL_THREADPOOL_H
#define NR_UTIL_THREADPOOL_H

#include <stdint.h>

typedef struct nr_threadpool nr_threadpool;

/* fn processes [begin, end) of the index space; thread is 0..threads-1. */
typedef void (*nr_task_fn)(void *arg, int64_t begin, int64_t end, int thread);

/* The online CPUs (at least 1): what a thread count <= 0 means everywhere. */
int nr_online_cpus(void);
/* threads when positive, else nr_online_cpus(). */
int nr_threads_or_online(int threads);

/* threads <= 0: the number of online CPUs. NULL on failure. */
nr_threadpool *nr_threadpool_create(int threads);
void nr_threadpool_destroy(nr_threadpool *pool);
int nr_threadpool_size(const nr_threadpool *pool); /* 1 for NULL */
/* Runs fn over [0, n) in chunks of at least grain, on at most max_threads threads
 * (0 = all). Not reentrant on one pool: a task must not call it on the same pool. */
void nr_parallel_for(nr_threadpool *pool, int64_t n, int64_t grain, int max_threads,
                     nr_task_fn fn, void *arg);
/* Runs fn(arg, i, i + 1, thread) once for each part i of [0, parts): part i on thread
 * i whenever thread i arrives in time, so a part that reads the same data on every
 * call (a column slice of a layer's weights) finds it in the same core's cache call
 * after call. A thread that has finished its own part takes the parts whose threads
 * have not started (a worker asleep or descheduled): the call never waits for a late
 * thread, but then that slice is read on another core. parts above the pool's size or
 * NR_PARALLEL_PARTS_MAX run as nr_parallel_for(pool, parts, 1, 0, ...). */
#define NR_PARALLEL_PARTS_MAX 32
void nr_parallel_parts(nr_threadpool *pool, int parts, nr_task_fn fn, void *arg);

#endif
