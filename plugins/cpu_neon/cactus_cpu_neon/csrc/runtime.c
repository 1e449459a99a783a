/* Threads and build facts.
 *
 * cn_parallel_for runs fn over [0, n) on cn_threads threads.  The default is a
 * small pool of POSIX threads: each thread works through its own contiguous
 * share of the range and then steals small pieces from the others' tails
 * (below), workers spin briefly on the job ticket
 * (back-to-back kernels, hundreds per decode step, start with no system call)
 * and then sleep on a condition variable.  One job runs on the pool at a time;
 * a call made while the pool is busy (another Python thread) runs on its own
 * thread instead.  Built with CACTUS_OPENMP=1, an OpenMP parallel region with
 * one contiguous range per thread is used instead. */
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
#include <sched.h>

int cn_threading(void) { return 2; }

#define MAX_WORKERS 63
#define SPINS 200000        /* ~0.1-0.3 ms: a decode step calls in every few microseconds */
#define PIECES_PER_THREAD 16 /* a thread's share, cut so that stealing its tail costs little */

/* The job on offer is described by one 64-bit ticket: generation (24 bits),
 * workers allowed to join (8) and piece count (16).  The range is cut into
 * pieces at fixed boundaries (n * i / pieces: which thread runs a piece never
 * changes a result), and each thread owns a contiguous run of them, which it
 * works through front to back: one sequential stream per thread and region,
 * the access pattern the hardware prefetcher follows best (the previous
 * scheme dealt four chunks per thread from one counter, so each thread's
 * chunks were scattered and each one started a new stream).  A thread whose
 * run is done takes the back half of the run with the most left as its own
 * (again a forward stream), so the region's tail is one small piece, and a
 * worker that the OS has descheduled (a busy machine) never holds the caller
 * up: its run is taken over half by half, where a fork-join region would wait
 * for it to run.  Claims are
 * compare-and-swaps on a run's word (generation tag, front, back); a job's
 * fields (fn, ctx, n) cannot change while any of its pieces is unfinished,
 * so whoever claimed one may read them. */
static struct {
    pthread_mutex_t lock, busy;
    pthread_cond_t wake;
    pthread_t threads[MAX_WORKERS];
    int started;
    uint64_t ticket;
    int64_t done;    /* pieces finished */
    int sleepers;    /* workers waiting on wake */
    cn_range_fn fn;
    const void *ctx;
    int64_t n;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

/* Thread s's run of pieces: tag (16 bits of the generation) << 48 | front << 24 | back. */
static struct {
    uint64_t v;
    char pad[56]; /* one cache line each: owners claim without disturbing each other */
} runs[MAX_WORKERS + 1];

CN_INLINE void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

#define TICKET_GEN(t) ((uint32_t)((t) >> 40))
#define TICKET_WORKERS(t) ((int)((t) >> 32) & 0xff)
#define RUN_TAG(v) ((uint32_t)((v) >> 48))
#define RUN_FRONT(v) ((uint32_t)((v) >> 24) & 0xffffffu)
#define RUN_BACK(v) ((uint32_t)(v) & 0xffffffu)

/* Run pieces of job generation gen as thread slot (0: the caller) until none is left. */
static void run_chunks(uint32_t gen, int slot) {
    const uint64_t t = __atomic_load_n(&pool.ticket, __ATOMIC_ACQUIRE);
    if (TICKET_GEN(t) != gen) return;
    const int nt = TICKET_WORKERS(t) + 1;
    const uint32_t pieces = (uint32_t)(t >> 16) & 0xffffu, tag = gen & 0xffffu;
    for (;;) {
        uint64_t v = __atomic_load_n(&runs[slot].v, __ATOMIC_ACQUIRE);
        int64_t piece;
        if (RUN_TAG(v) == tag && RUN_FRONT(v) < RUN_BACK(v)) { /* the front of our own run */
            if (!__atomic_compare_exchange_n(&runs[slot].v, &v, v + (1ull << 24), 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                continue;
            piece = RUN_FRONT(v);
        } else { /* the back half of the run with the most left becomes ours */
            int victim = -1;
            uint32_t most = 0;
            for (int s = 0; s < nt; s++) {
                const uint64_t w = __atomic_load_n(&runs[s].v, __ATOMIC_ACQUIRE);
                if (RUN_TAG(w) == tag && RUN_BACK(w) > RUN_FRONT(w) && RUN_BACK(w) - RUN_FRONT(w) > most)
                    most = RUN_BACK(w) - RUN_FRONT(w), victim = s, v = w;
            }
            if (victim < 0) return;
            const uint64_t back = RUN_BACK(v), mid = back - (most + 1) / 2; /* the victim keeps [front, mid) */
            if (!__atomic_compare_exchange_n(&runs[victim].v, &v, (v & ~0xffffffull) | mid, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                continue;
            piece = (int64_t)mid; /* run it now, the rest from the front of our run */
            /* Our run is empty, so no thief touches it: a plain store publishes the stolen part. */
            __atomic_store_n(&runs[slot].v, (uint64_t)tag << 48 | (uint64_t)(piece + 1) << 24 | back, __ATOMIC_RELEASE);
        }
        const int64_t n = pool.n, begin = n * piece / pieces, end = n * (piece + 1) / pieces;
        if (begin < end) pool.fn(pool.ctx, begin, end);
        __atomic_fetch_add(&pool.done, 1, __ATOMIC_RELEASE);
    }
}

static void *worker(void *arg) {
    const int index = (int)(intptr_t)arg; /* joins jobs that allow more than index workers */
    uint32_t seen = 0;
    for (;;) {
        uint64_t t = __atomic_load_n(&pool.ticket, __ATOMIC_ACQUIRE);
        for (int s = 0; s < SPINS && TICKET_GEN(t) == seen; s++) {
            cpu_relax();
            t = __atomic_load_n(&pool.ticket, __ATOMIC_ACQUIRE);
        }
        if (TICKET_GEN(t) == seen) {
            pthread_mutex_lock(&pool.lock);
            __atomic_fetch_add(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
            while (TICKET_GEN(t = __atomic_load_n(&pool.ticket, __ATOMIC_SEQ_CST)) == seen)
                pthread_cond_wait(&pool.wake, &pool.lock);
            __atomic_fetch_sub(&pool.sleepers, 1, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = TICKET_GEN(t);
        if (index < TICKET_WORKERS(t)) run_chunks(seen, index + 1);
    }
    return NULL;
}

/* A forked child has none of the parent's workers: start afresh. */
static void pool_after_fork(void) {
    pthread_mutex_init(&pool.lock, NULL);
    pthread_mutex_init(&pool.busy, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pool.started = 0;
    pool.sleepers = 0;
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
        if (pthread_create(&pool.threads[pool.started], NULL, worker, (void *)(intptr_t)pool.started)) break;
        pthread_detach(pool.threads[pool.started]);
        pool.started++;
    }
    nt = CN_MIN(nt, pool.started + 1);
    const uint64_t chunks = (uint64_t)CN_MIN(n, (int64_t)nt * PIECES_PER_THREAD);
    const uint32_t gen = (TICKET_GEN(pool.ticket) + 1) & 0xffffffu;
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    __atomic_store_n(&pool.done, 0, __ATOMIC_RELAXED);
    for (int s = 0; s < nt; s++) /* published by the ticket's store below */
        __atomic_store_n(&runs[s].v, (uint64_t)(gen & 0xffffu) << 48 | (chunks * s / nt) << 24 | chunks * (s + 1) / nt,
                         __ATOMIC_RELAXED);
    const uint64_t ticket = (uint64_t)gen << 40 | (uint64_t)(nt - 1) << 32 | chunks << 16;
    __atomic_store_n(&pool.ticket, ticket, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&pool.sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    run_chunks(gen, 0);
    /* Only pieces a worker has claimed remain; if that worker lost its core,
     * yield so it can finish on ours. */
    for (int s = 0; __atomic_load_n(&pool.done, __ATOMIC_ACQUIRE) < (int64_t)chunks; s++) {
        if (s < 4096) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&pool.busy);
}

#else /* Windows without OpenMP: single-threaded */

int cn_threading(void) { return 0; }

void cn_parallel_for(int64_t n, int64_t work, cn_range_fn fn, const void *ctx) {
    (void)work;
    if (n > 0) fn(ctx, 0, n);
}

#endif

void cn_multi_range_run(const void *c, int64_t u0, int64_t u1) {
    const cn_multi_range *m = c;
    int64_t start = 0;
    for (int i = 0; i < m->n; start = m->end[i++]) {
        const int64_t lo = CN_MAX(u0, start), hi = CN_MIN(u1, m->end[i]);
        if (lo < hi) m->fn[i](m->ctx[i], lo - start, hi - start);
    }
}
