/* Fixed thread pool: one job at a time, items handed out by an atomic
 * counter so uneven blocks balance themselves. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "threadpool.h"

struct gmtf_pool {
    unsigned nthreads;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t start, done;
    unsigned long generation; /* bumped per job */
    unsigned busy;            /* helpers still in the current job */
    int quit;
    gmtf_pool_fn fn;
    void *ctx;
    size_t count;
    atomic_size_t next;
};

struct pool_arg {
    gmtf_pool *p;
    unsigned worker;
};

static void pool_drain(gmtf_pool *p, unsigned worker)
{
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->count)
            return;
        p->fn(p->ctx, i, worker);
    }
}

static void *pool_main(void *arg)
{
    struct pool_arg a = *(struct pool_arg *)arg;
    free(arg);
    gmtf_pool *p = a.p;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->start, &p->lock);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        pool_drain(p, a.worker);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int gmtf_pool_create(gmtf_pool **out, unsigned threads)
{
    if (threads == 0)
        threads = 1;
    gmtf_pool *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->threads = calloc(threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return -ENOMEM;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    p->nthreads = 1;
    for (unsigned i = 1; i < threads; i++) {
        struct pool_arg *a = malloc(sizeof *a);
        if (a) {
            a->p = p;
            a->worker = i;
        }
        if (!a || pthread_create(&p->threads[i], NULL, pool_main, a) != 0) {
            free(a);
            gmtf_pool_destroy(p);
            return a ? -EAGAIN : -ENOMEM;
        }
        p->nthreads = i + 1;
    }
    p->nthreads = threads;
    *out = p;
    return 0;
}

void gmtf_pool_destroy(gmtf_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 1; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

void gmtf_pool_run(gmtf_pool *p, gmtf_pool_fn fn, void *ctx, size_t count)
{
    if (count == 0)
        return;
    if (!p || p->nthreads == 1 || count == 1) {
        for (size_t i = 0; i < count; i++)
            fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->count = count;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->busy = p->nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->lock);
    pool_drain(p, 0);
    pthread_mutex_lock(&p->lock);
    while (p->busy)
        pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}
