/* test_threadpool.c - the thread pool: every index visited exactly once, sums over
 * ranges, grain and max_threads honoured, many back-to-back calls (the dispatch
 * pattern of a network's steps), the NULL pool, and sizes. */
#include "util/threadpool.h"
#include "unit.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct visit_arg {
  _Atomic int *count;
  _Atomic int64_t sum;
  _Atomic int max_thread;
  _Atomic int64_t min_chunk;
  int64_t n;
} visit_arg;

static void visit(void *p, int64_t b, int64_t e, int thread) {
  visit_arg *a = p;
  int64_t s = 0;
  for (int64_t i = b; i < e; i++) {
    atomic_fetch_add_explicit(&a->count[i], 1, memory_order_relaxed);
    s += i;
  }
  atomic_fetch_add(&a->sum, s);
  int m = atomic_load(&a->max_thread);
  while (thread > m && !atomic_compare_exchange_weak(&a->max_thread, &m, thread)) {
  }
  /* The last chunk may be short; record only full-range chunks' sizes. */
  int64_t len = e - b, cur = atomic_load(&a->min_chunk);
  while (e < a->n && len < cur && !atomic_compare_exchange_weak(&a->min_chunk, &cur, len)) {
  }
}

/* Runs one parallel_for and checks coverage; returns the highest thread index seen. */
static int check_cover(nr_test_state *t, nr_threadpool *pool, int64_t n, int64_t grain,
                       int max_threads) {
  visit_arg a = {calloc((size_t)n + 1, sizeof(_Atomic int)), 0, -1, INT64_MAX, n};
  if (!a.count) {
    CHECK(0, "out of memory");
    return -1;
  }
  nr_parallel_for(pool, n, grain, max_threads, visit, &a);
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (atomic_load(&a.count[i]) != 1)
      bad = i;
  CHECK(bad < 0, "n=%lld grain=%lld max=%d: index %lld visited %d times", (long long)n,
        (long long)grain, max_threads, (long long)bad,
        bad < 0 ? 1 : atomic_load(&a.count[bad]));
  CHECK(atomic_load(&a.sum) == n * (n - 1) / 2, "n=%lld: sum %lld", (long long)n,
        (long long)atomic_load(&a.sum));
  CHECK(atomic_load(&a.min_chunk) >= (grain < 1 ? 1 : grain) ||
            atomic_load(&a.min_chunk) == INT64_MAX,
        "n=%lld grain=%lld: a chunk of %lld", (long long)n, (long long)grain,
        (long long)atomic_load(&a.min_chunk));
  free(a.count);
  return atomic_load(&a.max_thread);
}

NR_TEST(threadpool_covers_every_index_once) {
  nr_threadpool *pool = nr_threadpool_create(4);
  REQUIRE(pool);
  CHECK(nr_threadpool_size(pool) == 4);
  static const int64_t ns[] = {1, 2, 3, 7, 64, 1000, 4097, 100003};
  static const int64_t grains[] = {0, 1, 5, 64, 1000};
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
    for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
      for (int m = 0; m <= 5; m++) {
        int top = check_cover(t, pool, ns[i], grains[g], m);
        CHECK(top < (m ? m : 4), "max_threads %d: thread index %d used", m, top);
      }
  nr_threadpool_destroy(pool);
}

NR_TEST(threadpool_null_pool_and_sizes) {
  CHECK(nr_threadpool_size(NULL) == 1);
  CHECK(check_cover(t, NULL, 1000, 1, 0) == 0);
  nr_parallel_for(NULL, 0, 1, 0, visit, NULL); /* n == 0: fn is never called */
  nr_threadpool_destroy(NULL);
  nr_threadpool *one = nr_threadpool_create(1);
  REQUIRE(one);
  CHECK(nr_threadpool_size(one) == 1);
  CHECK(check_cover(t, one, 5000, 1, 0) == 0);
  nr_threadpool_destroy(one);
  nr_threadpool *all = nr_threadpool_create(0);
  REQUIRE(all);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  CHECK(nr_threadpool_size(all) == (cpus > 0 ? cpus : 1), "size %d, cpus %ld",
        nr_threadpool_size(all), cpus);
  nr_threadpool_destroy(all);
}

static void add_range(void *p, int64_t b, int64_t e, int thread) {
  _Atomic int64_t *sum = p;
  atomic_fetch_add(sum, e - b);
}

/* Back-to-back small jobs with varying participant counts: the case that breaks a
 * pool whose workers misread which job they belong to. */
NR_TEST(threadpool_many_repeated_calls) {
  nr_threadpool *pool = nr_threadpool_create(3);
  REQUIRE(pool);
  _Atomic int64_t sum = 0;
  int64_t want = 0;
  for (int i = 0; i < 20000; i++) {
    int64_t n = 1 + i % 17;
    nr_parallel_for(pool, n, 1, 1 + i % 4, add_range, &sum);
    want += n;
  }
  CHECK(atomic_load(&sum) == want, "sum %lld, want %lld", (long long)atomic_load(&sum),
        (long long)want);
  /* And after the workers have gone to sleep. */
  usleep(20000);
  atomic_store(&sum, 0);
  nr_parallel_for(pool, 100, 1, 0, add_range, &sum);
  CHECK(atomic_load(&sum) == 100);
  nr_threadpool_destroy(pool);
}

NR_TEST(threadpool_create_destroy_repeatedly) {
  for (int i = 0; i < 50; i++) {
    nr_threadpool *pool = nr_threadpool_create(1 + i % 4);
    REQUIRE(pool);
    if (i % 2)
      CHECK(check_cover(t, pool, 257, 1, 0) >= 0);
    nr_threadpool_destroy(pool);
  }
}
