/* MTF backends behind one ops table.
 *
 * The transform every backend computes (byte-identical across backends):
 * for each block independently, the queue starts as 0, 1, ..., 255; for
 * each input byte s, output its current position r in the queue (the rank)
 * and move s to the front (positions 0..r-1 shift back by one). Decoding
 * inverts this. codec/ registers the simd and gpu families through their
 * plain C APIs; simd/ and gpu/ never include this header. */
#ifndef GMTF_MTF_H
#define GMTF_MTF_H

#include <stddef.h>
#include <stdint.h>

typedef struct gmtf_mtf_backend {
    const char *name;       /* "scalar", "simd", "simd-avx2", "gpu-4by8", ... */
    int (*available)(void); /* 1 when it can run on this machine */
    /* One block: n bytes in, n ranks out (or back). src != dst. */
    void (*encode)(const uint8_t *src, uint8_t *dst, size_t n);
    void (*decode)(const uint8_t *src, uint8_t *dst, size_t n);
    /* Optional: a whole batch in one call (block i = src[off[i]..off[i+1])),
     * output at the same offsets in dst. Return 0 or a negative code; on
     * failure the codec falls back to the per-block calls. */
    int (*batch_encode)(const uint8_t *src, const uint64_t *off, size_t count, uint8_t *dst);
    int (*batch_decode)(const uint8_t *src, const uint64_t *off, size_t count, uint8_t *dst);
    uint64_t min_batch_bytes; /* auto uses the batch hooks from this size on */
    /* Optional: host memory the batch hooks move fastest (pinned for the
     * GPU); the codec's batch staging buffers come from it. NULL = malloc. */
    void *(*host_alloc)(size_t size);
    void (*host_free)(void *p);
    /* Optional, for benchmarks: runs the batch transform on data already on
     * the device (upload and download outside the timing) and reports the
     * device time in *ms; the output lands in dst for checking. */
    int (*batch_kernel)(const uint8_t *src, const uint64_t *off, size_t count, uint8_t *dst,
                        int decode, double *ms);
} gmtf_mtf_backend;

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
