/* threadpool.c - persistent workers for nr_parallel_for.
 *
 * Key decision: a job is finished when its chunks are, not when every worker has
 * checked in. One atomic word packs the job's generation (high 32 bits) and its next
 * unclaimed chunk (low 32 bits); a thread claims a chunk with a compare-and-swap that
 * also proves the job is still current, so a worker that wakes late (descheduled on a
 * busy machine, or still asleep) finds nothing to claim and the caller, who claims
 * chunks too, never waits for it. Job records alternate between two slots, so the
 * caller can fill the next job while a late worker still reads the last one; every
 * field it reads before a successful claim is only trusted once the claim succeeds.
 * Idle workers spin briefly (a network's next step usually comes within
 * microseconds), then sleep on a condition variable; the caller takes the mutex only
 * when someone sleeps.
 *
 * nr_parallel_parts jobs ("owned" parts) use the low word as a bitmask of claimed
 * parts instead of a counter, in the same compare-and-swap, so a thread can claim its
 * own part first and any other part only after that: thread i reads the same slice of
 * memory call after call (it stays in its core's L2), yet nobody waits for a late
 * thread's part. */
#include "util/threadpool.h"

#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Spin budget before sleeping: pauses, then yields (which lets an oversubscribed
 * machine run the thread that holds the work). */
#define SPIN_PAUSES 4000
#define SPIN_YIELDS 16
/* Chunks handed out per participating thread, for load balance. */
#define CHUNKS_PER_THREAD 4

#define GEN(w) ((uint32_t)((w) >> 32))

/* Fields are atomics (relaxed) because a late worker may read a slot while the caller
 * refills it; it discards what it read unless its claim on the job succeeds. */
typedef struct job {
  _Atomic(nr_task_fn) fn;
  _Atomic(void *) arg;
  _Atomic int64_t n, chunk;
  _Atomic uint32_t n_chunks;
  _Atomic int threads; /* thread indices allowed to claim: 0 .. threads-1 */
  _Atomic uint32_t done; /* chunks finished */
  _Atomic bool owned;    /* chunk i belongs to thread i; the low word is a bitmask */
} job;

typedef struct worker {
  struct nr_threadpool *pool;
  int index;
  pthread_t tid;
} worker;

struct nr_threadpool {
  int n; /* threads including the caller */
  worker *workers; /* n - 1 */
  pthread_mutex_t mu;
  pthread_cond_t wake; /* workers wait for a new job */
  pthread_cond_t done; /* the caller waits for the last chunk */
  _Atomic uint64_t word; /* generation << 32 | next chunk */
  _Atomic int sleepers;
  _Atomic bool caller_sleeping;
  _Atomic bool stop;
  job jobs[2]; /* generation g uses jobs[g & 1] */
};

#define RELAXED memory_order_relaxed

/* Runs chunk c of job j (claimed), then counts it done; the last chunk wakes a caller
 * that went to sleep waiting for it. */
static void run_chunk(nr_threadpool *p, job *j, uint32_t c, uint32_t n_chunks, int thread) {
  int64_t chunk = atomic_load_explicit(&j->chunk, RELAXED);
  int64_t n = atomic_load_explicit(&j->n, RELAXED);
  int64_t b = (int64_t)c * chunk, e = b + chunk < n ? b + chunk : n;
  assert(c < n_chunks && b < e); /* only claimed chunks of the current job run */
  atomic_load_explicit(&j->fn, RELAXED)(atomic_load_explicit(&j->arg, RELAXED), b, e,
                                        thread);
  /* seq_cst: pairs with the caller's caller_sleeping store in wait_done. */
  if (atomic_fetch_add(&j->done, 1) + 1 == n_chunks && thread != 0 &&
      atomic_load(&p->caller_sleeping)) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->mu);
  }
}

/* Owned parts: claims this thread's own part if it is still open, then the lowest
 * open one, until every part is claimed. */
static void work_owned(nr_threadpool *p, uint32_t gen, int thread, uint64_t w) {
  job *j = &p->jobs[gen & 1];
  for (;;) {
    uint32_t n_parts = atomic_load_explicit(&j->n_chunks, RELAXED);
    /* n_parts is trusted only if gen is current (checked here and by the claim). */
    if (GEN(w) != gen || n_parts > NR_PARALLEL_PARTS_MAX)
      return;
    uint32_t all = n_parts == 32 ? UINT32_MAX : (1u << n_parts) - 1;
    uint32_t open = all & ~(uint32_t)w;
    if (!open)
      return;
    uint32_t c = thread < (int)n_parts && (open >> thread & 1) ? (uint32_t)thread
                                                                : (uint32_t)__builtin_ctz(open);
    uint64_t claimed = w | (uint64_t)1 << c;
    if (!atomic_compare_exchange_weak(&p->word, &w, claimed))
      continue; /* w now holds the current word */
    run_chunk(p, j, c, n_parts, thread);
    w = claimed;
  }
}

/* Claims and runs chunks of generation gen until none is left. */
static void work(nr_threadpool *p, uint32_t gen, int thread) {
  job *j = &p->jobs[gen & 1];
  uint64_t w = atomic_load(&p->word);
  /* Read after seeing gen in the word: gen's mode, or a later job's (then gen is over
   * and no claim below can succeed). */
  if (GEN(w) == gen && atomic_load_explicit(&j->owned, RELAXED)) {
    work_owned(p, gen, thread, w);
    return;
  }
  for (;;) {
    uint32_t n_chunks = atomic_load_explicit(&j->n_chunks, RELAXED);
    if (GEN(w) != gen || (uint32_t)w >= n_chunks)
      return;
    if (!atomic_compare_exchange_weak(&p->word, &w, w + 1))
      continue; /* w now holds the current word */
    /* The claim succeeded: job gen is current and cannot finish before this chunk. */
    run_chunk(p, j, (uint32_t)w, n_chunks, thread);
    w++;
  }
}

/* Waits until the generation differs from seen (or stop); returns the new word. */
static uint64_t wait_for_job(nr_threadpool *p, uint32_t seen) {
  for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
    uint64_t w = atomic_load_explicit(&p->word, memory_order_acquire);
    if (GEN(w) != seen)
      return w;
    if (i < SPIN_PAUSES)
      CPU_RELAX();
    else
      sched_yield();
  }
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->sleepers, 1);
  uint64_t w;
  while (GEN(w = atomic_load(&p->word)) == seen && !atomic_load(&p->stop))
    pthread_cond_wait(&p->wake, &p->mu);
  atomic_fetch_sub(&p->sleepers, 1);
  pthread_mutex_unlock(&p->mu);
  return w;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  nr_threadpool *p = w->pool;
  uint32_t seen = 0; /* the generation before any job, even if one is published */
  for (;;) {
    seen = GEN(wait_for_job(p, seen));
    if (atomic_load(&p->stop))
      return NULL;
    if (w->index < atomic_load_explicit(&p->jobs[seen & 1].threads, RELAXED))
      work(p, seen, w->index);
  }
}

int nr_online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (n > INT_MAX ? INT_MAX : (int)n) : 1;
}

int nr_threads_or_online(int threads) {
  return threads > 0 ? threads : nr_online_cpus();
}

nr_threadpool *nr_threadpool_create(int threads) {
  threads = nr_threads_or_online(threads);
  nr_threadpool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->n = 1;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  if (threads > 1 && !(p->workers = calloc((size_t)threads - 1, sizeof *p->workers)))
    goto fail;
  for (int i = 1; i < threads; i++) {
    worker *w = &p->workers[i - 1];
    w->pool = p;
    w->index = i;
    if (pthread_create(&w->tid, NULL, worker_main, w))
      goto fail;
    p->n = i + 1;
  }
  return p;
fail:
  nr_threadpool_destroy(p);
  return NULL;
}

void nr_threadpool_destroy(nr_threadpool *p) {
  if (!p)
    return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, true);
  atomic_fetch_add(&p->word, (uint64_t)1 << 32);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 1; i < p->n; i++)
    pthread_join(p->workers[i - 1].tid, NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p->workers);
  free(p);
}

int nr_threadpool_size(const nr_threadpool *p) { return p ? p->n : 1; }

/* Waits until every chunk of j is finished (the caller has claimed its last one). */
static void wait_done(nr_threadpool *p, job *j, uint32_t n_chunks) {
  for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
    if (atomic_load_explicit(&j->done, memory_order_acquire) == n_chunks)
      return;
    if (i < SPIN_PAUSES)
      CPU_RELAX();
    else
      sched_yield();
  }
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->caller_sleeping, true);
  while (atomic_load(&j->done) != n_chunks)
    pthread_cond_wait(&p->done, &p->mu);
  atomic_store(&p->caller_sleeping, false);
  pthread_mutex_unlock(&p->mu);
}

/* Publishes a job of n_chunks chunks of `chunk` indices (of n) for thread indices
 * 0 .. threads-1, works on it and returns when it is done. */
static void run_job(nr_threadpool *p, nr_task_fn fn, void *arg, int64_t n, int64_t chunk,
                    uint32_t n_chunks, int threads, bool owned) {
  assert(threads >= 2 && threads <= p->n && n_chunks >= 1);
  assert(!owned || (n_chunks <= NR_PARALLEL_PARTS_MAX && (int)n_chunks == threads));
  uint32_t gen = GEN(atomic_load_explicit(&p->word, RELAXED)) + 1;
  job *j = &p->jobs[gen & 1];
  atomic_store_explicit(&j->fn, fn, RELAXED);
  atomic_store_explicit(&j->arg, arg, RELAXED);
  atomic_store_explicit(&j->n, n, RELAXED);
  atomic_store_explicit(&j->chunk, chunk, RELAXED);
  atomic_store_explicit(&j->n_chunks, n_chunks, RELAXED);
  atomic_store_explicit(&j->threads, threads, RELAXED);
  atomic_store_explicit(&j->owned, owned, RELAXED);
  atomic_store_explicit(&j->done, 0, RELAXED);
  /* Publish. seq_cst pairs with the sleepers increment in wait_for_job: either the
   * worker sees the job or we see the sleeper. */
  atomic_store(&p->word, (uint64_t)gen << 32);
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  work(p, gen, 0);
  wait_done(p, j, n_chunks);
}

void nr_parallel_parts(nr_threadpool *p, int parts, nr_task_fn fn, void *arg) {
  if (parts <= 0)
    return;
  if (parts > nr_threadpool_size(p) || parts > NR_PARALLEL_PARTS_MAX) {
    nr_parallel_for(p, parts, 1, 0, fn, arg);
    return;
  }
  if (parts == 1) {
    fn(arg, 0, 1, 0);
    return;
  }
  run_job(p, fn, arg, parts, 1, (uint32_t)parts, parts, true);
}

void nr_parallel_for(nr_threadpool *p, int64_t n, int64_t grain, int max_threads,
                     nr_task_fn fn, void *arg) {
  if (n <= 0)
    return;
  if (grain < 1)
    grain = 1;
  int64_t threads = p ? p->n : 1;
  if (max_threads > 0 && max_threads < threads)
    threads = max_threads;
  int64_t by_grain = (n + grain - 1) / grain;
  if (by_grain < threads)
    threads = by_grain;
  if (threads <= 1) {
    fn(arg, 0, n, 0);
    return;
  }
  int64_t chunk = (n + threads * CHUNKS_PER_THREAD - 1) / (threads * CHUNKS_PER_THREAD);
  if (chunk < grain)
    chunk = grain;
  assert((n + chunk - 1) / chunk <= UINT32_MAX); /* chunks are counted in 32 bits */
  run_job(p, fn, arg, n, chunk, (uint32_t)((n + chunk - 1) / chunk), (int)threads, false);
}
