/* The codec's batch calls with the BWT on a device (codec/bwt_dev.h): the
 * frames must be byte for byte those of the CPU path, the decoded blocks
 * and every status the same as the CPU's, and a device fault mid-batch
 * must lose nothing (the CPU redoes the batch) and retire the device.
 *
 * Built twice: test_codec_dev_emu puts the CPU emulations of the GPU
 * kernels (gpu/bwt_sort.cu with GMTF_BWT_EMU, gpu/ibwt.cu with
 * GMTF_IBWT_EMU) in the device's place through the codec's test hook, so
 * the codec's wiring runs on every machine; test_codec_dev (CUDA builds)
 * uses the GPU itself (exit 77 without one) and adds the Linux tar prefix
 * (GMTF_LINUX_TAR, a plain tar). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef GMTF_CODEC_DEV_EMU
#include "lanes_emu_names.h" /* before codec_internal.h, which includes gpu_lanes.h */
#include "lanes_enc_emu_names.h"
#endif
#include "../codec/test_util.h"
#include "bwt.h"
#include "codec_internal.h"
#include "frame.h"
#include "qlfc.h"
#include "gmtf_codec.h"

#ifdef GMTF_CODEC_DEV_EMU
#include "bwt_emu_names.h"
#include "gpu_bwt.h"
#include "ibwt_emu_names.h"
#include "gpu_ibwt.h"

/* Contexts made on each emulated device: the ops are instantiable per
 * device, as the GPU's (gmtf_gpu_*_create_on). */
static long emu_made[GMTF_MULTI_DEV_MAX];
static int emu_note(int dev)
{
    if (dev < 0 || dev >= GMTF_MULTI_DEV_MAX)
        return -ENODEV;
    __atomic_add_fetch(&emu_made[dev], 1, __ATOMIC_RELAXED);
    return 0;
}
static int emu_fwd_create(int dev, void **ctx)
{
    int rc = emu_note(dev);
    return rc ? rc : gmtf_gpu_bwt_create_on(dev, (gmtf_gpu_bwt_ctx **)ctx);
}
static void emu_fwd_destroy(void *ctx)
{
    gmtf_gpu_bwt_destroy(ctx);
}
static int emu_fwd(void *ctx, const uint8_t *src, const uint64_t *off, size_t count,
                   const uint32_t *step, uint8_t *dst, uint32_t *idx)
{
    return gmtf_gpu_bwt_batch(ctx, src, off, count, step, dst, idx);
}
static int emu_inv_create(int dev, void **ctx)
{
    int rc = emu_note(dev);
    return rc ? rc : gmtf_gpu_ibwt_create_on(dev, (gmtf_gpu_ibwt_ctx **)ctx);
}
static void emu_inv_destroy(void *ctx)
{
    gmtf_gpu_ibwt_destroy(ctx);
}
static int emu_inv(void *ctx, const uint8_t *bwt, const uint64_t *off, size_t count,
                   const uint32_t *step, const uint32_t *idx, uint8_t *dst)
{
    return gmtf_gpu_ibwt_batch(ctx, bwt, off, count, step, idx, dst);
}
static int emu_lanes_create(int dev, void **ctx)
{
    int rc = emu_note(dev);
    return rc ? rc : gmtf_gpu_lanes_create_on(dev, (gmtf_gpu_lanes_ctx **)ctx);
}
static void emu_lanes_destroy(void *ctx)
{
    gmtf_gpu_lanes_destroy(ctx);
}
static int emu_lanes(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                     const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                     const uint64_t *out_off, uint8_t *out, uint8_t *bad)
{
    return gmtf_gpu_lanes_decode(ctx, in, nin, count, lanes, cum, sel, out_off, out, bad);
}
static int emu_enc_create(int dev, void **ctx)
{
    int rc = emu_note(dev);
    return rc ? rc : gmtf_gpu_lanes_enc_create_on(dev, (gmtf_gpu_lanes_enc **)ctx);
}
static void emu_enc_destroy(void *ctx)
{
    gmtf_gpu_lanes_enc_destroy(ctx);
}
static int emu_enc_scan(void *ctx, void *fwd_ctx, size_t count, const uint64_t *off,
                        gmtf_gpu_lanes_scan_out *o)
{
    void *bwt = NULL;
    int rc = gmtf_gpu_bwt_stage_device(fwd_ctx, &bwt, NULL);
    return rc ? rc : gmtf_gpu_lanes_enc_scan_dev(ctx, bwt, count, off, o);
}
static int emu_enc_scan_plan(void *ctx, void *fwd_ctx, size_t count, const uint64_t *off,
                             unsigned big_rank, gmtf_gpu_lanes_scan_out *o,
                             const gmtf_gpu_lanes_plan **plans, const uint8_t **psel)
{
    void *bwt = NULL;
    int rc = gmtf_gpu_bwt_stage_device(fwd_ctx, &bwt, NULL);
    return rc ? rc
              : gmtf_gpu_lanes_enc_scan_plan(ctx, bwt, 1, count, off, big_rank, o, plans, psel);
}
static int emu_enc_tables(void *ctx, uint8_t **sel, uint16_t **cum, uint8_t **skip)
{
    return gmtf_gpu_lanes_enc_tables(ctx, sel, cum, skip);
}
static int emu_enc_code(void *ctx, const uint8_t **streams, const uint32_t **len)
{
    return gmtf_gpu_lanes_enc_code_dev(ctx, streams, len);
}
static int emu_lanes_keep(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                          const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                          const uint64_t *out_off, const uint8_t *fill, uint8_t *bad)
{
    return gmtf_gpu_lanes_decode_keep(ctx, in, nin, count, lanes, cum, sel, out_off, fill, bad);
}
static int emu_inv_dev(void *ctx, void *lanes_ctx, const uint64_t *off, size_t count,
                       const uint32_t *step, const uint32_t *idx, uint8_t *dst)
{
    void *bwt = NULL;
    int rc = gmtf_gpu_lanes_out_device(lanes_ctx, &bwt);
    return rc ? rc : gmtf_gpu_ibwt_batch_dev(ctx, bwt, off, count, step, idx, dst);
}
static int emu_lanes_groups(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                            const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                            const uint64_t *out_off, const uint8_t *fill, size_t ngroups,
                            const size_t *gend)
{
    return gmtf_gpu_lanes_decode_groups(ctx, in, nin, count, lanes, cum, sel, out_off, fill,
                                        ngroups, gend);
}
static int emu_inv_group_start(void *ctx, void *lanes_ctx, size_t g, uint64_t base,
                               const uint64_t *off, size_t count, const uint32_t *step,
                               const uint32_t *idx, uint8_t *dst)
{
    void *bwt = NULL;
    int rc = gmtf_gpu_lanes_out_device(lanes_ctx, &bwt);
    return rc ? rc
              : gmtf_gpu_ibwt_batch_dev_start(ctx, (uint8_t *)bwt + (off[0] - base),
                                              gmtf_gpu_lanes_group_event(lanes_ctx, g), off, count,
                                              step, idx, dst);
}
static int emu_inv_group_wait(void *ctx, void *lanes_ctx, size_t g, uint8_t *bad)
{
    int rc = gmtf_gpu_ibwt_wait(ctx);
    return rc ? rc : gmtf_gpu_lanes_group_wait(lanes_ctx, g, bad);
}
static const gmtf_bwt_dev_ops emu_ops = {
    .name = "emu",
    .fwd_create = emu_fwd_create,
    .fwd_destroy = emu_fwd_destroy,
    .fwd = emu_fwd,
    .inv_create = emu_inv_create,
    .inv_destroy = emu_inv_destroy,
    .inv = emu_inv,
    .lanes_create = emu_lanes_create,
    .lanes_destroy = emu_lanes_destroy,
    .lanes = emu_lanes,
    .enc_create = emu_enc_create,
    .enc_destroy = emu_enc_destroy,
    .enc_scan = emu_enc_scan,
    .enc_tables = emu_enc_tables,
    .enc_code = emu_enc_code,
    .enc_scan_plan = emu_enc_scan_plan,
    .lanes_keep = emu_lanes_keep,
    .inv_dev = emu_inv_dev,
    .lanes_groups = emu_lanes_groups,
    .inv_group_start = emu_inv_group_start,
    .inv_group_wait = emu_inv_group_wait,
};
static const gmtf_bwt_dev_ops *dev_ops(void)
{
    return &emu_ops;
}
/* Device k of a test with several: the emulation has as many as asked. */
static int dev_number(int k)
{
    return k;
}
#define UNIT (64u << 10)
#else
static const gmtf_bwt_dev_ops *dev_ops(void)
{
    return gmtf_bwt_dev_gpu();
}
/* Device k of a test with several: the host's GPUs in turn (one GPU: two
 * device states on it, which the code handles the same way). */
static int dev_number(int k)
{
    int n = gmtf_bwt_dev_gpu_count();
    return n > 0 ? k % n : 0;
}
#define UNIT (1u << 20)
#endif

/* A codec with the device (min batch 1 byte, fault hook off) or without. */
static gmtf_codec *codec_new(int dev, unsigned threads)
{
    gmtf_codec *c = NULL;
    gmtf_codec_options o = {.threads = threads, .mtf = "scalar"};
    assert_int_equal(gmtf_codec_create(&c, &o), 0);
    gmtf_codec_set_bwt_dev(c, dev ? dev_ops() : NULL);
    gmtf_bwt_dev *d = gmtf_codec_bwt_dev(c);
    d->min_bytes[GMTF_BWT_DEV_FWD] = d->min_bytes[GMTF_BWT_DEV_INV] = 1;
    d->fault_at = 0;
    d->pipe[0] = d->pipe[1] = 3;
    d->chunk_min = 1;
    return c;
}

typedef struct blocks {
    uint8_t *data;
    uint64_t *off;
    size_t count;
} blocks;

/* A batch: text-like, random, empty, tiny, one-byte runs, real files. */
static blocks make_blocks(uint64_t seed, size_t count, size_t unit)
{
    blocks b;
    b.off = tu_malloc((count + 1) * sizeof *b.off);
    size_t *len = tu_malloc(count * sizeof *len);
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t r = tu_rand(&seed) % 10;
        len[i] = r == 0   ? 0
                 : r == 1 ? 1 + tu_rand_below(&seed, 15)
                          : 1 + tu_rand_below(&seed, unit);
        if (r == 9)
            len[i] = unit;
        total += len[i];
    }
    b.data = tu_malloc(total + 1);
    tu_files sys = tu_system_files(16, unit);
    uint8_t *real = sys.count ? tu_concat(&sys, total + 1) : NULL;
    uint64_t pos = 0;
    b.off[0] = 0;
    for (size_t i = 0; i < count; i++) {
        uint8_t *p = b.data + pos;
        switch (tu_rand(&seed) % 5) {
        case 0: tu_fill_random(p, len[i], tu_rand(&seed)); break;
        case 1: memset(p, (int)(tu_rand(&seed) & 0xff), len[i]); break;
        case 2:
            if (real) {
                memcpy(p, real + pos, len[i]);
                break;
            }
            /* fall through */
        default: tu_fill_text_like(p, len[i], tu_rand(&seed)); break;
        }
        pos += len[i];
        b.off[i + 1] = pos;
    }
    b.count = count;
    free(real);
    tu_files_free(&sys);
    free(len);
    return b;
}

static void blocks_free(blocks *b)
{
    free(b->data);
    free(b->off);
}

/* n bytes of real data (the corpora, else files of this system), NULL when
 * there are none (the caller fills text-like bytes). */
static uint8_t *real_bytes(size_t n)
{
    tu_files sys = tu_corpus_files();
    if (sys.count == 0) {
        tu_files_free(&sys);
        sys = tu_system_files(64, 4u << 20);
    }
    uint8_t *real = sys.count ? tu_concat(&sys, n) : NULL;
    tu_files_free(&sys);
    return real;
}

/* Real bytes (text-like ones, from seed, where none can be read) cut into
 * count blocks of len[i] bytes. */
static blocks real_blocks(const size_t *len, size_t count, uint64_t seed)
{
    blocks b;
    b.count = count;
    b.off = tu_malloc((count + 1) * sizeof *b.off);
    b.off[0] = 0;
    for (size_t i = 0; i < count; i++)
        b.off[i + 1] = b.off[i] + len[i];
    size_t n = b.off[count];
    b.data = tu_malloc(n);
    uint8_t *real = real_bytes(n);
    if (real)
        memcpy(b.data, real, n);
    else
        tu_fill_text_like(b.data, n, seed);
    free(real);
    return b;
}

typedef struct frames {
    uint8_t *data;
    uint64_t *off;
    size_t count;
} frames;

/* Room for b's frames (gmtf_batch_bound of data). */
static frames frames_for(const blocks *b)
{
    frames f = {tu_malloc(gmtf_batch_bound(b->off, b->count) + 1),
                tu_malloc((b->count + 1) * sizeof *f.off), b->count};
    return f;
}

static void encode_into(gmtf_codec *c, const blocks *b, frames *f)
{
    assert_int_equal(gmtf_batch_encode(c, b->data, b->off, b->count, f->data,
                                       gmtf_batch_bound(b->off, b->count), f->off),
                     0);
}

static frames encode(gmtf_codec *c, const blocks *b)
{
    frames f = frames_for(b);
    encode_into(c, b, &f);
    return f;
}

static void frames_free(frames *f)
{
    free(f->data);
    free(f->off);
}

static void assert_same_frames(const frames *a, const frames *b)
{
    assert_int_equal(a->count, b->count);
    assert_memory_equal(a->off, b->off, (a->count + 1) * sizeof *a->off);
    assert_memory_equal(a->data, b->data, a->off[a->count]);
}

/* Decodes f with c: the return value, statuses and bytes in *out. */
static int decode(gmtf_codec *c, const frames *f, const uint64_t *doff, uint8_t **out, int **st)
{
    *out = tu_malloc(doff[f->count] + 1);
    *st = tu_calloc((f->count + 1) * sizeof **st);
    memset(*out, 0x77, doff[f->count] + 1);
    return gmtf_batch_decode(c, f->data, f->off, f->count, *out, doff, *st);
}

static void test_identical_frames(void **state)
{
    (void)state;
    gmtf_codec *cpu = codec_new(0, 3), *dev = codec_new(1, 3);
    unsigned pipes[] = {1, 2, 4, GMTF_BWT_DEV_PIPE_MAX};
    for (uint64_t seed = 1; seed <= 4; seed++) {
        gmtf_codec_bwt_dev(dev)->pipe[0] = gmtf_codec_bwt_dev(dev)->pipe[1] = pipes[seed - 1];
        blocks b = make_blocks(seed * 7919, 12 + seed * 4, UNIT);
        frames want = encode(cpu, &b), got = encode(dev, &b);
        assert_same_frames(&want, &got);
        uint8_t *out;
        int *st;
        assert_int_equal(decode(dev, &got, b.off, &out, &st), 0);
        assert_memory_equal(out, b.data, b.off[b.count]);
        free(out);
        free(st);
        frames_free(&want);
        frames_free(&got);
        blocks_free(&b);
    }
    gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
    printf("device: %llu blocks forward, %llu inverse\n",
           (unsigned long long)d->blocks[GMTF_BWT_DEV_FWD],
           (unsigned long long)d->blocks[GMTF_BWT_DEV_INV]);
    assert_true(d->blocks[GMTF_BWT_DEV_FWD] > 20);
    assert_true(d->blocks[GMTF_BWT_DEV_INV] > 20);
    assert_int_equal(d->retired, 0);
    /* the CPU codec never used one */
    assert_int_equal(gmtf_codec_bwt_dev(cpu)->calls, 0);
    gmtf_codec_destroy(cpu);
    gmtf_codec_destroy(dev);
}

/* Batches under the size rule stay on the CPU. */
static void test_size_rule(void **state)
{
    (void)state;
    gmtf_codec *dev = codec_new(1, 2);
    gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
    d->pipe[0] = d->pipe[1] = 1;
    blocks b = make_blocks(99, 6, UNIT / 4);
    d->min_bytes[GMTF_BWT_DEV_FWD] = d->min_bytes[GMTF_BWT_DEV_INV] = b.off[b.count] + 1;
    frames f = encode(dev, &b);
    uint8_t *out;
    int *st;
    assert_int_equal(decode(dev, &f, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, b.off[b.count]);
    assert_int_equal(d->calls, 0);
    d->min_bytes[GMTF_BWT_DEV_FWD] = d->min_bytes[GMTF_BWT_DEV_INV] = b.off[b.count];
    frames g = encode(dev, &b);
    assert_same_frames(&f, &g);
    assert_int_equal(d->calls, 1);
    free(out);
    free(st);
    frames_free(&f);
    frames_free(&g);
    blocks_free(&b);
    gmtf_codec_destroy(dev);
}

/* A device fault in the middle of a run of batches (three chunks a batch,
 * so also in the middle of a batch): the rest of that batch is done on the
 * CPU (same frames, same bytes), the device is retired and no later call
 * reaches it. */
static void test_fault(void **state)
{
    (void)state;
    gmtf_codec *cpu = codec_new(0, 2);
    for (long at = 1; at <= 8; at++) {
        gmtf_codec *dev = codec_new(1, 2);
        gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
        d->fault_at = at;
        for (uint64_t seed = 1; seed <= 3; seed++) {
            blocks b = make_blocks(seed * 31 + (uint64_t)at, 10, UNIT / 2);
            frames want = encode(cpu, &b), got = encode(dev, &b);
            assert_same_frames(&want, &got);
            uint8_t *out, *ref;
            int *st, *rst;
            assert_int_equal(decode(dev, &got, b.off, &out, &st), 0);
            assert_int_equal(decode(cpu, &got, b.off, &ref, &rst), 0);
            assert_memory_equal(out, b.data, b.off[b.count]);
            assert_memory_equal(st, rst, b.count * sizeof *st);
            free(out);
            free(ref);
            free(st);
            free(rst);
            frames_free(&want);
            frames_free(&got);
            blocks_free(&b);
        }
        /* 6 batches would make about 18 calls; the fault at call `at` ends them */
        assert_int_equal(d->retired, 1);
        assert_int_equal(d->last_err, -EIO);
        assert_int_equal(d->calls, at);
        assert_null(d->ctx[0]);
        assert_null(d->ctx[1]);
        gmtf_codec_destroy(dev);
    }
    gmtf_codec_destroy(cpu);
}

/* Rewrites sample q of a version 2 BWT frame to row (keeping both header
 * checksums valid): the frame is then hostile but well-formed. */
static void set_row(uint8_t *frame, size_t len, unsigned q, uint32_t row)
{
    gmtf_frame_info fi;
    unsigned h, k;
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    assert_int_equal(gmtf_frame_parse(frame, len, &fi, &h, idx, &k), 0);
    assert_true(q < k);
    idx[q] = row;
    gmtf_frame_write_header_v2(frame, fi.method, fi.orig_len, fi.frame_len - h, fi.data_crc, idx);
}

/* Makes a version 2 BWT frame's payload checksum match its (damaged)
 * payload again, so that the decoders behind it see the damage. */
static void refresh_payload_crc(uint8_t *frame, size_t len)
{
    gmtf_frame_info fi;
    unsigned h, k;
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    assert_int_equal(gmtf_frame_parse(frame, len, &fi, &h, idx, &k), 0);
    gmtf_frame_write_header_v2(frame, fi.method, fi.orig_len, fi.frame_len - h, fi.data_crc, idx);
    assert_int_equal(gmtf_frame_check_payload(frame, &fi, h, GMTF_FRAME_V2), 0);
}

/* Damaged frames in a batch: each gets the status the CPU path gives it,
 * the others decode. Version 1 frames in the same batch decode too. */
static void test_damaged(void **state)
{
    (void)state;
    gmtf_codec *cpu = codec_new(0, 2), *dev = codec_new(1, 2);
    gmtf_codec *v1 = NULL;
    gmtf_codec_options o1 = {.threads = 2, .mtf = "scalar", .frame_version = 1};
    assert_int_equal(gmtf_codec_create(&v1, &o1), 0);
    uint64_t seed = 4242;
    for (int round = 0; round < 6; round++) {
        blocks b = make_blocks(seed + (uint64_t)round, 14, UNIT / 2);
        frames f = encode(round == 5 ? v1 : cpu, &b);
        if (round == 4) { /* mix: every other frame version 1 */
            frames g = encode(v1, &b);
            frames m = {tu_malloc(f.off[f.count] + g.off[g.count]),
                        tu_malloc((f.count + 1) * sizeof *m.off), f.count};
            m.off[0] = 0;
            for (size_t i = 0; i < f.count; i++) {
                const frames *s = i & 1 ? &g : &f;
                size_t l = s->off[i + 1] - s->off[i];
                memcpy(m.data + m.off[i], s->data + s->off[i], l);
                m.off[i + 1] = m.off[i] + l;
            }
            frames_free(&f);
            frames_free(&g);
            f = m;
        }
        /* damage: bad rows, flipped payload bytes, a wrong checksum */
        for (size_t i = 0; i < f.count; i++) {
            uint8_t *fr = f.data + f.off[i];
            size_t len = f.off[i + 1] - f.off[i];
            gmtf_frame_info fi;
            unsigned h, k, ver;
            uint32_t idx[GMTF_BWT_MAX_SAMPLES];
            if (gmtf_frame_parse_version(fr, len, &fi, &h, idx, &k, &ver) != 0 ||
                fi.method != GMTF_METHOD_BWT || ver != GMTF_FRAME_V2 || tu_rand(&seed) % 3)
                continue;
            switch (tu_rand(&seed) % 4) {
            case 0: set_row(fr, len, (unsigned)tu_rand_below(&seed, k), fi.orig_len + 1); break;
            case 1: set_row(fr, len, 0, 1 + (uint32_t)tu_rand_below(&seed, fi.orig_len)); break;
            case 2: /* the payload checksum catches it, or (refreshed) the decoders */
                fr[h + tu_rand_below(&seed, len - h)] ^= 0x10;
                if (tu_rand(&seed) % 2)
                    refresh_payload_crc(fr, len);
                break;
            default: fr[16] ^= 1; break; /* data CRC: the header checksum fails */
            }
        }
        uint8_t *out, *ref;
        int *st, *rst;
        int rc = decode(dev, &f, b.off, &out, &st);
        int rrc = decode(cpu, &f, b.off, &ref, &rst);
        assert_int_equal(rc != 0, rrc != 0); /* the CPU path's pick of the error varies */
        assert_memory_equal(st, rst, b.count * sizeof *st);
        for (size_t i = 0; i < b.count; i++)
            if (st[i] == 0)
                assert_memory_equal(out + b.off[i], b.data + b.off[i], b.off[i + 1] - b.off[i]);
        free(out);
        free(ref);
        free(st);
        free(rst);
        frames_free(&f);
        blocks_free(&b);
    }
    assert_int_equal(gmtf_codec_bwt_dev(dev)->retired, 0);
    assert_true(gmtf_codec_bwt_dev(dev)->blocks[GMTF_BWT_DEV_INV] > 0);
    gmtf_codec_destroy(cpu);
    gmtf_codec_destroy(dev);
    gmtf_codec_destroy(v1);
}

/* Blocks of method 2's sizes (900 KiB and more): their lanes decode on the
 * device; damaged ones get the CPU's statuses; a fault at the lanes call
 * (call 2: the encode's BWT is call 1) is taken over by the CPU. */
static void test_lanes(void **state)
{
    (void)state;
#ifdef GMTF_CODEC_DEV_EMU
    size_t bs = 1u << 20, count = 2, n = bs * count; /* the emulated sort is slow */
#else
    size_t bs = 1u << 20, count = 4, n = bs * count;
#endif
    blocks b;
    b.data = tu_malloc(n);
    uint8_t *real = real_bytes(n);
    if (real)
        memcpy(b.data, real, n);
    else
        tu_fill_text_like(b.data, n, 77);
    free(real);
    b.count = count;
    b.off = tu_malloc((count + 1) * sizeof *b.off);
    for (size_t i = 0; i <= count; i++)
        b.off[i] = i * bs;
    gmtf_codec *cpu = codec_new(0, 2), *dev = codec_new(1, 2);
    gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
    d->pipe[0] = d->pipe[1] = 2;
    frames want = encode(cpu, &b), got = encode(dev, &b);
    assert_same_frames(&want, &got);
    uint8_t *out, *ref;
    int *st, *rst;
    assert_int_equal(decode(dev, &got, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, n);
    free(out);
    free(st);
    printf("lanes: %llu blocks decoded by the device's lanes\n",
           (unsigned long long)d->blocks[GMTF_BWT_DEV_LANES]);
    assert_true(d->blocks[GMTF_BWT_DEV_LANES] >= count - 1);
    /* damage the lane streams of some frames */
    uint64_t seed = 31337;
    for (int r = 0; r < 4; r++) {
        frames f = encode(cpu, &b);
        for (size_t i = 0; i < count; i++) {
            if (tu_rand(&seed) % 2)
                continue;
            size_t len = f.off[i + 1] - f.off[i];
            f.data[f.off[i] + len / 2 + tu_rand_below(&seed, len / 2)] ^= 0x41;
            /* most with the payload checksum made to match: the device's
             * lanes see the damage (else the host's check stops it) */
            if (tu_rand(&seed) % 4)
                refresh_payload_crc(f.data + f.off[i], len);
        }
        int rc = decode(dev, &f, b.off, &out, &st);
        int rrc = decode(cpu, &f, b.off, &ref, &rst);
        assert_int_equal(rc != 0, rrc != 0);
        assert_memory_equal(st, rst, count * sizeof *st);
        for (size_t i = 0; i < count; i++)
            if (st[i] == 0)
                assert_memory_equal(out + b.off[i], b.data + b.off[i], bs);
        free(out);
        free(ref);
        free(st);
        free(rst);
        frames_free(&f);
    }
    assert_int_equal(d->retired, 0);
    /* the lanes' output went to the inverse BWT on the device */
    assert_int_equal(d->use_inv_dev, 1);
    /* a fault at the lanes call (2), at the inverse of its output (3) */
    for (long at = 2; at <= 3; at++) {
        gmtf_codec *flt = codec_new(1, 2);
        gmtf_bwt_dev *fd = gmtf_codec_bwt_dev(flt);
        fd->pipe[0] = fd->pipe[1] = 1; /* call 1: the BWT of the batch; call 2: its lanes */
        fd->use_enc = 0;               /* (test_lanes_enc faults the encoder's calls) */
        fd->fault_at = at;
        frames g = encode(flt, &b);
        assert_same_frames(&want, &g);
        assert_int_equal(decode(flt, &g, b.off, &out, &st), 0);
        assert_memory_equal(out, b.data, n);
        assert_int_equal(fd->retired, 1);
        assert_int_equal(fd->calls, at);
        assert_int_equal(fd->blocks[GMTF_BWT_DEV_FWD], count);
        assert_int_equal(fd->blocks[GMTF_BWT_DEV_LANES] > 0, at == 3);
        assert_int_equal(fd->blocks[GMTF_BWT_DEV_INV], 0);
        free(out);
        free(st);
        frames_free(&g);
        gmtf_codec_destroy(flt);
    }
    /* and with the lanes' output brought back and sent up again */
    gmtf_codec *rt = codec_new(1, 2);
    gmtf_codec_bwt_dev(rt)->use_inv_dev = 0;
    assert_int_equal(decode(rt, &got, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, n);
    assert_true(gmtf_codec_bwt_dev(rt)->blocks[GMTF_BWT_DEV_LANES] > 0);
    free(out);
    free(st);
    gmtf_codec_destroy(rt);
    frames_free(&want);
    frames_free(&got);
    blocks_free(&b);
    gmtf_codec_destroy(cpu);
    gmtf_codec_destroy(dev);
}

/* Method 2's encoder on the device inside the batch encode: a batch of
 * every kind of block (method 2 of real and text-like data, random data
 * that the rule sends to method 3 and then raw, two-symbol data, runs,
 * blocks under method 2's size, tiny and empty ones): the frames are the
 * CPU's over 1, 2 and 3 chunks, the device coded the method 2 blocks, and
 * a fault at every device call of the batch (forward BWT, scan, code step
 * of each chunk) loses nothing. */
static blocks lanes_batch(void)
{
    static const size_t len[] = {1u << 20,   0,        7, (1u << 20) - 3, 100000, 1u << 20,
                                 950u << 10, 1u << 20, 1, 1u << 20};
    size_t count = sizeof len / sizeof len[0], total = 0;
    for (size_t i = 0; i < count; i++)
        total += len[i];
    blocks b;
    b.data = tu_malloc(total + 1);
    b.off = tu_malloc((count + 1) * sizeof *b.off);
    b.count = count;
    uint8_t *real = real_bytes(1u << 20);
    uint64_t pos = 0;
    b.off[0] = 0;
    for (size_t i = 0; i < count; i++) {
        uint8_t *p = b.data + pos;
        switch (i) {
        case 0:
            if (real) {
                memcpy(p, real, len[i]);
                break;
            }
            /* fall through */
        case 2:
        case 6: tu_fill_text_like(p, len[i], 1000 + i); break;
        case 3: tu_fill_random(p, len[i], 77); break;
        case 4: tu_fill_text_like(p, len[i], 5); break;
        case 5:
            for (size_t q = 0; q < len[i]; q++)
                p[q] = "ab"[(q * 7 / 5) % 2];
            break;
        case 7: memset(p, 'x', len[i]); break;
        default: tu_fill_text_like(p, len[i], 42 + i); break;
        }
        pos += len[i];
        b.off[i + 1] = pos;
    }
    free(real);
    return b;
}

static void test_lanes_enc(void **state)
{
    (void)state;
    blocks b = lanes_batch();
    gmtf_codec *cpu = codec_new(0, 3);
    frames want = encode(cpu, &b);
#ifdef GMTF_CODEC_DEV_EMU
    /* The emulated device is slow: the chunk counts that differ in kind
     * (one; several with a remainder); faults at three of the six calls of
     * two chunks (the first, the second chunk's scan, the last code step;
     * 42 CPU-s for all six in CI's release pass). The device build runs
     * every case. */
    unsigned pipes[] = {1, 3}, npipes = 2;
    static const long fault_at[] = {1, 4, 6}; /* the first call, a scan, the last code step */
#else
    unsigned pipes[] = {1, 2, 3, 5}, npipes = 4;
    static const long fault_at[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
#endif
    long faults = (long)(sizeof fault_at / sizeof *fault_at);
    /* p = npipes: the plan's statistics on the host (GMTF_GPU_PLAN=0), one
     * chunk; the others with the device's */
    for (unsigned p = 0; p <= npipes; p++) {
        gmtf_codec *dev = codec_new(1, 3);
        gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
        assert_int_equal(d->use_plan, 1);
        d->pipe[0] = p < npipes ? pipes[p] : 1;
        d->use_plan = p < npipes;
        frames got = encode(dev, &b);
        assert_same_frames(&want, &got);
        uint64_t coded = d->blocks[GMTF_BWT_DEV_ENC0] + d->blocks[GMTF_BWT_DEV_ENC1] +
                         d->blocks[GMTF_BWT_DEV_ENC2];
        printf("lanes enc: %u chunk(s), plan on the %s, %llu device calls, %llu blocks coded on "
               "the device\n",
               d->pipe[0], d->use_plan ? "device" : "host", (unsigned long long)d->calls,
               (unsigned long long)coded);
        /* blocks 0, 6, 9 (and 3, 5 unless the rule defers them) are method 2 */
        assert_true(coded >= 3);
        assert_int_equal(d->retired, 0);
        uint8_t *out;
        int *st;
        assert_int_equal(decode(cpu, &got, b.off, &out, &st), 0);
        assert_memory_equal(out, b.data, b.off[b.count]);
        free(out);
        free(st);
        frames_free(&got);
        gmtf_codec_destroy(dev);
    }
    /* 2 chunks: forward + scan of each, then the code step of each (calls
     * 1-6); 4 chunks: calls 5-8 come from two threads at once (the third
     * chunk's forward and scan beside the first one's code step) */
    for (long i = 0; i < faults; i++) {
        long t = fault_at[i], at = t <= 6 ? t : t - 2;
        gmtf_codec *dev = codec_new(1, 2);
        gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
        d->pipe[0] = t <= 6 ? 2 : 4;
        d->fault_at = at;
        frames got = encode(dev, &b);
        assert_same_frames(&want, &got);
        assert_int_equal(d->retired, 1);
        assert_int_equal(d->last_err, -EIO);
        assert_int_equal(d->calls, at);
        for (int k = 0; k < GMTF_BWT_DEV_NCTX; k++)
            assert_null(d->ctx[k]);
        /* and the next batch on the CPU alone */
        frames again = encode(dev, &b);
        assert_same_frames(&want, &again);
        assert_int_equal(d->calls, at);
        frames_free(&again);
        frames_free(&got);
        gmtf_codec_destroy(dev);
    }
#ifndef GMTF_CODEC_DEV_EMU
    /* One chunk: block 7 (runs) is coded by method 3 on the pool while the
     * scan runs (codec/batch.c, enc_spec); a fault at the forward BWT (no
     * output to code ahead), at the scan (coded ahead, then the CPU's way
     * after all) and at the code step: the same frames */
    for (long at = 1; at <= 3; at++) {
        gmtf_codec *dev = codec_new(1, 2);
        gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
        d->pipe[0] = 1;
        d->fault_at = at;
        frames got = encode(dev, &b);
        assert_same_frames(&want, &got);
        assert_int_equal(d->retired, 1);
        assert_int_equal(d->calls, at);
        frames_free(&got);
        gmtf_codec_destroy(dev);
    }
#endif
    frames_free(&want);
    blocks_free(&b);
    gmtf_codec_destroy(cpu);
}

static frames encode_hint(gmtf_codec *c, const blocks *b, const uint8_t *adaptive)
{
    frames f = frames_for(b);
    assert_int_equal(gmtf_batch_encode_hint(c, b->data, b->off, b->count, f.data,
                                            gmtf_batch_bound(b->off, b->count), f.off, NULL,
                                            adaptive),
                     0);
    return f;
}

/* Frame i's entropy method (2, 3), or 0 for a raw, run or empty frame. */
static unsigned frame_method(const frames *f, size_t i)
{
    gmtf_frame_info fi;
    unsigned h, n;
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    assert_int_equal(
        gmtf_frame_parse(f->data + f->off[i], f->off[i + 1] - f->off[i], &fi, &h, idx, &n), 0);
    return fi.method == GMTF_METHOD_BWT ? f->data[f->off[i] + h] : 0;
}

/* The caller's hint (gmtf_batch_encode_hint: mkfs's frames of few large
 * files take method 3) on lanes_batch's every kind of block, some hinted:
 * the hinted method 2 blocks become method 3, the others keep the rule's
 * method, and the device makes the CPU's frames over 1 and 3 chunks, with
 * the plan's statistics on the device and on the host. */
static void test_hint(void **state)
{
    (void)state;
    blocks b = lanes_batch();
    uint8_t adaptive[10] = {1, 1, 1, 1, 0, 0, 1, 1, 1, 0};
    assert_int_equal(b.count, sizeof adaptive);
    gmtf_codec *cpu = codec_new(0, 3);
    frames rule = encode(cpu, &b), want = encode_hint(cpu, &b, adaptive);
    for (size_t i = 0; i < b.count; i++) {
        unsigned m = frame_method(&rule, i);
        assert_int_equal(frame_method(&want, i), adaptive[i] && m == 2 ? 3 : m);
        if (!(adaptive[i] && m == 2)) /* the rule's frame, byte for byte */
            assert_memory_equal(want.data + want.off[i], rule.data + rule.off[i],
                                rule.off[i + 1] - rule.off[i]);
    }
    assert_int_equal(frame_method(&rule, 0), 2); /* the hint changed a block */
    assert_int_equal(frame_method(&want, 0), 3);
    assert_int_equal(frame_method(&want, 9), 2);
    unsigned pipes[] = {1, 3};
    for (unsigned p = 0; p <= 2; p++) {
        gmtf_codec *dev = codec_new(1, 3);
        gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
        d->pipe[0] = p < 2 ? pipes[p] : 1;
        d->use_plan = p < 2;
        frames got = encode_hint(dev, &b, adaptive);
        assert_same_frames(&want, &got);
        assert_int_equal(d->retired, 0);
        assert_true(d->calls > 0);
        frames_free(&got);
        gmtf_codec_destroy(dev);
    }
    uint8_t *out;
    int *st;
    assert_int_equal(decode(cpu, &want, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, b.off[b.count]);
    free(out);
    free(st);
    frames_free(&rule);
    frames_free(&want);
    blocks_free(&b);
    gmtf_codec_destroy(cpu);
}

/* Real data in the codec's large blocks: corpus files, or the Linux tar. */
/* The method 2 blocks' lanes and inverse in groups (use_groups), on
 * test_split_decode's batch (two method 2 blocks, a method 3 one between):
 * the bytes over 2 groups (and 3 asked: as many as blocks), the device
 * calls (the start, a wait a group, the method 3 block's inverse) and their
 * blocks; a fault at the calls (each of the 4 on the device; the start and
 * the first wait in the emulation, for time) taken over by the CPU without
 * a lost block, the contexts closed. */
static void group_decode(const blocks *b, const frames *f)
{
    size_t count = b->count, n = b->off[count];
    uint8_t *out;
    int *st;
    for (unsigned ng = 2; ng <= 3; ng++) {
        gmtf_codec *dev = codec_new(1, 2);
        gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
        assert_int_equal(d->use_groups, 1);
        d->dec_groups = ng;
        assert_int_equal(decode(dev, f, b->off, &out, &st), 0);
        assert_memory_equal(out, b->data, n);
        assert_int_equal(d->blocks[GMTF_BWT_DEV_LANES], 2);
        assert_int_equal(d->blocks[GMTF_BWT_DEV_INV], 3);
        assert_int_equal(d->calls, 1 + 2 + 1);
        assert_int_equal(d->retired, 0);
        free(out);
        free(st);
        gmtf_codec_destroy(dev);
#ifdef GMTF_CODEC_DEV_EMU
        break; /* (3 groups of 2 blocks: the same calls) */
#endif
    }
#ifdef GMTF_CODEC_DEV_EMU
    static const long faults[] = {1, 2};
#else
    static const long faults[] = {1, 2, 3, 4};
#endif
    for (size_t k = 0; k < sizeof faults / sizeof faults[0]; k++) {
        gmtf_codec *flt = codec_new(1, 2);
        gmtf_bwt_dev *fd = gmtf_codec_bwt_dev(flt);
        fd->dec_groups = 2;
        fd->fault_at = faults[k];
        assert_int_equal(decode(flt, f, b->off, &out, &st), 0);
        assert_memory_equal(out, b->data, n);
        for (size_t i = 0; i < count; i++)
            assert_int_equal(st[i], 0);
        assert_int_equal(fd->retired, 1);
        assert_int_equal(fd->calls, faults[k]);
        assert_null(fd->ctx[GMTF_BWT_DEV_INV]);
        free(out);
        free(st);
        gmtf_codec_destroy(flt);
    }
}

/* A decode batch of method 2 blocks and a method 3 one (under 900 KiB, the
 * rule's choice), in mixed order: the method 2 blocks are packed first and
 * the batch cut after them, so the device's calls are the lanes, the
 * inverse of their output and the inverse of the rest (3; 2 with the split
 * off); the same bytes either way, and with a fault at each of the three
 * calls (the CPU takes over the rest). */
static void test_split_decode(void **state)
{
    (void)state;
    size_t len[] = {1u << 20, 512u << 10, 1u << 20};
    size_t count = sizeof len / sizeof len[0];
    blocks b = real_blocks(len, count, 91);
    size_t n = b.off[count];
    gmtf_codec *cpu = codec_new(0, 2);
    frames f = encode(cpu, &b);
    uint8_t *out;
    int *st;
    for (int split = 1; split >= 0; split--) {
        gmtf_codec *dev = codec_new(1, 2);
        gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
        d->pipe[1] = 1; /* the default: one chunk, cut in two by the split */
        d->split_m3 = split;
        d->use_groups = 0; /* (group_decode below) */
        assert_int_equal(decode(dev, &f, b.off, &out, &st), 0);
        assert_memory_equal(out, b.data, n);
        /* the lanes call: the method 2 blocks (and the method 3 one as a stand-in when
         * not split) */
        assert_int_equal(d->blocks[GMTF_BWT_DEV_LANES], split ? 2 : 3);
        assert_int_equal(d->blocks[GMTF_BWT_DEV_INV], 3);
        assert_int_equal(d->calls, split ? 3 : 2);
        assert_int_equal(d->retired, 0);
        free(out);
        free(st);
        gmtf_codec_destroy(dev);
    }
#ifdef GMTF_CODEC_DEV_EMU
    long at0 = 2; /* (the lanes call; time for group_decode's) */
#else
    long at0 = 1;
#endif
    for (long at = at0; at <= 3; at++) {
        gmtf_codec *flt = codec_new(1, 2);
        gmtf_bwt_dev *fd = gmtf_codec_bwt_dev(flt);
        fd->pipe[1] = 1;
        fd->use_groups = 0;
        fd->fault_at = at;
        assert_int_equal(decode(flt, &f, b.off, &out, &st), 0);
        assert_memory_equal(out, b.data, n);
        for (size_t i = 0; i < count; i++)
            assert_int_equal(st[i], 0);
        assert_int_equal(fd->retired, 1);
        assert_int_equal(fd->calls, at);
        free(out);
        free(st);
        gmtf_codec_destroy(flt);
    }
    printf("split decode: method 2 blocks first, 3 device calls; faults at each taken over\n");
    group_decode(&b, &f);
    printf("group decode: the same batch in groups, faults taken over\n");
    frames_free(&f);
    blocks_free(&b);
    gmtf_codec_destroy(cpu);
}

/* A block whose payload is method 4 (which no default encoder writes: its
 * frame is made here from a method 2 one) in a batch between method 2 and
 * method 3 blocks: the device's lanes take only the method 2 block, the
 * CPU decodes the method 4 one, the bytes are the batch's. */
static void test_method4_to_cpu(void **state)
{
    (void)state;
    size_t len[] = {1u << 20, 512u << 10, 1u << 20};
    size_t count = sizeof len / sizeof len[0];
    blocks b = real_blocks(len, count, 93);
    size_t n = b.off[count];
    gmtf_codec *cpu = codec_new(0, 2);
    frames f = encode(cpu, &b);
    /* frame 0 (method 2) again with a method 4 payload of its BWT output */
    const uint8_t *fr = f.data + f.off[0];
    gmtf_frame_info fi;
    unsigned h, nidx, version;
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    assert_int_equal(
        gmtf_frame_parse_version(fr, f.off[1] - f.off[0], &fi, &h, idx, &nidx, &version), 0);
    assert_int_equal(fi.method, GMTF_METHOD_BWT);
    assert_int_equal(fr[h], GMTF_QLFC_METHOD_LANES);
    size_t bn = len[0], cap = 2 * bn;
    void *ws = tu_malloc(gmtf_qlfc_workspace_size(bn));
    uint8_t *bwt = tu_malloc(bn);
    assert_int_equal(gmtf_qlfc_decode(fr + h, fi.frame_len - h, bwt, bn, ws), 0);
    size_t h2 = gmtf_frame_header_len_v2(GMTF_METHOD_BWT, bn);
    frames g;
    g.count = count;
    g.off = tu_malloc((count + 1) * sizeof *g.off);
    g.data = tu_malloc(h2 + cap + f.off[count]);
    long plen = gmtf_cm_lanes_encode(bwt, bn, 8, g.data + h2, cap, ws);
    assert_true(plen > 0);
    assert_int_equal(g.data[h2], GMTF_QLFC_METHOD_CM_LANES);
    assert_int_equal(gmtf_frame_write_header_v2(g.data, GMTF_METHOD_BWT, (uint32_t)bn,
                                                (uint32_t)plen, fi.data_crc, idx),
                     h2);
    g.off[0] = 0;
    g.off[1] = h2 + (size_t)plen;
    for (size_t i = 1; i < count; i++) {
        memcpy(g.data + g.off[i], f.data + f.off[i], f.off[i + 1] - f.off[i]);
        g.off[i + 1] = g.off[i] + (f.off[i + 1] - f.off[i]);
    }
    uint8_t *out;
    int *st;
    assert_int_equal(decode(cpu, &g, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, n);
    free(out);
    free(st);
    gmtf_codec *dev = codec_new(1, 2);
    gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
    d->pipe[1] = 1;
    d->split_m3 = 1;
    assert_int_equal(decode(dev, &g, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, n);
    for (size_t i = 0; i < count; i++)
        assert_int_equal(st[i], 0);
    assert_int_equal(d->blocks[GMTF_BWT_DEV_LANES], 1); /* block 2 only */
    assert_int_equal(d->blocks[GMTF_BWT_DEV_INV], 3);
    free(out);
    free(st);
    gmtf_codec_destroy(dev);
    printf("method 4 in a device batch: decoded by the CPU, the lanes call took 1 block\n");
    free(g.data), free(g.off), free(bwt), free(ws);
    frames_free(&f);
    blocks_free(&b);
    gmtf_codec_destroy(cpu);
}

static void test_real(void **state)
{
    (void)state;
    tu_files cf = tu_corpus_files();
    const char *tar = getenv("GMTF_LINUX_TAR");
    uint8_t *tdata = NULL;
    size_t tlen = 0;
#ifndef GMTF_CODEC_DEV_EMU
    if (tar && *tar)
        tu_read_file(tar, 64u << 20, &tdata, &tlen);
#else
    (void)tar;
#endif
    if (cf.count == 0 && !tdata) {
        printf("SKIP real data: no corpus (GMTF_CORPUS) or tar (GMTF_LINUX_TAR)\n");
        tu_files_free(&cf);
        skip();
    }
    size_t n = tdata ? tlen : 0;
    for (size_t i = 0; i < cf.count; i++)
        n += cf.v[i].len;
#ifdef GMTF_CODEC_DEV_EMU
    if (n > (2u << 20))
        n = 2u << 20;
    size_t bs = 256u << 10;
#else
    size_t bs = 2u << 20;
#endif
    blocks b;
    b.data = tu_malloc(n + 1);
    size_t pos = 0;
    for (size_t i = 0; i < cf.count && pos < n; i++) {
        size_t l = cf.v[i].len < n - pos ? cf.v[i].len : n - pos;
        memcpy(b.data + pos, cf.v[i].data, l);
        pos += l;
    }
    if (tdata && pos < n)
        memcpy(b.data + pos, tdata, n - pos);
    b.count = (n + bs - 1) / bs;
    b.off = tu_malloc((b.count + 1) * sizeof *b.off);
    for (size_t i = 0; i <= b.count; i++)
        b.off[i] = i * bs < n ? i * bs : n;
    gmtf_codec *cpu = codec_new(0, 4), *dev = codec_new(1, 4);
    frames want = encode(cpu, &b), got = encode(dev, &b);
    assert_same_frames(&want, &got);
    uint8_t *out;
    int *st;
    assert_int_equal(decode(dev, &got, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, n);
    printf("real data: %zu bytes in %zu blocks -> %llu bytes, identical frames, decoded\n", n,
           b.count, (unsigned long long)got.off[got.count]);
    assert_true(gmtf_codec_bwt_dev(dev)->blocks[GMTF_BWT_DEV_FWD] >= b.count - 1);
    free(out);
    free(st);
    frames_free(&want);
    frames_free(&got);
    free(b.data);
    free(b.off);
    free(tdata);
    tu_files_free(&cf);
    gmtf_codec_destroy(cpu);
    gmtf_codec_destroy(dev);
}

/* gmtf_codec_prepare makes the device's contexts and the workspaces
 * ahead of the first batch, counts no device call, and changes no byte;
 * on a retired device it makes nothing. */
static void test_prepare(void **state)
{
    (void)state;
    blocks b = lanes_batch();
    gmtf_codec *cpu = codec_new(0, 2);
    frames want = encode(cpu, &b);
    gmtf_codec *dev = codec_new(1, 2);
    gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
    d->pipe[0] = 2;
    assert_int_equal(gmtf_codec_batch_device(cpu), 0);
    assert_int_equal(gmtf_codec_batch_device(dev), 1);
    assert_null(d->ctx[GMTF_BWT_DEV_FWD]);
    assert_int_equal(gmtf_codec_prepare(dev, b.off[b.count], 1), 0);
    assert_non_null(d->ctx[GMTF_BWT_DEV_FWD]);
    assert_non_null(d->ctx[GMTF_BWT_DEV_ENC0]);
    assert_non_null(d->ctx[GMTF_BWT_DEV_ENC1]);
    assert_null(d->ctx[GMTF_BWT_DEV_INV]);
    assert_int_equal(d->calls, 0);
    frames got = encode(dev, &b);
    assert_same_frames(&want, &got);
    assert_true(d->calls > 0);
    long calls = d->calls;
    assert_int_equal(gmtf_codec_prepare(dev, b.off[b.count], 0), 0);
    assert_non_null(d->ctx[GMTF_BWT_DEV_INV]);
    assert_non_null(d->ctx[GMTF_BWT_DEV_LANES]);
    assert_int_equal(d->calls, calls);
    uint8_t *out;
    int *st;
    assert_int_equal(decode(dev, &got, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, b.off[b.count]);
    assert_true(d->calls > calls);
    free(out);
    free(st);
    gmtf_codec_destroy(dev);
    /* retired at its first call: prepare makes nothing */
    dev = codec_new(1, 2);
    d = gmtf_codec_bwt_dev(dev);
    d->fault_at = 1;
    frames again = encode(dev, &b);
    assert_same_frames(&want, &again);
    assert_int_equal(d->retired, 1);
    assert_int_equal(gmtf_codec_batch_device(dev), 0); /* retired: batches on the CPU */
    assert_int_equal(gmtf_codec_prepare(dev, b.off[b.count], 1), 0);
    for (int k = 0; k < GMTF_BWT_DEV_NCTX; k++)
        assert_null(d->ctx[k]);
    frames_free(&again);
    gmtf_codec_destroy(dev);
    frames_free(&got);
    frames_free(&want);
    blocks_free(&b);
    gmtf_codec_destroy(cpu);
}

/* Encoding ahead (gmtf_codec_set_next): batches x, y, x (x: lanes_batch,
 * in the emulation its first three blocks; y: x's first) through a hook that announces each next one. Each call's
 * frames are the CPU codec's; after each but the last the next batch runs
 * ahead (in the other staging set); an announced batch that is not the
 * next one encoded is dropped (the frames still the CPU's), and so is one
 * running ahead when the hook is taken away. On the device also with a
 * fault at each of the first calls. */
struct ahead_hook {
    const blocks *b[3];
    frames *f[3];
    size_t n, at;
    int asked;
};

static int ahead_next(void *arg, gmtf_batch_next *nb)
{
    struct ahead_hook *h = arg;
    if (nb->after) /* two ahead (a codec's helper thread): not answered here */
        return 0;
    h->asked++;
    if (h->at + 1 >= h->n)
        return 0;
    const blocks *b = h->b[h->at + 1];
    *nb = (gmtf_batch_next){
        b->data, b->off, b->count, h->f[h->at + 1]->data, gmtf_batch_bound(b->off, b->count), NULL};
    return 1;
}

/* Two ahead: a hook that also answers for the batch after `after` (asked
 * on the codec's helper thread: counted under a lock). */
struct ahead2_hook {
    struct ahead_hook h;
    pthread_mutex_t mu;
    int asked_after;
};

static int ahead2_next(void *arg, gmtf_batch_next *nb)
{
    struct ahead2_hook *a = arg;
    const uint8_t *after = nb->after;
    if (!after)
        return ahead_next(&a->h, nb);
    pthread_mutex_lock(&a->mu);
    a->asked_after++;
    pthread_mutex_unlock(&a->mu);
    for (size_t i = 0; i + 1 < a->h.n; i++)
        if (a->h.b[i]->data == after) {
            const blocks *b = a->h.b[i + 1];
            *nb = (gmtf_batch_next){
                b->data, b->off, b->count, a->h.f[i + 1]->data, gmtf_batch_bound(b->off, b->count),
                after};
            return 1;
        }
    return 0;
}

static void test_ahead(void **state)
{
    (void)state;
    blocks all = lanes_batch(), x = all, y = {all.data, all.off, 1};
#ifdef GMTF_CODEC_DEV_EMU
    /* the emulation (about 2 CPU-s; in CI since the tenth session, whose
     * scripts/test took 979 s of the 1200): three blocks a batch, the fault
     * cases on the device */
    x.count = 3;
    long faults = 0;
#else
    long faults = 8;
#endif
    gmtf_codec *cpu = codec_new(0, 2);
    frames want[2] = {encode(cpu, &x), encode(cpu, &y)};
    for (long t = 0; t <= faults; t++) {
        gmtf_codec *dev = codec_new(1, 2);
        gmtf_bwt_dev *d = gmtf_codec_bwt_dev(dev);
        d->fault_at = t;
        frames f[3] = {frames_for(&x), frames_for(&y), frames_for(&x)};
        struct ahead_hook h = {{&x, &y, &x}, {&f[0], &f[1], &f[2]}, 3, 0, 0};
        gmtf_codec_set_next(dev, ahead_next, &h);
        for (h.at = 0; h.at < 3; h.at++) {
            encode_into(dev, h.b[h.at], &f[h.at]);
            assert_same_frames(&want[h.at == 1], &f[h.at]);
            if (t == 0) { /* asked each time; the next batch runs ahead */
                assert_int_equal(h.asked, (int)h.at + 1);
                assert_true(h.at < 2 ? dev->ahead != NULL : dev->ahead == NULL);
            }
        }
        if (t == 0)
            assert_non_null(dev->enc_st[1][0].p);
        else
            assert_int_equal(d->retired, 1);
        /* announced: y; encoded: x (its own buffer), then y's announcement
         * left running when the hook goes */
        h.at = 0;
        encode_into(dev, &x, &f[2]);
        assert_same_frames(&want[0], &f[2]);
        assert_true(t != 0 || dev->ahead != NULL);
        encode_into(dev, &x, &f[0]);
        assert_same_frames(&want[0], &f[0]);
        gmtf_codec_set_next(dev, NULL, NULL);
        assert_null(dev->ahead);
        for (int k = 0; k < 3; k++)
            frames_free(&f[k]);
        gmtf_codec_destroy(dev);
    }
    frames_free(&want[0]);
    frames_free(&want[1]);
    blocks_free(&all);
    gmtf_codec_destroy(cpu);
}

/* Two ahead (GMTF_GPU_ENC_AHEAD2=2: after every batch): batches b0, b1, b2
 * of one block each (distinct buffers, the same bytes), through a hook
 * that answers for the batch after another. Each call's frames are the
 * CPU codec's; after b0's call b1 runs ahead and a helper has readied b2
 * (staging set 2); b1's call takes b2 over; the helper b1's call starts
 * finds nothing after b2. Then b0 again, and the hook taken away with two
 * batches in flight: both dropped. On the device; in the emulation only
 * with GMTF_CODEC_DEV_AHEAD2=1 (about 2 CPU-s: not in CI's time). */
static void test_ahead2(void **state)
{
    (void)state;
#ifdef GMTF_CODEC_DEV_EMU
    const char *on = getenv("GMTF_CODEC_DEV_AHEAD2");
    if (!(on && *on == '1'))
        skip();
#endif
    blocks all = lanes_batch(), one[3];
    for (int i = 0; i < 3; i++) {
        one[i].count = 1;
        one[i].off = tu_malloc(2 * sizeof *one[i].off);
        one[i].off[0] = 0;
        one[i].off[1] = all.off[1];
        one[i].data = tu_malloc(all.off[1]);
        memcpy(one[i].data, all.data, all.off[1]);
    }
    gmtf_codec *cpu = codec_new(0, 2);
    frames want = encode(cpu, &one[0]);
    setenv("GMTF_GPU_ENC_AHEAD2", "2", 1);
    gmtf_codec *dev = codec_new(1, 2);
    frames f[3] = {frames_for(&one[0]), frames_for(&one[1]), frames_for(&one[2])};
    struct ahead2_hook a = {.h = {{&one[0], &one[1], &one[2]}, {&f[0], &f[1], &f[2]}, 3, 0, 0}};
    pthread_mutex_init(&a.mu, NULL);
    gmtf_codec_set_next(dev, ahead2_next, &a);
    for (a.h.at = 0; a.h.at < 3; a.h.at++) {
        encode_into(dev, a.h.b[a.h.at], &f[a.h.at]);
        assert_same_frames(&want, &f[a.h.at]);
        if (a.h.at == 0) { /* b1 ahead, b2 readied by the helper */
            assert_non_null(dev->ahead);
            assert_non_null(dev->ahead2);
        }
        assert_true(a.h.at < 2 ? dev->ahead != NULL : dev->ahead == NULL);
    }
    assert_null(dev->ahead2);
    assert_non_null(dev->enc_st[2][0].p);
    assert_int_equal(a.h.asked, 2);     /* b0's call; b2's (none after it) */
    assert_int_equal(a.asked_after, 2); /* b2 after b1 (b0's call); none after b2 */
    /* b0 again: b1 ahead, b2 readied; the hook taken away drops both */
    a.h.at = 0;
    encode_into(dev, &one[0], &f[0]);
    assert_same_frames(&want, &f[0]);
    gmtf_codec_set_next(dev, NULL, NULL);
    assert_null(dev->ahead);
    assert_null(dev->ahead2);
    assert_int_equal(a.asked_after, 3);
    unsetenv("GMTF_GPU_ENC_AHEAD2");
    pthread_mutex_destroy(&a.mu);
    for (int k = 0; k < 3; k++) {
        frames_free(&f[k]);
        blocks_free(&one[k]);
    }
    gmtf_codec_destroy(dev);
    frames_free(&want);
    blocks_free(&all);
    gmtf_codec_destroy(cpu);
}

/* Which codecs send their batches to the device: the gpu backends and
 * auto (with a device), not simd or scalar, whose batch hooks are CPU
 * ones (they are the CPU baseline of every comparison). */
static void test_backend_device(void **state)
{
    (void)state;
#ifdef GMTF_CODEC_DEV_EMU
    printf("SKIP: the emulated device is set by hand (the GPU's choice runs on a device)\n");
#else
    const char *names[] = {"auto", "gpu", "simd", "scalar"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        gmtf_codec *c = NULL;
        gmtf_codec_options o = {.threads = 2, .mtf = names[i]};
        assert_int_equal(gmtf_codec_create(&c, &o), 0);
        int on = gmtf_codec_bwt_dev(c)->ops != NULL || c->multi != NULL;
        printf("--mtf=%s: batches %s\n", names[i], on ? "on the device" : "on the CPU");
        assert_int_equal(on, i < 2);
        assert_int_equal(gmtf_codec_batch_device(c), on);
        gmtf_codec_destroy(c);
    }
#endif
}

/* A codec with n devices (multi_dev.h when n >= 2): every device state
 * with min batch 1 byte, the fault hook off, three chunks a batch. */
static gmtf_codec *codec_multi(unsigned n, unsigned threads)
{
    gmtf_codec *c = codec_new(0, threads);
    int dev[GMTF_MULTI_DEV_MAX];
    for (unsigned k = 0; k < n; k++)
        dev[k] = dev_number((int)k);
    assert_int_equal(gmtf_codec_set_bwt_devs(c, dev_ops(), dev, n), 0);
    assert_non_null(c->multi);
    assert_int_equal(c->multi->n, n);
    for (unsigned k = 0; k < n; k++) {
        gmtf_bwt_dev *d = &c->multi->sub[k]->bwt_dev;
        assert_int_equal(d->device, dev[k]);
        d->min_bytes[GMTF_BWT_DEV_FWD] = d->min_bytes[GMTF_BWT_DEV_INV] = 1;
        d->fault_at = 0;
        d->pipe[0] = d->pipe[1] = 3;
        d->chunk_min = 1;
    }
    return c;
}

/* Two and three devices: frames identical to one device's and the CPU's,
 * every device takes a share, and decoding on them gives the blocks. */
static void test_multi_identical(void **state)
{
    (void)state;
    gmtf_codec *cpu = codec_new(0, 3), *one = codec_new(1, 3);
    for (unsigned n = 2; n <= 3; n++) {
        gmtf_codec *many = codec_multi(n, 3);
        /* prepare readies every device's contexts (and no workspace of
         * the dispatching codec's own) */
        assert_int_equal(gmtf_codec_prepare(many, 4u << 20, 1), 0);
        for (unsigned k = 0; k < n; k++)
            assert_non_null(many->multi->sub[k]->bwt_dev.ctx[GMTF_BWT_DEV_FWD]);
        assert_null(many->ws[0].bwt_ws);
        for (uint64_t seed = 1; seed <= 3; seed++) {
            blocks b = make_blocks(seed * 104729 + n, 10 + seed * 6, UNIT);
            frames want = encode(cpu, &b), got1 = encode(one, &b), got = encode(many, &b);
            assert_same_frames(&want, &got1);
            assert_same_frames(&want, &got);
            uint8_t *out;
            int *st;
            assert_int_equal(decode(many, &got, b.off, &out, &st), 0);
            assert_memory_equal(out, b.data, b.off[b.count]);
            for (size_t i = 0; i < b.count; i++)
                assert_int_equal(st[i], 0);
            free(out);
            free(st);
            frames_free(&want);
            frames_free(&got1);
            frames_free(&got);
            blocks_free(&b);
        }
        for (unsigned k = 0; k < n; k++) {
            gmtf_bwt_dev *d = &many->multi->sub[k]->bwt_dev;
            printf("%u devices: device %d did %llu blocks forward, %llu inverse; %.0f and %.0f "
                   "bytes/ms\n",
                   n, d->device, (unsigned long long)d->blocks[GMTF_BWT_DEV_FWD],
                   (unsigned long long)d->blocks[GMTF_BWT_DEV_INV],
                   many->multi->rate[GMTF_BWT_DEV_FWD][k], many->multi->rate[GMTF_BWT_DEV_INV][k]);
            assert_true(d->blocks[GMTF_BWT_DEV_FWD] > 0);
            assert_true(d->blocks[GMTF_BWT_DEV_INV] > 0);
            assert_int_equal(d->retired, 0);
            assert_true(many->multi->rate[GMTF_BWT_DEV_FWD][k] > 0);
        }
        /* the dispatching codec's own device state is never used */
        assert_int_equal(gmtf_codec_bwt_dev(many)->calls, 0);
        gmtf_codec_destroy(many);
    }
#ifdef GMTF_CODEC_DEV_EMU
    for (int k = 0; k < 3; k++)
        assert_true(emu_made[k] > 0);
#endif
    gmtf_codec_destroy(one);
    gmtf_codec_destroy(cpu);
}

/* The cut follows the weights and keeps runs contiguous. */
static void test_multi_cut(void **state)
{
    (void)state;
    uint64_t off[101];
    for (int i = 0; i <= 100; i++)
        off[i] = 1000u * (uint64_t)i;
    size_t cut[4];
    double eq[3] = {1, 1, 1}, skew[2] = {3, 1};
    gmtf_multi_dev_cut(off, 100, eq, 3, cut);
    assert_int_equal(cut[0], 0);
    assert_int_equal(cut[3], 100);
    assert_true(cut[1] >= 33 && cut[1] <= 34);
    assert_true(cut[2] >= 66 && cut[2] <= 67);
    gmtf_multi_dev_cut(off, 100, skew, 2, cut);
    assert_int_equal(cut[1], 75);
    assert_int_equal(cut[2], 100);
    /* one big block: it goes whole to one run */
    uint64_t big[3] = {0, 10, 1000000};
    gmtf_multi_dev_cut(big, 2, eq, 2, cut);
    assert_true(cut[1] <= 2);
    assert_int_equal(cut[2], 2);
}

/* The measured rates drive the cut: a device three times as fast gets
 * about three quarters of the bytes. */
static void test_multi_rates(void **state)
{
    (void)state;
    gmtf_codec *cpu = codec_new(0, 2), *many = codec_multi(2, 2);
    blocks b = make_blocks(777, 64, UNIT / 2);
    many->multi->rate[GMTF_BWT_DEV_FWD][0] = 3000;
    many->multi->rate[GMTF_BWT_DEV_FWD][1] = 1000;
    frames want = encode(cpu, &b), got = encode(many, &b);
    assert_same_frames(&want, &got);
    uint64_t d0 = many->multi->dealt[GMTF_BWT_DEV_FWD][0],
             d1 = many->multi->dealt[GMTF_BWT_DEV_FWD][1];
    printf("rates 3:1: %llu and %llu bytes dealt\n", (unsigned long long)d0,
           (unsigned long long)d1);
    assert_int_equal(d0 + d1, b.off[b.count]);
    assert_true(d0 > 2 * d1 && d0 < 4 * d1);
    /* and the rates now hold this batch's measurements */
    assert_true(many->multi->rate[GMTF_BWT_DEV_FWD][0] > 0);
    assert_true(many->multi->rate[GMTF_BWT_DEV_FWD][1] > 0);
    frames_free(&got);
    frames_free(&want);
    blocks_free(&b);
    gmtf_codec_destroy(many);
    gmtf_codec_destroy(cpu);
}

/* A fault on device 1 only: the batch completes with the same frames (its
 * run redone on the CPU), device 1 is retired alone, and device 0 still
 * takes the next batches. */
static void test_multi_fault(void **state)
{
    (void)state;
    gmtf_codec *cpu = codec_new(0, 2), *many = codec_multi(2, 2);
    gmtf_bwt_dev *d0 = &many->multi->sub[0]->bwt_dev, *d1 = &many->multi->sub[1]->bwt_dev;
    d1->fault_at = 2;
    blocks b = make_blocks(4242, 24, UNIT);
    frames want = encode(cpu, &b), got = encode(many, &b);
    assert_same_frames(&want, &got);
    assert_int_equal(d1->retired, 1);
    assert_int_equal(d1->last_err, -EIO);
    assert_int_equal(d0->retired, 0);
    assert_int_equal(gmtf_multi_dev_live(many->multi), 1);
    uint64_t before = d0->blocks[GMTF_BWT_DEV_FWD], calls1 = (uint64_t)d1->calls;
    frames again = encode(many, &b);
    assert_same_frames(&want, &again);
    assert_true(d0->blocks[GMTF_BWT_DEV_FWD] > before);
    assert_int_equal((uint64_t)d1->calls, calls1);
    uint8_t *out;
    int *st;
    assert_int_equal(decode(many, &again, b.off, &out, &st), 0);
    assert_memory_equal(out, b.data, b.off[b.count]);
    assert_true(d0->blocks[GMTF_BWT_DEV_INV] > 0);
    free(out);
    free(st);
    /* both retired: the dispatching codec codes on the CPU */
    d0->fault_at = d0->calls + 1;
    frames cpu_too = encode(many, &b);
    assert_same_frames(&want, &cpu_too);
    assert_int_equal(gmtf_multi_dev_live(many->multi), 0);
    frames last = encode(many, &b);
    assert_same_frames(&want, &last);
    frames_free(&cpu_too);
    frames_free(&last);
    frames_free(&again);
    frames_free(&got);
    frames_free(&want);
    blocks_free(&b);
    gmtf_codec_destroy(many);
    gmtf_codec_destroy(cpu);
}

/* Device lists: what gmtf_codec_gpus_check takes and refuses, and a codec
 * with a bad list is not made. */
static void test_gpu_lists(void **state)
{
    (void)state;
    const char *good[] = {"all", "0", "1", "0,1", "3,0,2", "15", "0:1", "2:0,1"};
    const char *bad[] = {"",    ",",    "0,",  ",0",          "0,,1", "a",  "-1", "16",
                         "0,0", "1 ,2", "0x1", "99999999999", "0:0",  ":1", "1;2"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_int_equal(gmtf_codec_gpus_check(good[i]), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(gmtf_codec_gpus_check(bad[i]), -EINVAL);
    /* GMTF_GPUS_REPEAT=1 (measurements on a host of one GPU): repeats
     * taken, the rest as strict */
    setenv("GMTF_GPUS_REPEAT", "1", 1);
    assert_int_equal(gmtf_codec_gpus_check("0,0"), 0);
    assert_int_equal(gmtf_codec_gpus_check("1:1,1"), 0);
    assert_int_equal(gmtf_codec_gpus_check("0,,0"), -EINVAL);
    unsetenv("GMTF_GPUS_REPEAT");
    assert_int_equal(gmtf_codec_gpus_check("0,0"), -EINVAL);
    gmtf_codec *c = NULL;
    gmtf_codec_options o = {.threads = 2, .gpus = "0,x"};
    assert_int_equal(gmtf_codec_create(&c, &o), -EINVAL);
    assert_null(c);
    /* devices the host lacks are left out: none left, the CPU */
    o.gpus = "15";
    o.mtf = "scalar";
    assert_int_equal(gmtf_codec_create(&c, &o), 0);
    assert_null(c->multi);
    assert_null(gmtf_codec_bwt_dev(c)->ops);
    gmtf_codec_destroy(c);
}

int main(void)
{
    if (!dev_ops()) {
        printf("SKIP: no usable CUDA device on this machine\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical_frames),
        cmocka_unit_test(test_size_rule),
        cmocka_unit_test(test_fault),
        cmocka_unit_test(test_damaged),
        cmocka_unit_test(test_lanes),
        cmocka_unit_test(test_lanes_enc),
        cmocka_unit_test(test_hint),
        cmocka_unit_test(test_split_decode),
        cmocka_unit_test(test_method4_to_cpu),
        cmocka_unit_test(test_real),
        cmocka_unit_test(test_backend_device),
        cmocka_unit_test(test_prepare),
        cmocka_unit_test(test_ahead),
        cmocka_unit_test(test_ahead2),
        cmocka_unit_test(test_multi_identical),
        cmocka_unit_test(test_multi_cut),
        cmocka_unit_test(test_multi_rates),
        cmocka_unit_test(test_multi_fault),
        cmocka_unit_test(test_gpu_lists),
    };
    /* GMTF_CODEC_DEV_ONLY=test_lanes_enc: one test (e.g. under compute-sanitizer) */
    const char *only = getenv("GMTF_CODEC_DEV_ONLY");
    if (only && *only)
        cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
