/* The codecs of a filesystem: one multi-threaded codec for flush batches
 * and large read batches, and a pool of single-threaded ones so that
 * readers decode frames in parallel (a gmtf_codec serves one call at a
 * time). */
#include <stdio.h>
#include <string.h>

#include "fs_internal.h"

int codec_encode(gmtf_fs *fs, const uint8_t *src, const uint64_t *off, size_t n, uint8_t **dst,
                 uint64_t *doff, uint32_t *crc, const uint8_t *adaptive)
{
    pthread_mutex_lock(&fs->codec_lock);
    int rc = codec_encode_on(fs, fs->codec, src, off, n, dst, doff, crc, adaptive);
    /* The encoder's scratch (7.25 blocks per codec thread) would otherwise
     * stay resident between flushes; making it again costs far less than
     * a batch's encoding. */
    gmtf_codec_trim(fs->codec);
    pthread_mutex_unlock(&fs->codec_lock);
    return rc;
}

int codec_encode_on(gmtf_fs *fs, gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t n,
                    uint8_t **dst, uint64_t *doff, uint32_t *crc, const uint8_t *adaptive)
{
    uint64_t cap = gmtf_batch_bound(off, n);
    uint8_t *out = malloc(cap ? cap : 1);
    if (!out)
        return -ENOMEM;
    int rc = gmtf_batch_encode_hint(c, src, off, n, out, cap, doff, crc, adaptive);
    if (rc) {
        free(out);
        fs_log(fs, "encoding %zu blocks failed: %s", n, gmtf_strerror(rc));
        return rc == -ENOMEM ? rc : -EIO;
    }
    *dst = out;
    return 0;
}

/* Is mtf a backend that may take the GPU (auto, or the gpu family)? */
static int mtf_may_gpu(const char *mtf)
{
    return !mtf || !*mtf || !strcmp(mtf, "auto") || !strncmp(mtf, "gpu", 3);
}

/* A codec of fs's options, or on the CPU (cpu: auto's choice there;
 * version 2 frames have no MTF stage, the same frames whichever backend) */
static int codec_create_for(gmtf_fs *fs, unsigned threads, uint32_t max_block, int cpu,
                            gmtf_codec **out)
{
    gmtf_codec_options co = {
        .threads = threads, .mtf = fs->opt.mtf, .gpus = fs->opt.gpus, .max_block = max_block};
    if (!cpu)
        return gmtf_codec_create(out, &co);
    co.mtf = "simd";
    if (gmtf_codec_create(out, &co) == 0)
        return 0;
    co.mtf = "scalar";
    return gmtf_codec_create(out, &co);
}

static int codec_cpu_now(gmtf_fs *fs)
{
    return __atomic_load_n(&fs->codec_cpu_now, __ATOMIC_ACQUIRE);
}

int codec_make(gmtf_fs *fs, unsigned threads, uint32_t max_block, gmtf_codec **out)
{
    int cpu = fs->opt.codec_late && mtf_may_gpu(fs->opt.mtf);
    __atomic_store_n(&fs->codec_cpu_now, cpu, __ATOMIC_RELEASE);
    return codec_create_for(fs, threads, max_block, cpu, out);
}

/* A single-threaded codec of the pool that is free, or a new one; -1 when
 * the pool is full and busy. Caller holds dpool_mtx. The pool has one
 * codec less than the big one has threads: when all are busy, a single
 * frame takes the big codec if it is free, so as many frames as there are
 * threads still decode at once; each decoder keeps a few blocks of
 * workspace resident, and batches have the big codec's too. */
static int dpool_take(gmtf_fs *fs)
{
    for (unsigned i = 0; i < fs->ndpool; i++)
        if (!(fs->dpool_busy >> i & 1))
            return (int)i;
    unsigned cap = fs->pool_max > 1 ? fs->pool_max - 1 : 1;
    if (fs->ndpool < sizeof fs->dpool / sizeof *fs->dpool && fs->ndpool < cap) {
        /* (one made before opt.codec_late's prepare, e.g. the mount's
         * snapshot read, stays on the CPU: no GPU probe at the mount) */
        if (codec_create_for(fs, 1, fs->bs > SNAP_CHUNK ? fs->bs : SNAP_CHUNK, codec_cpu_now(fs),
                             &fs->dpool[fs->ndpool]) == 0)
            return (int)fs->ndpool++;
    }
    return -1;
}

static int decode_on_big(gmtf_fs *fs, size_t n, const uint8_t *src, const uint64_t *foff,
                         uint8_t *dst, const uint64_t *doff, int *status)
{
    int rc = gmtf_batch_decode(fs->codec, src, foff, n, dst, doff, status);
    pthread_mutex_unlock(&fs->codec_lock);
    return rc;
}

/* Decodes on the big codec when the batch has several frames and it is
 * free, else on a single-threaded codec of the pool. */
int codec_decode_batch(gmtf_fs *fs, size_t n, const uint8_t *src, const uint64_t *foff,
                       uint8_t *dst, const uint64_t *doff, int *status)
{
    if (n > 1 && pthread_mutex_trylock(&fs->codec_lock) == 0)
        return decode_on_big(fs, n, src, foff, dst, doff, status);
    pthread_mutex_lock(&fs->dpool_mtx);
    int slot;
    while ((slot = dpool_take(fs)) < 0) {
        if (pthread_mutex_trylock(&fs->codec_lock) == 0) {
            pthread_mutex_unlock(&fs->dpool_mtx);
            return decode_on_big(fs, n, src, foff, dst, doff, status);
        }
        if (fs->ndpool == 0) { /* no pool codec at all: wait for the big one */
            pthread_mutex_unlock(&fs->dpool_mtx);
            pthread_mutex_lock(&fs->codec_lock);
            return decode_on_big(fs, n, src, foff, dst, doff, status);
        }
        pthread_cond_wait(&fs->dpool_cond, &fs->dpool_mtx);
    }
    fs->dpool_busy |= 1u << slot;
    fs->dpool_frame[slot] = 0; /* the batch call reuses the workspace */
    pthread_mutex_unlock(&fs->dpool_mtx);
    int rc = gmtf_batch_decode(fs->dpool[slot], src, foff, n, dst, doff, status);
    pthread_mutex_lock(&fs->dpool_mtx);
    fs->dpool_busy &= ~(1u << slot);
    pthread_cond_signal(&fs->dpool_cond);
    pthread_mutex_unlock(&fs->dpool_mtx);
    return rc;
}

int codec_decode_one(gmtf_fs *fs, const uint8_t *src, size_t len, uint8_t *dst, size_t dlen)
{
    uint64_t foff[2] = {0, len}, doff[2] = {0, dlen};
    int st = 0;
    uint8_t none;
    if (!dst) /* an empty frame (an empty snapshot chunk): no arithmetic on NULL */
        dst = &none;
    int rc = codec_decode_batch(fs, 1, src, foff, dst, doff, &st);
    return rc ? rc : st;
}

/* A free codec of the pool for a range of frame id: the one that decoded a
 * range of id last (its table serves the next, gmtf_frame_decode_range),
 * else any free one. Caller holds dpool_mtx; -1 when all are busy. */
static int dpool_take_for(gmtf_fs *fs, uint32_t id)
{
    for (unsigned i = 0; i < fs->ndpool; i++)
        if (!(fs->dpool_busy >> i & 1) && fs->dpool_frame[i] == id)
            return (int)i;
    return dpool_take(fs);
}

int codec_decode_range(gmtf_fs *fs, uint32_t id, const uint8_t *src, size_t len, uint32_t off,
                       uint32_t cnt, uint8_t *dst)
{
    pthread_mutex_lock(&fs->dpool_mtx);
    int slot;
    while ((slot = dpool_take_for(fs, id)) < 0) {
        if (fs->ndpool == 0) { /* no pool codec at all: the big one */
            pthread_mutex_unlock(&fs->dpool_mtx);
            pthread_mutex_lock(&fs->codec_lock);
            long r = gmtf_frame_decode_range(fs->codec, src, len, off, cnt, dst);
            pthread_mutex_unlock(&fs->codec_lock);
            return r < 0 ? (int)r : 0;
        }
        pthread_cond_wait(&fs->dpool_cond, &fs->dpool_mtx);
    }
    fs->dpool_busy |= 1u << slot;
    fs->dpool_frame[slot] = 0;
    pthread_mutex_unlock(&fs->dpool_mtx);
    long r = gmtf_frame_decode_range(fs->dpool[slot], src, len, off, cnt, dst);
    pthread_mutex_lock(&fs->dpool_mtx);
    fs->dpool_busy &= ~(1u << slot);
    fs->dpool_frame[slot] = r < 0 ? 0 : id;
    pthread_cond_signal(&fs->dpool_cond);
    pthread_mutex_unlock(&fs->dpool_mtx);
    return r < 0 ? (int)r : 0;
}

int gmtf_fs_codec_prepare(gmtf_fs *fs)
{
    if (codec_cpu_now(fs)) { /* opt.codec_late: now the options' codec */
        gmtf_codec *c;
        int rc = codec_create_for(fs, gmtf_codec_threads(fs->codec), fs->bs, 0, &c);
        pthread_mutex_lock(&fs->codec_lock);
        if (rc == 0) {
            gmtf_codec_destroy(fs->codec);
            fs->codec = c;
        } else { /* the CPU's stays: the same frames */
            fs_log(fs, "codec: %s", gmtf_strerror(rc));
        }
        __atomic_store_n(&fs->codec_cpu_now, 0, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&fs->codec_lock);
    }
    pthread_mutex_lock(&fs->codec_lock);
    /* a process that exits after the unmount (mkfs) does not win back
     * what pinning its staging costs (mkfs on 256 MiB of the Linux tar,
     * H100: 1.57-1.68 s against 1.93-2.00; docs/gpu.md, mkfs11) */
    gmtf_codec_set_pageable(fs->codec, fs->opt.exit_after);
    int rc = gmtf_codec_prepare(fs->codec,
                                fs->opt.no_flush ? FLUSH_MKFS_ENCODE_BYTES : FLUSH_BATCH_BYTES, 1);
    pthread_mutex_unlock(&fs->codec_lock);
    return rc;
}

/* Makes the batch codec again for this image's block size. */
int codec_resize(gmtf_fs *fs)
{
    gmtf_codec *c;
    int rc = codec_make(fs, gmtf_codec_threads(fs->codec), fs->bs, &c);
    if (rc)
        return rc == -ENOMEM ? rc : -EINVAL;
    pthread_mutex_lock(&fs->codec_lock);
    gmtf_codec_destroy(fs->codec);
    fs->codec = c;
    pthread_mutex_unlock(&fs->codec_lock);
    return 0;
}
