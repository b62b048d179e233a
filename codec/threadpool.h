/* A small fixed thread pool for batches: run fn(ctx, i, worker) for every
 * i in [0, count), the caller working too. Workers are numbered 0..n-1 so
 * each can use its own workspace. */
#ifndef GMTF_THREADPOOL_H
#define GMTF_THREADPOOL_H

#include <stddef.h>

typedef struct gmtf_pool gmtf_pool;
typedef void (*gmtf_pool_fn)(void *ctx, size_t i, unsigned worker);

/* Starts threads-1 helper threads (the caller is worker 0). */
int gmtf_pool_create(gmtf_pool **out, unsigned threads);
void gmtf_pool_destroy(gmtf_pool *p);
/* Runs fn over [0, count) and returns when all are done. One run at a
 * time per pool (callers serialise). */
void gmtf_pool_run(gmtf_pool *p, gmtf_pool_fn fn, void *ctx, size_t count);

#endif
