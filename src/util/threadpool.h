/* A fixed pool of worker threads running parallel-for loops. One thread at a time
 * may submit work; the submitting thread takes part in the loop. */
#ifndef OKV_UTIL_THREADPOOL_H
#define OKV_UTIL_THREADPOOL_H

#include "oasiskv/common.h"

typedef struct okv_threadpool okv_threadpool;
/* fn(ctx, i) for i in [0, n); called from several threads at once. */
typedef void (*okv_parallel_fn)(void *ctx, int64_t i);

enum okv_status okv_threadpool_create(int n_threads, okv_threadpool **out);
void okv_threadpool_free(okv_threadpool *tp);   /* NULL is fine */
int okv_threadpool_size(const okv_threadpool *tp);
/* Run fn for every i in [0, n) and return when all are done. Indices are handed out
 * dynamically, so uneven items balance. */
void okv_parallel_for(okv_threadpool *tp, int64_t n, okv_parallel_fn fn, void *ctx);

#endif
