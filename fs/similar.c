/* Near-duplicate clustering of a flush's small pieces (fs_internal.h,
 * fs_similar_roots): a piece whose lines mostly match those of an earlier
 * piece of the same flush is packed right after it, so that the BWT of
 * their pack sees both. docs/format.md, "Packing order".
 *
 * Each piece's set of lines (those longer than SIM_MIN_LINE bytes; a piece
 * needs SIM_MIN_LINES of them) is summarized by SIM_K minimum hashes, one
 * per salt: two pieces agree on a minimum with the probability of their
 * sets' Jaccard similarity. Candidates are found by bands of two minima
 * (SIM_K / 2 bands) among the pieces before, a bucket keeping its last
 * SIM_CHAIN members only, so the work is linear in the input whatever it
 * holds; the candidate agreeing on the most minima (the latest on a tie)
 * is the partner when it agrees on SIM_MATCH or more. A piece's root is its
 * partner's root: the caller orders pieces by (root, own position). Only
 * bytes are read: the result depends on the pieces' contents and order
 * alone, so images stay reproducible. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fs_internal.h"

#define SIM_K 8
#define SIM_BANDS (SIM_K / 2)
#define SIM_MIN_LINE 13
#define SIM_MIN_LINES 4
#define SIM_MATCH 4
#define SIM_CHAIN 8

static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ull;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Words are read little-endian (load_le64), so that hashes and line ends
 * (and so the packing order, and the image) are the same on every host. */
static uint64_t line_hash(const uint8_t *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ load_le64(s + i)) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    for (unsigned k = 0; i + k < n; k++)
        w |= (uint64_t)s[i + k] << (8 * k);
    return mix64(h ^ w);
}

struct sig_state {
    uint32_t m[SIM_K];
    size_t lines;
};

/* A line's hash h gives SIM_K 32-bit values (h's halves through an odd
 * multiplier and an xorshift each: a loop compilers turn into a few vector
 * instructions). */
static void sig_line(struct sig_state *st, const uint8_t *s, size_t n)
{
    static const uint32_t mul[SIM_K] = {0x9e3779b1u, 0x85ebca77u, 0xc2b2ae3du, 0x27d4eb2fu,
                                        0x165667b1u, 0xd3a2646du, 0xfd7046c5u, 0xb55a4f09u};
    if (n < SIM_MIN_LINE)
        return;
    uint64_t h = line_hash(s, n);
    uint32_t lo = (uint32_t)h, hi = (uint32_t)(h >> 32);
    for (int k = 0; k < SIM_K; k++) {
        uint32_t v = (lo ^ (hi >> (k & 7))) * mul[k] + hi;
        v ^= v >> 15;
        st->m[k] = v < st->m[k] ? v : st->m[k];
    }
    st->lines++;
}

/* The minima of one piece; 0 when it has too few long lines. Line ends are
 * found a word at a time (bytes equal to '\n' by the exact zero-byte test:
 * no carries between bytes, so no false hits). */
static int piece_sig(const uint8_t *b, size_t n, uint32_t sig[SIM_K])
{
    const uint64_t ones = 0x0101010101010101ull, low7 = 0x7f7f7f7f7f7f7f7full;
    struct sig_state st = {.lines = 0};
    for (int k = 0; k < SIM_K; k++)
        st.m[k] = UINT32_MAX;
    size_t start = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t t = load_le64(b + i) ^ (ones * '\n');
        uint64_t z = ~(((t & low7) + low7) | t | low7);
        while (z) {
            size_t at = i + (size_t)(__builtin_ctzll(z) >> 3);
            sig_line(&st, b + start, at - start);
            start = at + 1;
            z &= z - 1;
        }
    }
    for (; i < n; i++)
        if (b[i] == '\n') {
            sig_line(&st, b + start, i - start);
            start = i + 1;
        }
    if (start < n)
        sig_line(&st, b + start, n - start);
    memcpy(sig, st.m, sizeof st.m);
    return st.lines >= SIM_MIN_LINES;
}

struct sim_head {
    uint64_t key;
    uint32_t last; /* entry + 1; 0: empty slot */
};

struct sim_entry {
    uint32_t piece;
    uint32_t next; /* entry + 1 of the bucket's member before; 0: none */
};

static uint64_t band_key(const uint32_t *sig, int b)
{
    return mix64((uint64_t)sig[2 * b] << 32 ^ sig[2 * b + 1] ^ (uint64_t)b << 61) | 1;
}

/* The signature pass, on up to `threads` threads: pieces taken SIM_GRAIN
 * at a time (each piece's minima depend on its bytes alone). */
#define SIM_GRAIN 32
#define SIM_THREADS_MAX 16

struct sig_job {
    const uint8_t *const *buf;
    const uint32_t *len;
    size_t n;
    uint32_t (*sig)[SIM_K];
    uint8_t *has;
    atomic_size_t next;
};

static void *sig_work(void *arg)
{
    struct sig_job *j = arg;
    for (;;) {
        size_t a = atomic_fetch_add(&j->next, SIM_GRAIN);
        if (a >= j->n)
            return NULL;
        size_t e = a + SIM_GRAIN < j->n ? a + SIM_GRAIN : j->n;
        for (size_t i = a; i < e; i++)
            j->has[i] = (uint8_t)piece_sig(j->buf[i], j->len[i], j->sig[i]);
    }
}

static void sig_pass(struct sig_job *j, unsigned threads)
{
    pthread_t t[SIM_THREADS_MAX];
    unsigned started = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < j->n; i++)
        bytes += j->len[i];
    if (threads > SIM_THREADS_MAX)
        threads = SIM_THREADS_MAX;
    if (bytes < (8u << 20)) /* not worth a thread */
        threads = 1;
    while (started + 1 < threads && pthread_create(&t[started], NULL, sig_work, j) == 0)
        started++;
    sig_work(j);
    for (unsigned k = 0; k < started; k++)
        pthread_join(t[k], NULL);
}

int fs_similar_roots(const uint8_t *const *buf, const uint32_t *len, size_t n, unsigned threads,
                     uint32_t *root)
{
    for (size_t i = 0; i < n; i++)
        root[i] = (uint32_t)i;
    if (n < 2 || n > UINT32_MAX / SIM_BANDS - 1)
        return 0;
    uint32_t(*sig)[SIM_K] = malloc(n * sizeof *sig);
    uint8_t *has = malloc(n);
    size_t slots = 16;
    while (slots < 2 * SIM_BANDS * n)
        slots *= 2;
    struct sim_head *head = calloc(slots, sizeof *head);
    struct sim_entry *ent = malloc(SIM_BANDS * n * sizeof *ent);
    int rc = 0;
    if (!sig || !has || !head || !ent) {
        rc = -ENOMEM;
        goto out;
    }
    struct sig_job job = {.buf = buf, .len = len, .n = n, .sig = sig, .has = has};
    atomic_init(&job.next, 0);
    sig_pass(&job, threads);
    uint32_t nent = 0;
    for (size_t i = 0; i < n; i++) {
        if (!has[i])
            continue;
        size_t best = SIZE_MAX;
        int bm = -1;
        struct sim_head *h[SIM_BANDS];
        for (int b = 0; b < SIM_BANDS; b++) {
            uint64_t key = band_key(sig[i], b);
            size_t s = (size_t)key & (slots - 1);
            while (head[s].last && head[s].key != key)
                s = (s + 1) & (slots - 1);
            h[b] = &head[s];
            h[b]->key = key;
            int hops = 0;
            for (uint32_t e = h[b]->last; e && hops < SIM_CHAIN; e = ent[e - 1].next, hops++) {
                size_t c = ent[e - 1].piece;
                int m = 0;
                for (int k = 0; k < SIM_K; k++)
                    m += sig[c][k] == sig[i][k];
                if (m > bm || (m == bm && c > best)) {
                    best = c;
                    bm = m;
                }
            }
        }
        if (bm >= SIM_MATCH)
            root[i] = root[best];
        for (int b = 0; b < SIM_BANDS; b++) {
            ent[nent] = (struct sim_entry){.piece = (uint32_t)i, .next = h[b]->last};
            h[b]->last = ++nent;
        }
    }
out:
    free(sig);
    free(has);
    free(head);
    free(ent);
    return rc;
}
