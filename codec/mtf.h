/* MTF backends: one ops table per backend, an instance per user.
 *
 * The transform every backend computes (byte-identical across backends):
 * for each block independently, the queue starts as 0, 1, ..., 255; for
 * each input byte s, output its current position r in the queue (the rank)
 * and move s to the front (positions 0..r-1 shift back by one). Decoding
 * inverts this.
 *
 * As squashfs's decompressors: a backend is a const ops table (its name,
 * init/free and the transform calls) and whoever uses it, a codec, makes an
 * instance with gmtf_mtf_init, which gives the backend its own state (the
 * GPU's context, the SIMD variant), and owns it until gmtf_mtf_free. No
 * backend keeps mutable state outside its instances. codec/ registers the
 * simd and gpu families through their plain C APIs; simd/ and gpu/ never
 * include this header. Benchmark-only hooks: mtf_bench.h. */
#ifndef GMTF_MTF_H
#define GMTF_MTF_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gmtf_mtf_backend gmtf_mtf_backend;
struct gmtf_mtf_bench_ops;

struct gmtf_mtf_backend {
    const char *name;    /* "scalar", "simd", "simd-avx2", "gpu-4by8", ... */
    const void *variant; /* which member of its family; for init */
    /* 1 when it can run on this machine. */
    int (*available)(const gmtf_mtf_backend *b);
    /* Optional: makes an instance's state in *state; 0 or a negative code.
     * NULL: the instance's state is variant. free undoes init. */
    int (*init)(const gmtf_mtf_backend *b, void **state);
    void (*free)(void *state);
    /* One block: n bytes in, n ranks out (or back). src != dst. Callable
     * from several threads at once on one instance. */
    void (*encode)(void *state, const uint8_t *src, uint8_t *dst, size_t n);
    void (*decode)(void *state, const uint8_t *src, uint8_t *dst, size_t n);
    /* Optional: a whole batch in one call (block i = src[off[i]..off[i+1])),
     * output at the same offsets in dst. Return 0 or a negative code; on
     * failure the codec falls back to the per-block calls. */
    int (*batch_encode)(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                        uint8_t *dst);
    int (*batch_decode)(void *state, const uint8_t *src, const uint64_t *off, size_t count,
                        uint8_t *dst);
    uint64_t min_batch_bytes; /* auto uses the batch hooks from this size on */
    /* Optional: host memory the batch hooks move fastest (pinned for the
     * GPU); the codec's batch staging buffers come from it. NULL = malloc. */
    void *(*host_alloc)(void *state, size_t size);
    void (*host_free)(void *state, void *p);
    /* Optional, for benchmarks only (mtf_bench.h); the codec never calls it. */
    const struct gmtf_mtf_bench_ops *bench;
};

/* An instance: a backend and its state. */
typedef struct gmtf_mtf {
    const gmtf_mtf_backend *ops;
    void *state;
} gmtf_mtf;

/* Makes an instance of backend b (which must be available). Returns 0 or
 * a negative code (-ENOMEM). */
int gmtf_mtf_init(gmtf_mtf *m, const gmtf_mtf_backend *b);
/* Releases what init made; m may be zeroed or already freed. */
void gmtf_mtf_free(gmtf_mtf *m);

static inline void gmtf_mtf_encode(const gmtf_mtf *m, const uint8_t *src, uint8_t *dst, size_t n)
{
    m->ops->encode(m->state, src, dst, n);
}

static inline void gmtf_mtf_decode(const gmtf_mtf *m, const uint8_t *src, uint8_t *dst, size_t n)
{
    m->ops->decode(m->state, src, dst, n);
}

/* The batch hooks; -ENOTSUP when the backend has none. */
static inline int gmtf_mtf_batch_encode(const gmtf_mtf *m, const uint8_t *src, const uint64_t *off,
                                        size_t count, uint8_t *dst)
{
    if (!m->ops->batch_encode)
        return -ENOTSUP;
    return m->ops->batch_encode(m->state, src, off, count, dst);
}

static inline int gmtf_mtf_batch_decode(const gmtf_mtf *m, const uint8_t *src, const uint64_t *off,
                                        size_t count, uint8_t *dst)
{
    if (!m->ops->batch_decode)
        return -ENOTSUP;
    return m->ops->batch_decode(m->state, src, off, count, dst);
}

/* The backend's host memory (malloc when it has none); free with
 * gmtf_mtf_host_free on the same instance. */
void *gmtf_mtf_host_alloc(const gmtf_mtf *m, size_t size);
void gmtf_mtf_host_free(const gmtf_mtf *m, void *p);

/* The scalar reference. */
void gmtf_mtf_encode_scalar(const uint8_t *src, uint8_t *dst, size_t n);
void gmtf_mtf_decode_scalar(const uint8_t *src, uint8_t *dst, size_t n);

/* All backends of this build, scalar first. */
size_t gmtf_mtf_backends(const gmtf_mtf_backend *const **list);
/* Finds a backend by name ("auto" or NULL = best available for per-block
 * work). Returns NULL when unknown or unavailable. */
const gmtf_mtf_backend *gmtf_mtf_backend_find(const char *name);

/* The backend whose batch hooks serve batch calls for a codec created with
 * that name: the named one when it has hooks; for auto, the best available
 * backend with hooks (the GPU); NULL when none. */
const gmtf_mtf_backend *gmtf_mtf_batch_backend(const char *name, const gmtf_mtf_backend *chosen);

#endif
