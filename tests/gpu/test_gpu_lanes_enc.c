/* Method 2 encoded on the device (gpu/gpu_lanes.h's scan and code steps
 * around codec/entropy_lanes.c's plan and finish) against the CPU encoder
 * (gmtf_lanes_encode, gmtf_lanes_encode_or_defer): the same bytes and the
 * same verdicts, block for block, for random, text-like, real (corpus or
 * system files, the Linux tar when there) and synthetic blocks of many
 * sizes in one batch; the payloads decode to the input. A lane the device
 * leaves to the host (length 0) is coded there to the same bytes; a
 * broken scan is -EIO, never a crash. With no CUDA device it exits 77.
 *
 * Built a second time with GMTF_GPU_LANES_ENC_EMU against the CPU
 * emulation of gpu/lanes_enc.cu (test_gpu_lanes_enc_emu). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../codec/test_util.h"
#ifdef GMTF_GPU_LANES_ENC_EMU
#include "lanes_enc_emu_names.h"
#endif
#include "bwt.h"
#include "entropy_lanes_dev.h"
#include "frame.h"
#include "gpu_lanes.h"
#include "qlfc.h"
#include "qlfc_internal.h"
#ifndef GMTF_GPU_LANES_ENC_EMU
#include "gpu.h"
#endif

#define NT GMTF_GPU_LANES_NTABLES
#define CW GMTF_GPU_LANES_CUM
#define MG GMTF_GPU_LANES_MAX_GROUPS
#define NL GMTF_GPU_LANES

static gmtf_gpu_lanes_enc *ctx;

/* A batch's scan outputs on the host. */
typedef struct scan {
    gmtf_gpu_lanes_scan_out o;
    uint8_t *sel;
    uint16_t *cum;
} scan;

static scan scan_alloc(uint64_t n, size_t count)
{
    scan s;
    s.o.rk = tu_malloc(n);
    s.o.keys = tu_malloc(4 * n);
    s.o.runs = tu_malloc(count * NL * 4);
    s.o.roff = tu_malloc((count * NL + 1) * 8);
    s.o.init = tu_malloc(count * NL * 256);
    s.o.ninit = tu_malloc(count * NL * 2);
    s.o.gstart = tu_malloc(count * MG * 4);
    s.o.shared = tu_malloc(count * NL * GMTF_GPU_LANES_NSHARED * 16 * 4);
    s.sel = tu_calloc(count * MG);
    s.cum = tu_calloc(count * NT * CW * 2);
    return s;
}

static void scan_free(scan *s)
{
    free(s->o.rk);
    free(s->o.keys);
    free(s->o.runs);
    free(s->o.roff);
    free(s->o.init);
    free(s->o.ninit);
    free(s->o.gstart);
    free(s->o.shared);
    free(s->sel);
    free(s->cum);
}

/* Block i's view of the batch's scan. */
static gmtf_gpu_lanes_scan_out block_view(const scan *s, const uint64_t *off, size_t i)
{
    gmtf_gpu_lanes_scan_out v = s->o;
    (void)off;
    v.rk += s->o.roff[NL * i];
    v.keys += 2 * s->o.roff[NL * i];
    v.runs += NL * i;
    v.init += NL * 256 * i;
    v.ninit += NL * i;
    v.gstart += MG * i;
    v.shared += (size_t)NL * GMTF_GPU_LANES_NSHARED * 16 * i;
    return v;
}

static void *enc_ws(size_t n)
{
    size_t sz = (gmtf_lanes_workspace_size(n) + 63) & ~(size_t)63;
    void *w = aligned_alloc(64, sz);
    assert_non_null(w);
    return w;
}

/* A device-coded payload of a block of n bytes made a version 2 frame
 * (gmtf_frame_finish_bwt_v2, as an encoder using the device would): the
 * header carries the payload's CRC-32C, which the decoders' check accepts
 * and which a flipped payload bit fails. */
static void check_frame_of(const uint8_t *pay, size_t plen, size_t n)
{
    if (plen > gmtf_frame_payload_cap_v2(n))
        return; /* such a block's frame is raw */
    size_t h = gmtf_frame_header_len_v2(GMTF_METHOD_BWT, n);
    uint8_t *fr = tu_malloc(h + plen);
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    for (unsigned q = 0; q < gmtf_bwt_sample_count(n); q++)
        idx[q] = 1 + q; /* rows in range: only the header is looked at */
    memcpy(fr + h, pay, plen);
    assert_int_equal(gmtf_frame_finish_bwt_v2(NULL, n, idx, 0, fr, (long)plen), (long)(h + plen));
    gmtf_frame_info fi;
    unsigned hl, k, ver;
    assert_int_equal(gmtf_frame_parse_version(fr, h + plen, &fi, &hl, idx, &k, &ver), 0);
    assert_int_equal(hl, h);
    assert_int_equal(tu_crc32c_ref(0, pay, plen), (uint32_t)fr[h - 8] | (uint32_t)fr[h - 7] << 8 |
                                                      (uint32_t)fr[h - 6] << 16 |
                                                      (uint32_t)fr[h - 5] << 24);
    assert_int_equal(gmtf_frame_check_payload(fr, &fi, hl, ver), 0);
    fr[h + plen / 2] ^= 4;
    assert_int_equal(gmtf_frame_check_payload(fr, &fi, hl, ver), GMTF_E_CHECKSUM);
    free(fr);
}

/* Block i's view of a scan_plan's small outputs (no ranks and keys). */
static gmtf_gpu_lanes_scan_out plan_view(const gmtf_gpu_lanes_scan_out *o, size_t i)
{
    gmtf_gpu_lanes_scan_out v = *o;
    v.runs += NL * i;
    v.init += NL * 256 * i;
    v.ninit += NL * i;
    v.gstart += MG * i;
    v.shared += (size_t)NL * GMTF_GPU_LANES_NSHARED * 16 * i;
    return v;
}

/* The batch's way with the plan's statistics from the device
 * (gmtf_gpu_lanes_enc_scan_plan, gmtf_lanes_enc_dev_plan_stats, the code
 * step, gmtf_lanes_enc_dev_finish_rec): every block's bytes and verdict
 * the CPU encoder's (ref, refr). Returns the payload bytes. */
static uint64_t check_plan(const uint8_t *bwt, const uint64_t *off, size_t count, int choose,
                           uint8_t *const *ref, const long *refr)
{
    gmtf_gpu_lanes_scan_out o;
    const gmtf_gpu_lanes_plan *plans;
    const uint8_t *psel;
    int rc = gmtf_gpu_lanes_enc_scan_plan(ctx, bwt, 0, count, off, GMTF_QLFC_BIG_RANK, &o, &plans,
                                          &psel);
    if (rc)
        fprintf(stderr, "scan_plan: %d %s\n", rc, gmtf_gpu_lanes_enc_error(ctx));
    assert_int_equal(rc, 0);
    assert_null(o.rk);
    assert_null(o.keys);
    uint8_t *sel, *skip;
    uint16_t *cum;
    assert_int_equal(gmtf_gpu_lanes_enc_tables(ctx, &sel, &cum, &skip), 0);
    size_t rs = gmtf_lanes_enc_dev_rec_size();
    uint8_t *rec = tu_malloc(count * rs);
    long *prc = tu_malloc(count * sizeof *prc);
    size_t maxn = 0;
    for (size_t i = 0; i < count; i++) {
        size_t bn = off[i + 1] - off[i];
        maxn = bn > maxn ? bn : maxn;
        void *ws = enc_ws(bn);
        gmtf_gpu_lanes_scan_out v = plan_view(&o, i);
        uint64_t runs = 0;
        for (unsigned j = 0; j < NL; j++)
            runs += o.runs[NL * i + j];
        assert_int_equal(plans[i].runs, runs);
        assert_int_equal(plans[i].bad, 0);
        prc[i] = gmtf_lanes_enc_dev_plan_stats(bn, ws, &v, plans + i, psel + MG * i, choose,
                                               sel + MG * i, cum + (size_t)NT * CW * i);
        assert_true(prc[i] == 0 || prc[i] == -EXDEV || prc[i] == -ENOSPC);
        skip[i] = prc[i] != 0;
        if (prc[i] == 0)
            gmtf_lanes_enc_dev_save(ws, rec + i * rs);
        free(ws);
    }
    const uint8_t *streams;
    const uint32_t *len;
    rc = gmtf_gpu_lanes_enc_code_dev(ctx, &streams, &len);
    if (rc)
        fprintf(stderr, "code_dev: %d %s\n", rc, gmtf_gpu_lanes_enc_error(ctx));
    assert_int_equal(rc, 0);
    void *ws = enc_ws(maxn);
    uint8_t *dst = tu_malloc(2 * maxn + 4096);
    uint64_t at = 0, total = 0;
    for (size_t i = 0; i < count; i++) {
        size_t bn = off[i + 1] - off[i], blen = 0;
        int hole = 0;
        for (unsigned j = 0; j < NL; j++) {
            blen += len[NL * i + j];
            hole |= len[NL * i + j] == 0;
        }
        long r = prc[i];
        if (r == 0)
            r = gmtf_lanes_enc_dev_finish_rec(bn, ws, rec + i * rs, streams + at, len + NL * i, dst,
                                              2 * bn + 4096);
        at += blen;
        if (r == -EAGAIN && hole) /* a lane the device left: the caller's way */
            continue;
        assert_int_equal(r, refr[i]);
        if (r > 0) {
            assert_memory_equal(dst, ref[i], (size_t)r);
            total += (uint64_t)r;
        }
    }
    free(ws);
    free(dst);
    free(rec);
    free(prc);
    return total;
}

/* Encodes the blocks bwt[off[i]..off[i+1]) on the device path and the CPU
 * path; every block's bytes and verdict the same; clean payloads decode.
 * host_lanes: lanes whose device stream is dropped (coded by the host).
 * Returns the device path's payload bytes. */
static uint64_t check(const uint8_t *bwt, const uint64_t *off, size_t count, int choose,
                      unsigned host_lanes)
{
    uint64_t n = off[count];
    size_t maxn = 0;
    for (size_t i = 0; i < count; i++)
        if (off[i + 1] - off[i] > maxn)
            maxn = off[i + 1] - off[i];
    scan s = scan_alloc(n, count);
    int rc = gmtf_gpu_lanes_enc_scan(ctx, bwt, count, off, &s.o);
    if (rc)
        fprintf(stderr, "scan: %d %s\n", rc, gmtf_gpu_lanes_enc_error(ctx));
    assert_int_equal(rc, 0);
    void **ws = tu_malloc(count * sizeof *ws);
    long *prc = tu_malloc(count * sizeof *prc);
    for (size_t i = 0; i < count; i++) {
        size_t bn = off[i + 1] - off[i];
        ws[i] = enc_ws(bn);
        gmtf_gpu_lanes_scan_out v = block_view(&s, off, i);
        prc[i] = gmtf_lanes_enc_dev_plan(bwt + off[i], bn, ws[i], &v, choose, s.sel + MG * i,
                                         s.cum + (size_t)NT * CW * i);
        assert_true(prc[i] == 0 || prc[i] == -EXDEV || prc[i] == -ENOSPC);
    }
    uint64_t cap = 2 * n + 64 * NL * count;
    uint8_t *streams = tu_malloc(cap);
    uint32_t *len = tu_malloc(count * NL * 4);
    rc = gmtf_gpu_lanes_enc_code(ctx, s.sel, s.cum, streams, cap, len);
    if (rc)
        fprintf(stderr, "code: %d %s\n", rc, gmtf_gpu_lanes_enc_error(ctx));
    assert_int_equal(rc, 0);
    void *cws = enc_ws(maxn);
    void *dws = tu_malloc(gmtf_qlfc_decode_workspace_size());
    uint8_t *dst = tu_malloc(2 * maxn + 4096), *ref = tu_malloc(2 * maxn + 4096);
    uint8_t *back = tu_malloc(maxn);
    uint8_t **refs = tu_malloc(count * sizeof *refs);
    long *refr = tu_malloc(count * sizeof *refr);
    uint64_t at = 0, total = 0;
    for (size_t i = 0; i < count; i++) {
        size_t bn = off[i + 1] - off[i], blen = 0;
        uint32_t l[NL];
        for (unsigned j = 0; j < NL; j++) {
            l[j] = len[NL * i + j];
            blen += l[j];
        }
        /* the device's streams of block i, with the dropped lanes left out */
        uint8_t *bs = tu_malloc(blen + 1);
        size_t kept = 0, from = 0;
        for (unsigned j = 0; j < NL; j++) {
            if (j < host_lanes && l[j]) {
                from += l[j];
                l[j] = 0;
                continue;
            }
            memcpy(bs + kept, streams + at + from, l[j]);
            kept += l[j];
            from += l[j];
        }
        at += blen;
        long ref_r = choose ? gmtf_lanes_encode_or_defer(bwt + off[i], bn, ref, 2 * bn + 4096, cws)
                            : gmtf_lanes_encode(bwt + off[i], bn, ref, 2 * bn + 4096, cws);
        long r = prc[i];
        if (r == 0)
            r = gmtf_lanes_enc_dev_finish(bwt + off[i], bn, ws[i], bs, l, dst, 2 * bn + 4096);
        assert_int_equal(r, ref_r);
        refr[i] = ref_r;
        refs[i] = tu_malloc(ref_r > 0 ? (size_t)ref_r : 1);
        if (ref_r > 0)
            memcpy(refs[i], ref, (size_t)ref_r);
        if (r > 0) {
            assert_memory_equal(dst, ref, (size_t)r);
            assert_int_equal(gmtf_lanes_decode(dst, (size_t)r, back, bn, dws), 0);
            assert_memory_equal(back, bwt + off[i], bn);
            check_frame_of(dst, (size_t)r, bn);
            total += (uint64_t)r;
        }
        free(bs);
        free(ws[i]);
    }
    free(ws);
    free(prc);
    free(streams);
    free(len);
    free(cws);
    free(dws);
    free(dst);
    free(ref);
    free(back);
    scan_free(&s);
    /* the same with the plan's statistics from the device */
    if (host_lanes == 0)
        assert_int_equal(check_plan(bwt, off, count, choose, refs, refr), total);
    for (size_t i = 0; i < count; i++)
        free(refs[i]);
    free(refs);
    free(refr);
    return total;
}

/* The BWT of each piece (the encoder's real input), back to back. */
static uint8_t *bwt_pieces(const uint8_t *src, const size_t *len, size_t count, uint64_t *off)
{
    off[0] = 0;
    for (size_t i = 0; i < count; i++)
        off[i + 1] = off[i] + len[i];
    uint8_t *out = tu_malloc(off[count] + 1);
    for (size_t i = 0; i < count; i++) {
        void *ws = tu_malloc(gmtf_bwt_workspace_size(len[i]));
        uint32_t idx[GMTF_BWT_MAX_SAMPLES];
        assert_int_equal(gmtf_bwt_forward_step(src + off[i], out + off[i], len[i], idx, ws), 0);
        free(ws);
    }
    return out;
}

static uint8_t *real_data(size_t n, uint64_t seed)
{
    tu_files f = tu_corpus_files();
    if (f.count == 0) {
        tu_files_free(&f);
        f = tu_system_files(64, 4u << 20);
    }
    uint8_t *d = f.count ? tu_concat(&f, n) : NULL;
    tu_files_free(&f);
    if (!d) {
        d = tu_malloc(n);
        tu_fill_text_like(d, n, seed);
    }
    return d;
}

static void test_real_and_text(void **state)
{
    (void)state;
    size_t len[] = {1u << 20, (2u << 20) - 3, 900u << 10, 4097, 33, 1, 31, (1u << 20) + 12345};
    size_t count = sizeof len / sizeof len[0], n = 0;
    for (size_t i = 0; i < count; i++)
        n += len[i];
    uint8_t *d = real_data(n, 7);
    tu_fill_text_like(d + len[0], len[1], 11); /* the second block text-like */
    uint64_t off[16];
    uint8_t *b = bwt_pieces(d, len, count, off);
    uint64_t t = check(b, off, count, 1, 0);
    printf("%zu blocks, %zu bytes -> %llu (method 2 ones): the CPU encoder's bytes\n", count, n,
           (unsigned long long)t);
    check(b, off, count, 0, 0);
    check(b, off, count, 0, 5); /* lanes 0..4 coded by the host */
    free(b);
    free(d);
}

/* Random bytes (method 2 forced: choose 0; the rule says method 3),
 * runs of every length (escaped lengths), one byte, two bytes. */
static void test_synthetic(void **state)
{
    (void)state;
    size_t len[] = {300000, 1u << 20, 70000, 65536, 200000, 5};
    size_t count = sizeof len / sizeof len[0], n = 0;
    for (size_t i = 0; i < count; i++)
        n += len[i];
    uint8_t *d = tu_malloc(n);
    uint64_t off[8];
    off[0] = 0;
    for (size_t i = 0; i < count; i++)
        off[i + 1] = off[i] + len[i];
    tu_fill_random(d, len[0], 3);
    uint64_t st = 99;
    for (size_t i = off[1]; i < off[2];) { /* runs of 1 .. 70000 */
        size_t r = 1 + tu_rand_below(&st, tu_rand_below(&st, 3) ? 300 : 70000);
        uint8_t c = (uint8_t)tu_rand_below(&st, 40);
        for (size_t k = 0; k < r && i < off[2]; k++)
            d[i++] = c;
    }
    memset(d + off[2], 'a', len[2]);
    for (size_t i = off[3]; i < off[4]; i++)
        d[i] = (uint8_t)(i * 7 % 3 ? 'x' : 'y');
    tu_fill_text_like(d + off[4], len[4], 5);
    memcpy(d + off[5], "abcab", 5);
    check(d, off, count, 0, 0); /* not BWT'd: any bytes are the coder's input */
    check(d, off, count, 1, 2);
    free(d);
}

/* The Linux tar (GMTF_LINUX_TAR, a plain tar, else the xz one when
 * there): 8 blocks of 2 MiB, BWT'd. */
static void test_linux_tar(void **state)
{
    (void)state;
    size_t bs = 2u << 20, count = 8, n = bs * count, got = 0;
    const char *tar = getenv("GMTF_LINUX_TAR");
    uint8_t *d = tu_malloc(n);
    if (tar && *tar) {
        FILE *f = fopen(tar, "rb");
        got = f ? fread(d, 1, n, f) : 0;
        if (f)
            fclose(f);
    } else {
        FILE *p = popen("xz -dc /usr/src/linux-source-6.1.tar.xz 2>/dev/null", "r");
        got = p ? fread(d, 1, n, p) : 0;
        if (p)
            pclose(p);
    }
    if (got < n) {
        printf("SKIP linux tar: none (GMTF_LINUX_TAR or /usr/src/linux-source-6.1.tar.xz)\n");
        free(d);
        return;
    }
    size_t len[8];
    for (size_t i = 0; i < count; i++)
        len[i] = bs;
    uint64_t off[9];
    uint8_t *b = bwt_pieces(d, len, count, off);
    uint64_t t = check(b, off, count, 1, 0);
    printf("linux tar: %zu bytes -> %llu: the CPU encoder's bytes\n", n, (unsigned long long)t);
    free(b);
    free(d);
}

/* A scan that broke a rule is -EIO in the plan, before anything is coded. */
static void test_broken_scan(void **state)
{
    (void)state;
    size_t n = 100000;
    uint8_t *d = tu_malloc(n);
    tu_fill_text_like(d, n, 8);
    uint64_t off[2] = {0, n};
    scan s = scan_alloc(n, 1);
    assert_int_equal(gmtf_gpu_lanes_enc_scan(ctx, d, 1, off, &s.o), 0);
    void *ws = enc_ws(n);
    gmtf_gpu_lanes_scan_out v = block_view(&s, off, 0);
    assert_int_equal(gmtf_lanes_enc_dev_plan(d, n, ws, &v, 0, s.sel, s.cum), 0);
    uint32_t runs3 = s.o.runs[3];
    s.o.runs[3] = (uint32_t)n; /* more runs than bytes */
    assert_int_equal(gmtf_lanes_enc_dev_plan(d, n, ws, &v, 0, s.sel, s.cum), -EIO);
    s.o.runs[3] = runs3;
    s.o.keys[2 * 5] ^= 0x0f; /* a rank symbol that is not its rank's */
    assert_int_equal(gmtf_lanes_enc_dev_plan(d, n, ws, &v, 0, s.sel, s.cum), -EIO);
    s.o.keys[2 * 5] ^= 0x0f;
    s.o.keys[2 * 7 + 1] = 0xffff; /* a context out of range */
    assert_int_equal(gmtf_lanes_enc_dev_plan(d, n, ws, &v, 0, s.sel, s.cum), -EIO);
    /* the device's plan: its verdict and the small outputs checked */
    gmtf_gpu_lanes_scan_out o;
    const gmtf_gpu_lanes_plan *plans;
    const uint8_t *psel;
    assert_int_equal(
        gmtf_gpu_lanes_enc_scan_plan(ctx, d, 0, 1, off, GMTF_QLFC_BIG_RANK, &o, &plans, &psel), 0);
    assert_int_equal(plans[0].bad, 0);
    gmtf_gpu_lanes_plan *p = tu_malloc(sizeof *p);
    memcpy(p, plans, sizeof *p);
    assert_int_equal(gmtf_lanes_enc_dev_plan_stats(n, ws, &o, p, psel, 0, s.sel, s.cum), 0);
    p->bad = 1; /* the device found a broken key */
    assert_int_equal(gmtf_lanes_enc_dev_plan_stats(n, ws, &o, p, psel, 0, s.sel, s.cum), -EIO);
    p->bad = 0;
    p->runs++; /* not the lanes' runs */
    assert_int_equal(gmtf_lanes_enc_dev_plan_stats(n, ws, &o, p, psel, 0, s.sel, s.cum), -EIO);
    p->runs--;
    o.runs[3] = (uint32_t)n;
    assert_int_equal(gmtf_lanes_enc_dev_plan_stats(n, ws, &o, p, psel, 0, s.sel, s.cum), -EIO);
    assert_int_equal(gmtf_lanes_enc_dev_plan_stats(n, ws, &o, NULL, psel, 0, s.sel, s.cum),
                     -EINVAL);
    assert_int_equal(
        gmtf_gpu_lanes_enc_scan_plan(ctx, d, 0, 1, off, GMTF_QLFC_BIG_RANK, &o, NULL, &psel),
        -EINVAL);
    free(p);
    /* bad arguments */
    uint64_t boff[2] = {0, 0};
    assert_int_equal(gmtf_gpu_lanes_enc_scan(ctx, d, 1, boff, &s.o), -EINVAL);
    assert_int_equal(gmtf_gpu_lanes_enc_code(ctx, s.sel, s.cum, d, n, NULL), -EINVAL);
    free(ws);
    free(d);
    scan_free(&s);
}

static int setup(void **state)
{
    (void)state;
    return gmtf_gpu_lanes_enc_create(&ctx) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gmtf_gpu_lanes_enc_destroy(ctx);
    return 0;
}

int main(void)
{
#ifndef GMTF_GPU_LANES_ENC_EMU
    if (!gmtf_gpu_available()) {
        printf("SKIP: no usable CUDA device on this machine (or no CUDA in this build)\n");
        return 77;
    }
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_and_text),
        cmocka_unit_test(test_synthetic),
        cmocka_unit_test(test_linux_tar),
        cmocka_unit_test(test_broken_scan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
