/* Parallel-for over a fixed pool: workers sleep on a condition variable between
 * jobs; a job hands out indices through an atomic counter. */
#include "util/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>

struct okv_threadpool {
    int n_threads;              /* including the caller */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    pthread_cond_t cv_done;
    uint64_t generation;        /* bumped for each job */
    int n_busy;                 /* workers still in the current job */
    bool stop;
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
    pthread_mutex_lock(&tp->mu);
    for (;;) {
        while (!tp->stop && tp->generation == seen)
            pthread_cond_wait(&tp->cv_work, &tp->mu);
        if (tp->stop)
            break;
        seen = tp->generation;
        pthread_mutex_unlock(&tp->mu);
        run_items(tp);
        pthread_mutex_lock(&tp->mu);
        if (--tp->n_busy == 0)
            pthread_cond_signal(&tp->cv_done);
    }
    pthread_mutex_unlock(&tp->mu);
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
    tp->stop = true;
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
    pthread_mutex_lock(&tp->mu);
    tp->fn = fn;
    tp->ctx = ctx;
    tp->n = n;
    atomic_store(&tp->next, 0);
    tp->n_busy = tp->n_threads - 1;
    tp->generation++;
    pthread_cond_broadcast(&tp->cv_work);
    pthread_mutex_unlock(&tp->mu);
    run_items(tp);
    pthread_mutex_lock(&tp->mu);
    while (tp->n_busy > 0)
        pthread_cond_wait(&tp->cv_done, &tp->mu);
    pthread_mutex_unlock(&tp->mu);
}
