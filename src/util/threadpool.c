/* Parallel-for over a fixed pool: a job hands out indices through an atomic counter.
 * Between jobs the workers first spin a short while on the job counter (a decode step
 * runs hundreds of small jobs back to back, and a futex wake-up and sleep per job cost
 * as much as the job), then sleep on a condition variable; the caller likewise spins
 * before it sleeps waiting for the workers to finish. A job is announced with a
 * wake-up only when some worker sleeps (n_sleeping; both sides use sequentially
 * consistent atomics, and a worker re-checks the job counter under the mutex after
 * counting itself asleep, so no announcement is lost). */
#include "util/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* iterations of CPU_RELAX before sleeping (~0.1-0.3 ms) */
#define SPIN_ITERS 4096

struct okv_threadpool {
    int n_threads;              /* including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    pthread_cond_t cv_done;
    _Atomic uint64_t generation;   /* bumped for each job */
    _Atomic int n_busy;            /* workers still in the current job */
    _Atomic int n_sleeping;        /* workers in (or entering) cv_work */
    _Atomic bool stop;
    okv_parallel_fn fn;
    void *ctx;
    int64_t n;
    _Atomic int64_t next;
};

static void run_items(okv_threadpool *tp)
{
    for (;;) {
        int64_t i = atomic_fetch_add(&tp->next, 1);
        if (i >= tp->n)
            break;
        tp->fn(tp->ctx, i);
    }
}

static void *worker(void *arg)
{
    okv_threadpool *tp = arg;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load(&tp->generation);
        for (int s = 0; g == seen && !atomic_load(&tp->stop) && s < SPIN_ITERS; s++) {
            CPU_RELAX();
            g = atomic_load(&tp->generation);
        }
        if (g == seen && !atomic_load(&tp->stop)) {
            pthread_mutex_lock(&tp->mu);
            atomic_fetch_add(&tp->n_sleeping, 1);
            while (!atomic_load(&tp->stop) && (g = atomic_load(&tp->generation)) == seen)
                pthread_cond_wait(&tp->cv_work, &tp->mu);
            atomic_fetch_sub(&tp->n_sleeping, 1);
            pthread_mutex_unlock(&tp->mu);
        }
        if (atomic_load(&tp->stop))
            break;
        seen = g;
        run_items(tp);
        if (atomic_fetch_sub(&tp->n_busy, 1) == 1) {
            pthread_mutex_lock(&tp->mu);
            pthread_cond_signal(&tp->cv_done);
            pthread_mutex_unlock(&tp->mu);
        }
    }
    return NULL;
}

enum okv_status okv_threadpool_create(int n_threads, okv_threadpool **out)
{
    *out = NULL;
    if (n_threads < 1)
        n_threads = 1;
    okv_threadpool *tp = okv_calloc(1, sizeof *tp, OKV_TAG_BACKEND);
    if (!tp)
        return okv_set_error(OKV_ERR_NO_MEMORY, "thread pool: out of memory");
    tp->n_threads = n_threads;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv_work, NULL);
    pthread_cond_init(&tp->cv_done, NULL);
    atomic_init(&tp->generation, 0);
    atomic_init(&tp->n_busy, 0);
    atomic_init(&tp->n_sleeping, 0);
    atomic_init(&tp->stop, false);
    atomic_init(&tp->next, 0);
    if (n_threads > 1) {
        tp->threads = okv_calloc((size_t)n_threads - 1, sizeof(pthread_t), OKV_TAG_BACKEND);
        if (!tp->threads) {
            okv_threadpool_free(tp);
            return okv_set_error(OKV_ERR_NO_MEMORY, "thread pool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&tp->threads[i], NULL, worker, tp) != 0) {
                tp->n_threads = i + 1;
                okv_threadpool_free(tp);
                return okv_set_error(OKV_ERR_NO_MEMORY, "thread pool: cannot start thread %d", i);
            }
        }
    }
    *out = tp;
    return OKV_OK;
}

void okv_threadpool_free(okv_threadpool *tp)
{
    if (!tp)
        return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, true);
    pthread_cond_broadcast(&tp->cv_work);
    pthread_mutex_unlock(&tp->mu);
    if (tp->threads)
        for (int i = 0; i < tp->n_threads - 1; i++)
            pthread_join(tp->threads[i], NULL);
    okv_free(tp->threads);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv_work);
    pthread_cond_destroy(&tp->cv_done);
    okv_free(tp);
}

int okv_threadpool_size(const okv_threadpool *tp) { return tp ? tp->n_threads : 1; }

void okv_parallel_for(okv_threadpool *tp, int64_t n, okv_parallel_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (!tp || tp->n_threads == 1 || n == 1) {
        for (int64_t i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    /* every worker finished the previous job (the caller waited for n_busy == 0), so the
     * job's fields are the caller's to write; the generation bump publishes them */
    tp->fn = fn;
    tp->ctx = ctx;
    tp->n = n;
    atomic_store(&tp->next, 0);
    atomic_store(&tp->n_busy, tp->n_threads - 1);
    atomic_fetch_add(&tp->generation, 1);
    if (atomic_load(&tp->n_sleeping) > 0) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv_work);
        pthread_mutex_unlock(&tp->mu);
    }
    run_items(tp);
    for (int s = 0; atomic_load(&tp->n_busy) > 0 && s < SPIN_ITERS; s++)
        CPU_RELAX();
    if (atomic_load(&tp->n_busy) > 0) {
        pthread_mutex_lock(&tp->mu);
        while (atomic_load(&tp->n_busy) > 0)
            pthread_cond_wait(&tp->cv_done, &tp->mu);
        pthread_mutex_unlock(&tp->mu);
    }
}
