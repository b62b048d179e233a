/* Mutation test: real frames (corpus or system files, random data, runs,
 * text) damaged in many ways, tens of thousands of times; each result must
 * decode to an error code or to the exact original bytes (of either parent,
 * for a splice), never crash, hang or write past the output capacity.
 *
 * Mutations: bit flips, byte overwrites, truncation, splicing two frames,
 * inserted and deleted bytes, repeated ranges, and header field edits with
 * the header checksum recomputed (to get past it into the payload
 * decoders).
 *
 * Count: $GMTF_MUTATIONS, else GMTF_MUTATIONS_DEFAULT (set by meson: fewer
 * under sanitizers). argv[1] = "k/N" runs shard k of N (mutations i with
 * i % N == k). Every mutation i is generated from seed (GMTF_SEED, default
 * 1) and i alone, so a failure prints what to rerun:
 * GMTF_SEED=s GMTF_MUTATION_ONLY=i test_mutation. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmtf_codec.h"
#include "test_util.h"

#ifndef GMTF_MUTATIONS_DEFAULT
#define GMTF_MUTATIONS_DEFAULT 40000
#endif

typedef struct sample {
    uint8_t *data; /* original block */
    size_t len;
    uint8_t *frame;
    size_t flen;
    const char *what;
} sample;

static sample *samples;
static size_t nsamples;
static gmtf_codec *codec;
/* Decodes the same mutants through gmtf_batch_decode with a backend that
 * has batch hooks (the staged path) and a smaller max_block; NULL when
 * this build has no such backend. */
static gmtf_codec *batch_codec;
#define BATCH_MAX_BLOCK 150000
static unsigned shard, nshards = 1;

static void add_sample(const uint8_t *data, size_t len, const char *what)
{
    samples = realloc(samples, (nsamples + 1) * sizeof *samples);
    if (!samples)
        abort();
    sample *s = &samples[nsamples++];
    s->data = tu_malloc(len);
    memcpy(s->data, data, len);
    s->len = len;
    s->frame = tu_malloc(gmtf_frame_bound(len));
    long r = gmtf_frame_encode(codec, data, len, s->frame, gmtf_frame_bound(len));
    if (r < 0) {
        fprintf(stderr, "cannot encode sample %s: %s\n", what, gmtf_strerror((int)r));
        abort();
    }
    s->flen = (size_t)r;
    s->what = what;
}

/* Blocks cut from real files at several sizes (64 KiB blocks carry 4 BWT
 * indexes), plus synthetic ones so every frame method is present. */
static int setup(void **state)
{
    (void)state;
    gmtf_codec_options o = {.threads = 1, .mtf = "scalar"};
    if (gmtf_codec_create(&codec, &o) != 0)
        return -1;
    gmtf_codec_options bo = {.threads = 2, .mtf = "scalar-batch", .max_block = BATCH_MAX_BLOCK};
    if (gmtf_codec_create(&batch_codec, &bo) != 0) {
        batch_codec = NULL;
        printf("# no scalar-batch backend: the staged batch path is not cross-checked\n");
    }
    tu_files corpus = tu_corpus_files();
    tu_files sys = tu_system_files(12, (size_t)1 << 20);
    static const size_t cuts[] = {300, 4096, 20000, 65536, 200000};
    uint64_t rs = 12345;
    for (int src = 0; src < 2; src++) {
        tu_files *f = src == 0 ? &corpus : &sys;
        for (size_t i = 0; i < f->count; i++) {
            size_t want = cuts[i % (sizeof cuts / sizeof cuts[0])];
            size_t len = f->v[i].len < want ? f->v[i].len : want;
            size_t at = f->v[i].len > len ? (size_t)tu_rand_below(&rs, f->v[i].len - len) : 0;
            add_sample(f->v[i].data + at, len, src == 0 ? "corpus block" : "system file block");
        }
    }
    uint8_t *buf = tu_malloc(100000);
    tu_fill_random(buf, 100000, 1);
    add_sample(buf, 100000, "random (raw)");
    add_sample(buf, 50, "random, 50 bytes");
    tu_fill_text_like(buf, 100000, 2);
    add_sample(buf, 100000, "text-like");
    add_sample(buf, 16, "text-like, 16 bytes");
    memset(buf, 'k', 70000);
    add_sample(buf, 70000, "run");
    buf[69999] = 'j';
    add_sample(buf, 70000, "run, then another byte");
    for (size_t i = 0; i < 60000; i++)
        buf[i] = (uint8_t) "abc"[i % 3];
    add_sample(buf, 60000, "period 3");
    add_sample(buf, 1, "1 byte");
    add_sample(buf, 0, "empty");
    free(buf);
    tu_files_free(&corpus);
    tu_files_free(&sys);
    printf("# %zu sample frames\n", nsamples);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < nsamples; i++)
        free(samples[i].data), free(samples[i].frame);
    free(samples);
    gmtf_codec_destroy(codec);
    gmtf_codec_destroy(batch_codec);
    return 0;
}

enum { M_FLIP, M_OVERWRITE, M_TRUNCATE, M_SPLICE, M_INSERT, M_DELETE, M_REPEAT, M_FIELD, M_COUNT };
static const char *const mname[] = {"flip",   "overwrite", "truncate", "splice",
                                    "insert", "delete",    "repeat",   "field"};

/* A position biased towards the start, where the header and the entropy
 * coder's first decisions are: half the time in the first 64 bytes. */
static size_t pick_pos(uint64_t *rs, size_t len)
{
    if (len == 0)
        return 0;
    if (tu_rand(rs) & 1)
        return (size_t)tu_rand_below(rs, len < 64 ? len : 64);
    return (size_t)tu_rand_below(rs, len);
}

static uint32_t interesting32(uint64_t *rs, uint32_t old)
{
    static const uint32_t v[] = {0,         1,          2,          15,        16,
                                 17,        0x7F,       0x80,       0xFF,      0x3FFF,
                                 0x4000,    0xFFFF,     0x10000,    0xFFFFFF,  0x1000000,
                                 0x1000001, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF};
    switch (tu_rand_below(rs, 4)) {
    case 0: return v[tu_rand_below(rs, sizeof v / sizeof v[0])];
    case 1: return old + 1 + (uint32_t)tu_rand_below(rs, 8);
    case 2: return old - 1 - (uint32_t)tu_rand_below(rs, 8);
    default: return (uint32_t)tu_rand(rs);
    }
}

/* Builds mutation i into out (capacity outcap); returns its length and the
 * parents it came from. */
static size_t mutate(uint64_t seed, size_t i, uint8_t *out, size_t outcap, int *op, size_t *pa,
                     size_t *pb)
{
    uint64_t rs = seed * 0x9E3779B97F4A7C15ull + i;
    tu_rand(&rs);
    size_t a = (size_t)tu_rand_below(&rs, nsamples), b = a;
    const sample *A = &samples[a];
    size_t len = A->flen;
    memcpy(out, A->frame, len);
    *op = (int)tu_rand_below(&rs, M_COUNT);
    switch (*op) {
    case M_FLIP: {
        size_t k = 1 + (size_t)tu_rand_below(&rs, tu_rand(&rs) & 1 ? 1 : 8);
        while (k--) {
            size_t p = pick_pos(&rs, len);
            out[p] ^= (uint8_t)(1u << tu_rand_below(&rs, 8));
        }
        break;
    }
    case M_OVERWRITE: {
        size_t k = 1 + (size_t)tu_rand_below(&rs, 16);
        size_t p = pick_pos(&rs, len);
        int fill = (int)tu_rand_below(&rs, 3);
        for (size_t j = p; j < p + k && j < len; j++)
            out[j] = fill == 0 ? 0 : fill == 1 ? 0xFF : (uint8_t)tu_rand(&rs);
        break;
    }
    case M_TRUNCATE: len = (size_t)tu_rand_below(&rs, len); break;
    case M_SPLICE: {
        b = (size_t)tu_rand_below(&rs, nsamples);
        const sample *B = &samples[b];
        size_t cut_a = 1 + (size_t)tu_rand_below(&rs, len);
        size_t from_b = (size_t)tu_rand_below(&rs, B->flen + 1);
        if (tu_rand(&rs) & 1)
            from_b = cut_a < B->flen ? cut_a : B->flen; /* same offset: header of A, rest of B */
        size_t rest = B->flen - from_b;
        if (cut_a + rest > outcap)
            rest = outcap - cut_a;
        memcpy(out + cut_a, B->frame + from_b, rest);
        len = cut_a + rest;
        break;
    }
    case M_INSERT: {
        size_t k = 1 + (size_t)tu_rand_below(&rs, 8);
        size_t p = pick_pos(&rs, len + 1);
        if (len + k > outcap)
            break;
        memmove(out + p + k, out + p, len - p);
        for (size_t j = 0; j < k; j++)
            out[p + j] = (uint8_t)tu_rand(&rs);
        len += k;
        break;
    }
    case M_DELETE: {
        size_t p = pick_pos(&rs, len);
        size_t k = 1 + (size_t)tu_rand_below(&rs, 8);
        if (p + k > len)
            k = len - p;
        memmove(out + p, out + p + k, len - p - k);
        len -= k;
        break;
    }
    case M_REPEAT: {
        if (len < 2)
            break;
        size_t p = (size_t)tu_rand_below(&rs, len), k = 1 + (size_t)tu_rand_below(&rs, 32);
        if (p + k > len)
            k = len - p;
        size_t at = (size_t)tu_rand_below(&rs, len);
        if (len + k > outcap)
            break;
        memmove(out + at + k, out + at, len - at);
        memcpy(out + at, A->frame + p, k);
        len += k;
        break;
    }
    case M_FIELD: {
        tu_header h;
        size_t hl = tu_read_header(out, len, &h);
        if (!hl)
            break;
        switch (tu_rand_below(&rs, 6)) {
        case 0: h.orig_len = interesting32(&rs, h.orig_len); break;
        case 1: h.payload_len = interesting32(&rs, h.payload_len); break;
        case 2:
            if (h.nidx)
                h.idx[tu_rand_below(&rs, h.nidx)] =
                    interesting32(&rs, h.idx[tu_rand_below(&rs, h.nidx)]);
            break;
        case 3: h.method = (uint8_t)tu_rand_below(&rs, 4); break;
        case 4: h.data_crc = interesting32(&rs, h.data_crc); break;
        default:
            /* a payload byte and the header's checksums (version 2: the
             * payload's too): the checksums alone no longer protect
             * anything */
            if (len > hl)
                out[hl + (size_t)tu_rand_below(&rs, len - hl)] ^= 0x01;
            h.payload_crc = len >= hl + h.payload_len && h.payload_len <= len
                                ? tu_crc32c_ref(0, out + hl, h.payload_len)
                                : h.payload_crc;
            break;
        }
        uint8_t again[32 + 3 * TU_MAX_SAMPLES];
        if (tu_write_header(again, &h) == hl) /* the header keeps its size: in place */
            memcpy(out, again, hl);
        break;
    }
    }
    /* One mutant in four of a version 2 BWT frame gets its payload
     * checksum made to match, so the QLFC decoders see the damage. */
    if (*op != M_FIELD && tu_rand_below(&rs, 4) == 0)
        tu_fix_payload_crc(out, len);
    *pa = a;
    *pb = b;
    return len;
}

/* The staged batch decoder on a mutant info_get accepted, with an output
 * slot of exactly orig_len. Success must give a parent's exact bytes; it
 * must agree with the per-block decoder (result r with capacity cap),
 * except that it refuses blocks over its max_block. */
static void check_batch_path(const uint8_t *frame, const gmtf_frame_info *info, long r, size_t cap,
                             const sample *pa, const sample *pb, tu_guarded *bout, size_t i,
                             const char *op)
{
    uint64_t foff[2] = {0, info->frame_len}, doff[2] = {0, info->orig_len};
    int status = 12345;
    tu_guard_set(bout, info->orig_len);
    int br = gmtf_batch_decode(batch_codec, frame, foff, 1, bout->buf, doff, &status);
    if (!tu_guard_ok(bout))
        fail_msg("mutation %zu (%s of %s): batch decode wrote past its slot", i, op, pa->what);
    if (br != status)
        fail_msg("mutation %zu (%s of %s): batch returned %d, status %d", i, op, pa->what, br,
                 status);
    if (br == 0) {
        int same = 0;
        for (int k = 0; k < 2 && !same; k++) {
            const sample *s = k ? pb : pa;
            same = s->len == info->orig_len && memcmp(bout->buf, s->data, s->len) == 0;
        }
        if (!same)
            fail_msg("mutation %zu (%s of %s): batch path decoded %u bytes that are not the "
                     "original",
                     i, op, pa->what, info->orig_len);
        if (r < 0 && cap >= info->orig_len)
            fail_msg("mutation %zu (%s of %s): batch path decoded what the frame path "
                     "rejected (%s)",
                     i, op, pa->what, gmtf_strerror((int)r));
    } else if (r >= 0 && info->orig_len <= BATCH_MAX_BLOCK) {
        fail_msg("mutation %zu (%s of %s): batch path rejected (%s) a frame the frame path "
                 "decoded",
                 i, op, pa->what, gmtf_strerror(br));
    }
}

static void run_mutations(uint64_t seed, size_t from, size_t to, size_t step)
{
    size_t maxflen = 0, maxlen = 0;
    for (size_t i = 0; i < nsamples; i++) {
        if (samples[i].flen > maxflen)
            maxflen = samples[i].flen;
        if (samples[i].len > maxlen)
            maxlen = samples[i].len;
    }
    size_t outcap = 2 * maxflen + 64;
    uint8_t *m = tu_malloc(outcap);
    tu_guarded out = tu_guarded_alloc(maxlen + 4096), bout = tu_guarded_alloc(maxlen + 4096);
    size_t errors = 0, same = 0, by_op[M_COUNT] = {0};
    for (size_t i = from; i < to; i += step) {
        int op;
        size_t a, b;
        size_t len = mutate(seed, i, m, outcap, &op, &a, &b);
        by_op[op]++;
        /* Output capacity: usually the parent's size (so an inflated
         * orig_len hits -ENOSPC), sometimes more (so it reaches the
         * payload decoders). */
        size_t cap = samples[a].len;
        if (i % 4 == 0)
            cap = out.alloc;
        tu_guard_set(&out, cap);
        /* the mutant alone in an exact allocation: ASan sees any overread */
        uint8_t *copy = tu_malloc(len);
        memcpy(copy, m, len);
        gmtf_frame_info info;
        int ir = gmtf_frame_info_get(copy, len, &info);
        if (ir == 0 && (info.frame_len > len || info.orig_len > GMTF_BLOCK_MAX))
            fail_msg("mutation %zu (%s of %s): info_get accepted frame_len %u of %zu bytes", i,
                     mname[op], samples[a].what, info.frame_len, len);
        long r = gmtf_frame_decode(codec, copy, len, out.buf, cap);
        if (!tu_guard_ok(&out))
            fail_msg("mutation %zu (%s of %s): wrote past the output capacity %zu. "
                     "Rerun: GMTF_SEED=%llu GMTF_MUTATION_ONLY=%zu",
                     i, mname[op], samples[a].what, cap, (unsigned long long)seed, i);
        if (batch_codec && ir == 0 && info.orig_len <= out.alloc)
            check_batch_path(copy, &info, r, cap, &samples[a], &samples[b], &bout, i, mname[op]);
        free(copy);
        if (r < 0) {
            errors++;
            continue;
        }
        if (ir != 0)
            fail_msg("mutation %zu (%s of %s): decoded though info_get said %s", i, mname[op],
                     samples[a].what, gmtf_strerror(ir));
        int ok = 0;
        for (int k = 0; k < 2 && !ok; k++) {
            const sample *s = &samples[k ? b : a];
            ok = r == (long)s->len && memcmp(out.buf, s->data, s->len) == 0;
        }
        if (!ok)
            fail_msg("mutation %zu (%s of %s): decoded %ld bytes that are not the original. "
                     "Rerun: GMTF_SEED=%llu GMTF_MUTATION_ONLY=%zu",
                     i, mname[op], samples[a].what, r, (unsigned long long)seed, i);
        same++;
    }
    printf("# mutations %zu..%zu step %zu: %zu errors, %zu decoded to the original\n", from, to,
           step, errors, same);
    for (int k = 0; k < M_COUNT; k++)
        printf("#   %-9s %zu\n", mname[k], by_op[k]);
    /* Most mutants must be rejected, or the mutations are not biting. */
    assert_true(errors > (errors + same) / 2);
    free(m);
    tu_guarded_free(&out);
    tu_guarded_free(&bout);
}

static void test_mutations(void **state)
{
    (void)state;
    assert_true(nsamples >= 8);
    uint64_t seed = (uint64_t)tu_env_long("GMTF_SEED", 1);
    long only = tu_env_long("GMTF_MUTATION_ONLY", -1);
    if (only >= 0) {
        run_mutations(seed, (size_t)only, (size_t)only + 1, 1);
        return;
    }
    long count = tu_env_long("GMTF_MUTATIONS", GMTF_MUTATIONS_DEFAULT);
    assert_true(count >= 0);
    printf("# %ld mutations in all (GMTF_MUTATIONS), shard %u of %u, seed %llu\n", count, shard,
           nshards, (unsigned long long)seed);
    run_mutations(seed, shard, (size_t)count, nshards);
}

/* The unmutated samples decode, so a rejection above means the mutation. */
static void test_samples_decode(void **state)
{
    (void)state;
    for (size_t i = 0; i < nsamples; i++) {
        uint8_t *out = tu_malloc(samples[i].len);
        long r = gmtf_frame_decode(codec, samples[i].frame, samples[i].flen, out, samples[i].len);
        assert_int_equal(r, (long)samples[i].len);
        assert_memory_equal(out, samples[i].data, samples[i].len);
        free(out);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && sscanf(argv[1], "%u/%u", &shard, &nshards) != 2) {
        fprintf(stderr, "usage: %s [SHARD/SHARDS]\n", argv[0]);
        return 2;
    }
    if (nshards == 0 || shard >= nshards) {
        fprintf(stderr, "bad shard %u/%u\n", shard, nshards);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_decode),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests_name("mutation", tests, setup, teardown);
}
