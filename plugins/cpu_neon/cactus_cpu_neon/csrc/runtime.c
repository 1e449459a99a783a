/* Threads and build facts.
 *
 * cn_parallel_for splits [0, n) into one contiguous range per thread.  With
 * OpenMP (-fopenmp) it is one parallel region.  Without it (Apple clang has
 * no OpenMP unless libomp is installed) a small pool of POSIX threads does the
 * same: workers spin briefly on a generation counter, so back-to-back kernels
 * (a decode step runs hundreds) start with no system call, then sleep on a
 * condition variable.  One job runs on the pool at a time; a call made while
 * the pool is busy (another Python thread) runs on its own thread instead. */
#include "neon_common.h"

int cn_threads = 1;

void cn_set_threads(int n) { cn_threads = n > 0 ? n : 1; }
int cn_get_threads(void) { return cn_threads; }
int cn_native_neon(void) { return CN_NATIVE; }

#if defined(_OPENMP)

int cn_threading(void) { return 1; }

void cn_parallel_for(int64_t n, int64_t work, cn_range_fn fn, const void *ctx) {
    int nt = (int)CN_MIN((int64_t)cn_threads, n);
    if (nt <= 1 || work < CN_PAR_MIN_WORK) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
        const int64_t begin = n * tid / nth, end = n * (tid + 1) / nth;
        if (begin < end) fn(ctx, begin, end);
    }
}

#elif !defined(_WIN32)

#include <pthread.h>

int cn_threading(void) { return 2; }

#define MAX_WORKERS 63
#define SPINS 20000

static struct {
    pthread_mutex_t lock, busy;
    pthread_cond_t wake, done;
    pthread_t threads[MAX_WORKERS];
    int started;
    uint64_t gen;  /* bumped once per job; workers watch it */
    int pending;   /* participating workers not yet finished */
    cn_range_fn fn;
    const void *ctx;
    int64_t n;
    int parts;     /* the caller is part 0, worker w is part w + 1 */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
          PTHREAD_COND_INITIALIZER};

static void *worker(void *arg) {
    const int part = (int)(intptr_t)arg + 1;
    uint64_t seen = 0;
    for (;;) {
        for (int s = 0; s < SPINS && __atomic_load_n(&pool.gen, __ATOMIC_ACQUIRE) == seen; s++) {
        }
        pthread_mutex_lock(&pool.lock);
        while (pool.gen == seen) pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.gen;
        const cn_range_fn fn = pool.fn;
        const void *ctx = pool.ctx;
        const int64_t n = pool.n;
        const int parts = pool.parts;
        pthread_mutex_unlock(&pool.lock);
        if (part >= parts) continue;
        const int64_t begin = n * part / parts, end = n * (part + 1) / parts;
        if (begin < end) fn(ctx, begin, end);
        pthread_mutex_lock(&pool.lock);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
        pthread_mutex_unlock(&pool.lock);
    }
    return NULL;
}

/* A forked child has none of the parent's workers: start afresh. */
static void pool_after_fork(void) {
    pthread_mutex_init(&pool.lock, NULL);
    pthread_mutex_init(&pool.busy, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.started = 0;
    pool.pending = 0;
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, pool_after_fork); }

void cn_parallel_for(int64_t n, int64_t work, cn_range_fn fn, const void *ctx) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int nt = (int)CN_MIN((int64_t)CN_MIN(cn_threads, MAX_WORKERS + 1), n);
    if (nt <= 1 || work < CN_PAR_MIN_WORK || pthread_mutex_trylock(&pool.busy) != 0) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    pthread_once(&once, register_fork_handler);
    while (pool.started < nt - 1) { /* workers are started on first need and kept */
        if (pthread_create(&pool.threads[pool.started], NULL, worker, (void *)(intptr_t)pool.started))
            break;
        pthread_detach(pool.threads[pool.started]);
        pool.started++;
    }
    nt = CN_MIN(nt, pool.started + 1);
    pthread_mutex_lock(&pool.lock);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.parts = nt;
    pool.pending = nt - 1;
    __atomic_store_n(&pool.gen, pool.gen + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    const int64_t end = n / nt;
    if (end > 0) fn(ctx, 0, end);
    pthread_mutex_lock(&pool.lock);
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.busy);
}

#else /* Windows without OpenMP: single-threaded */

int cn_threading(void) { return 0; }

void cn_parallel_for(int64_t n, int64_t work, cn_range_fn fn, const void *ctx) {
    (void)work;
    if (n > 0) fn(ctx, 0, n);
}

#endif
