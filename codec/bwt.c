/* Burrows-Wheeler transform.
 *
 * Forward: libdivsufsort sorts the suffixes; we emit the last column of the
 * n+1 sorted rotations of src+sentinel, leaving out the sentinel row, whose
 * position is the primary index idx[0] (1..n). We also record the rows of
 * the suffixes starting at k*seg (frame version 1: k = 1..K-1, seg =
 * ceil(n/K), K <= 16; version 2: seg = a power of two, 16 or 32 KiB, so 64
 * chains at 2 MiB): the inverse then follows K independent chains at once,
 * so K cache misses are in flight instead of one.
 *
 * Inverse: one packed table E[row] = (F char << 24) | L position of the
 * same occurrence, which is the row of the next suffix once the sentinel
 * row is skipped. A block is at most 2^24 bytes, so positions fit 24 bits
 * and one load per output byte gives both the byte and the next row.
 * E[0] (the sentinel row) points at itself, so any table built from any
 * bytes keeps every walk in bounds; a wrong walk is caught by the frame's
 * data checksum. */
#include <divsufsort.h>
#include <errno.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "bwt.h"
#include "gmtf_codec.h"

unsigned gmtf_bwt_index_count(size_t n)
{
    size_t k = n >> 14;
    if (k < 1)
        k = 1;
    if (k > GMTF_BWT_MAX_INDEXES)
        k = GMTF_BWT_MAX_INDEXES;
    return (unsigned)k;
}

size_t gmtf_bwt_workspace_size(size_t max_block)
{
    return 4 * (max_block + 1);
}

static size_t bwt_segment(size_t n, unsigned k)
{
    return (n + k - 1) / k;
}

unsigned gmtf_bwt_step_log2(size_t n)
{
    return n > (256u << 10) ? GMTF_BWT_STEP_LOG2_LARGE : GMTF_BWT_STEP_LOG2_SMALL;
}

unsigned gmtf_bwt_sample_count(size_t n)
{
    size_t step = (size_t)1 << gmtf_bwt_step_log2(n);
    size_t k = (n + step - 1) / step;
    return (unsigned)(k ? k : 1);
}

/* The last column and the rows of the suffixes at multiples of seg
 * (k of them, idx[0] the primary index); shift: seg = 2^shift, or 0 when
 * seg is not a power of two. */
static int bwt_forward(const uint8_t *src, uint8_t *dst, size_t n, uint32_t *idx, unsigned k,
                       size_t seg, unsigned shift, void *ws)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    saidx_t *sa = ws;
    if (divsufsort(src, sa, (saidx_t)n) != 0)
        return -ENOMEM;
    size_t j = 0;
    dst[j++] = src[n - 1]; /* row 0: the empty suffix, preceded by the last byte */
    for (unsigned i = 0; i < k; i++)
        idx[i] = 0;
    size_t mask = shift ? seg - 1 : 0;
    for (size_t i = 0; i < n; i++) {
        size_t s = (size_t)sa[i];
        if (s == 0) {
            idx[0] = (uint32_t)(i + 1);
            continue;
        }
        dst[j++] = src[s - 1];
        if (shift ? (s & mask) == 0 : s % seg == 0)
            idx[shift ? s >> shift : s / seg] = (uint32_t)(i + 1);
    }
    return j == n && idx[0] ? 0 : -EIO;
}

int gmtf_bwt_forward(const uint8_t *src, uint8_t *dst, size_t n, uint32_t *idx, void *ws)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    unsigned k = gmtf_bwt_index_count(n);
    return bwt_forward(src, dst, n, idx, k, bwt_segment(n, k), 0, ws);
}

int gmtf_bwt_forward_step(const uint8_t *src, uint8_t *dst, size_t n, uint32_t *idx, void *ws)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    unsigned shift = gmtf_bwt_step_log2(n);
    return bwt_forward(src, dst, n, idx, gmtf_bwt_sample_count(n), (size_t)1 << shift, shift, ws);
}

/* Follows nchains chains of len bytes each, interleaved. The chains' bytes
 * go to a small buffer of LINE bytes per chain first, then out a line at a
 * time: written straight to dst[k * seg + t], many chains a power of two
 * apart (version 2's steps) would all hit the same cache sets. At most
 * WALK_GROUP chains at once (a group walks its whole length, then the
 * next group): enough loads in flight, and the line buffers (2 KiB) stay
 * in L1 beside the table's lines, where 512 chains of a 16 MiB block at
 * once took 32 KiB. The inverse of a 16 MiB block of the Linux tar 0.78x
 * the time of all chains at once, 8 MiB 0.82x, 4 MiB 0.89x (64 and 16 a
 * group: slower than 32; docs/entropy.md, "Method 2's AVX-512 decoder"). */
#define WALK_LINE 64
#ifndef WALK_GROUP
#define WALK_GROUP 32
#endif
static void bwt_walk_group(const uint32_t *e, uint32_t p, uint32_t *row, uint8_t *dst, size_t seg,
                           unsigned nchains, size_t from, size_t len)
{
    uint8_t buf[WALK_GROUP * WALK_LINE];
    size_t t = from, end = from + len;
    while (t < end) {
        size_t m = end - t < WALK_LINE ? end - t : WALK_LINE;
        for (size_t i = 0; i < m; i++) {
            for (unsigned k = 0; k < nchains; k++) {
                uint32_t v = e[row[k]];
                buf[k * WALK_LINE + i] = (uint8_t)(v >> 24);
                uint32_t w = v & 0xffffff;
                row[k] = w + (w >= p);
            }
        }
        for (unsigned k = 0; k < nchains; k++)
            memcpy(dst + k * seg + t, buf + k * WALK_LINE, m);
        t += m;
    }
}

static void bwt_walk(const uint32_t *e, uint32_t p, uint32_t *row, uint8_t *dst, size_t seg,
                     unsigned nchains, size_t from, size_t len)
{
    for (unsigned g = 0; g < nchains; g += WALK_GROUP)
        bwt_walk_group(e, p, row + g, dst + g * seg, seg,
                       nchains - g < WALK_GROUP ? nchains - g : WALK_GROUP, from, len);
}

/* The table E of the inverse for bwt[0..n) (header comment). The block is
 * taken as four parts, each with its own counts and its own places in
 * every bucket (a part's occurrences of a byte follow the previous
 * part's), filled in one loop: four independent chains of loads and
 * stores instead of one, which runs of one byte would serialise. About 30%
 * faster than one pass on 4 MiB of the Linux tar. The parts are quarters,
 * or those of counts the entropy decoder gave (then no counting pass). */
static void bwt_table(const uint8_t *bwt, size_t n, uint32_t *e, const gmtf_bwt_counts *given)
{
    uint32_t next[4][256];
    gmtf_bwt_counts own;
    const gmtf_bwt_counts *c = given;
    if (!c) {
        size_t qn = n / 4;
        for (unsigned k = 0; k < 4; k++)
            own.start[k] = (uint32_t)(k * qn);
        own.start[4] = (uint32_t)n;
        memset(own.cnt, 0, sizeof own.cnt);
        const uint8_t *p0 = bwt, *p1 = bwt + qn, *p2 = bwt + 2 * qn, *p3 = bwt + 3 * qn;
        for (size_t i = 0; i < qn; i++) {
            own.cnt[0][p0[i]]++;
            own.cnt[1][p1[i]]++;
            own.cnt[2][p2[i]]++;
            own.cnt[3][p3[i]]++;
        }
        for (size_t q = 4 * qn; q < n; q++)
            own.cnt[3][bwt[q]]++;
        c = &own;
    }
    uint32_t sum = 1; /* row 0 is the sentinel */
    for (unsigned v = 0; v < 256; v++)
        for (unsigned k = 0; k < 4; k++) {
            next[k][v] = sum;
            sum += c->cnt[k][v];
        }
    e[0] = 0;
    /* the four parts in step up to the shortest one's length, then each
     * part's rest */
    uint32_t s0 = c->start[0], s1 = c->start[1], s2 = c->start[2], s3 = c->start[3], m = UINT32_MAX;
    for (unsigned k = 0; k < 4; k++)
        if (c->start[k + 1] - c->start[k] < m)
            m = c->start[k + 1] - c->start[k];
    const uint8_t *p0 = bwt + s0, *p1 = bwt + s1, *p2 = bwt + s2, *p3 = bwt + s3;
    for (uint32_t i = 0; i < m; i++) {
        uint8_t c0 = p0[i], c1 = p1[i], c2 = p2[i], c3 = p3[i];
        e[next[0][c0]++] = (uint32_t)c0 << 24 | (i + s0);
        e[next[1][c1]++] = (uint32_t)c1 << 24 | (i + s1);
        e[next[2][c2]++] = (uint32_t)c2 << 24 | (i + s2);
        e[next[3][c3]++] = (uint32_t)c3 << 24 | (i + s3);
    }
    for (unsigned k = 0; k < 4; k++)
        for (uint32_t q = c->start[k] + m; q < c->start[k + 1]; q++) {
            uint8_t v = bwt[q];
            e[next[k][v]++] = (uint32_t)v << 24 | q;
        }
}

int gmtf_bwt_counts_check(const gmtf_bwt_counts *c, size_t n)
{
    if (c->start[0] != 0 || c->start[4] != n)
        return GMTF_E_CORRUPT;
    for (unsigned k = 0; k < 4; k++) {
        if (c->start[k + 1] < c->start[k])
            return GMTF_E_CORRUPT;
        uint64_t sum = 0;
        for (unsigned v = 0; v < 256; v++)
            sum += c->cnt[k][v];
        if (sum != c->start[k + 1] - c->start[k])
            return GMTF_E_CORRUPT;
    }
    return 0;
}

static int bwt_check_samples(size_t n, const uint32_t *idx, unsigned k)
{
    if (n == 0 || n > GMTF_BLOCK_MAX || k == 0 || k > GMTF_BWT_MAX_SAMPLES)
        return GMTF_E_CORRUPT;
    for (unsigned i = 0; i < k; i++)
        if (idx[i] == 0 || idx[i] > n)
            return GMTF_E_CORRUPT;
    return 0;
}

/* k chains of seg bytes (the last one shorter), started at idx[0..k), over
 * the table e. */
static void bwt_walk_all(const uint32_t *e, uint8_t *dst, size_t n, const uint32_t *idx, unsigned k,
                         size_t seg)
{
    uint32_t row[GMTF_BWT_MAX_SAMPLES];
    memcpy(row, idx, k * sizeof *row);
    size_t last = n - (k - 1) * seg; /* the last chain is the shortest */
    bwt_walk(e, idx[0], row, dst, seg, k, 0, last);
    if (k > 1)
        bwt_walk(e, idx[0], row, dst, seg, k - 1, last, seg - last);
}

static int bwt_inverse(const uint8_t *bwt, uint8_t *dst, size_t n, const uint32_t *idx, unsigned k,
                       size_t seg, void *ws, const gmtf_bwt_counts *c)
{
    int rc = bwt_check_samples(n, idx, k);
    if (!rc && c)
        rc = gmtf_bwt_counts_check(c, n);
    if (rc)
        return rc;
    bwt_table(bwt, n, ws, c);
    bwt_walk_all(ws, dst, n, idx, k, seg);
    return 0;
}

int gmtf_bwt_inverse(const uint8_t *bwt, uint8_t *dst, size_t n, const uint32_t *idx, void *ws)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    unsigned k = gmtf_bwt_index_count(n);
    return bwt_inverse(bwt, dst, n, idx, k, bwt_segment(n, k), ws, NULL);
}

int gmtf_bwt_inverse_counted(const uint8_t *bwt, uint8_t *dst, size_t n, const uint32_t *idx,
                             void *ws, const gmtf_bwt_counts *c)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    return bwt_inverse(bwt, dst, n, idx, gmtf_bwt_sample_count(n),
                       (size_t)1 << gmtf_bwt_step_log2(n), ws, c);
}

int gmtf_bwt_inverse_step(const uint8_t *bwt, uint8_t *dst, size_t n, const uint32_t *idx, void *ws)
{
    return gmtf_bwt_inverse_counted(bwt, dst, n, idx, ws, NULL);
}

int gmtf_bwt_table_counted(const uint8_t *bwt, size_t n, const uint32_t *idx, void *ws,
                           const gmtf_bwt_counts *c)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    int rc = bwt_check_samples(n, idx, gmtf_bwt_sample_count(n));
    if (!rc && c)
        rc = gmtf_bwt_counts_check(c, n);
    if (!rc)
        bwt_table(bwt, n, ws, c);
    return rc;
}

int gmtf_bwt_table_step(const uint8_t *bwt, size_t n, const uint32_t *idx, void *ws)
{
    return gmtf_bwt_table_counted(bwt, n, idx, ws, NULL);
}

/* Chains k0..k1 in lockstep, each from its sample to the end of its
 * segment or of the range; bytes before off are walked, not kept. */
static void bwt_walk_range(const uint32_t *e, const uint32_t *idx, unsigned shift, size_t off,
                           size_t len, uint8_t *dst)
{
    size_t end = off + len;
    unsigned k0 = (unsigned)(off >> shift), k1 = (unsigned)((end - 1) >> shift);
    uint32_t p = idx[0], row[GMTF_BWT_MAX_SAMPLES];
    size_t pos[GMTF_BWT_MAX_SAMPLES], stop[GMTF_BWT_MAX_SAMPLES];
    unsigned m = k1 - k0 + 1; /* >= 1: len > 0 (the caller's check) */
    pos[0] = (size_t)k0 << shift;
    for (unsigned i = 0; i < m; i++) {
        row[i] = idx[k0 + i];
        pos[i] = (size_t)(k0 + i) << shift;
        stop[i] = ((size_t)(k0 + i) + 1) << shift;
        if (stop[i] > end)
            stop[i] = end;
    }
    /* Chain k0 alone up to off (the others start at their own sample). */
    for (; pos[0] < off; pos[0]++) {
        uint32_t w = e[row[0]] & 0xffffff;
        row[0] = w + (w >= p);
    }
    for (int busy = 1; busy;) {
        busy = 0;
        for (unsigned i = 0; i < m; i++) {
            if (pos[i] == stop[i])
                continue;
            uint32_t v = e[row[i]], w = v & 0xffffff;
            dst[pos[i]++ - off] = (uint8_t)(v >> 24);
            row[i] = w + (w >= p);
            busy = 1;
        }
    }
}

void gmtf_bwt_range_step(const void *ws, size_t n, const uint32_t *idx, size_t off, size_t len,
                         uint8_t *dst)
{
    if (len == 0)
        return;
    unsigned shift = gmtf_bwt_step_log2(n);
    if (off == 0 && len == n)
        bwt_walk_all(ws, dst, n, idx, gmtf_bwt_sample_count(n), (size_t)1 << shift);
    else
        bwt_walk_range(ws, idx, shift, off, len, dst);
}

/* ---- range decoding without the table ---------------------------------
 * A range of a few KiB walks about one step (32 KiB) of one chain, while
 * the table E costs a pass that writes 4 bytes for every byte of the
 * block. Instead: the counts of every byte value in bwt[0, g * RANK_CHUNK)
 * for g = 0 .. ng (ng = ceil(n / RANK_CHUNK); a quarter of a byte per
 * byte, one sequential pass), and the chains walked backwards by LF, one
 * rank at a time: LF(row) = C[c] + (occurrences of c before i), i the
 * row's position in bwt (the sentinel row p left out), c = bwt[i], the
 * byte before that row's suffix. The rank is a checkpoint plus a count of
 * c over at most half a chunk (from the nearer checkpoint). A chain from
 * the sample of the suffix at (k + 1) * step (the row of the empty suffix,
 * 0, for the last one) gives the step's bytes last first. */
#define RANK_SHIFT GMTF_BWT_RANK_SHIFT
#define RANK_CHUNK (1u << RANK_SHIFT)

static size_t rank_chunks(size_t n)
{
    return (n + RANK_CHUNK - 1) >> RANK_SHIFT;
}

int gmtf_bwt_rank_fits(size_t n, size_t max_block)
{
    return n >= GMTF_BWT_RANK_MIN &&
           (rank_chunks(n) + 1) * 256 * sizeof(uint32_t) <= gmtf_bwt_workspace_size(max_block);
}

/* Occurrences of c in s[0, len). */
static uint32_t count_byte(const uint8_t *s, size_t len, uint8_t c)
{
    uint32_t r = 0;
#if defined(__SSE2__)
    __m128i cv = _mm_set1_epi8((char)c), zero = _mm_setzero_si128();
    while (len >= 16) {
        size_t m = len / 16 < 255 ? len / 16 : 255; /* a byte counter per lane */
        __m128i acc = zero;
        for (size_t k = 0; k < m; k++, s += 16)
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)s), cv));
        __m128i sad = _mm_sad_epu8(acc, zero);
        r += (uint32_t)_mm_cvtsi128_si32(sad) + (uint32_t)_mm_extract_epi16(sad, 4);
        len -= m * 16;
    }
#endif
    for (; len; len--)
        r += *s++ == c;
    return r;
}

int gmtf_bwt_rank_given(size_t n, const uint32_t *idx)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    return bwt_check_samples(n, idx, gmtf_bwt_sample_count(n));
}

int gmtf_bwt_rank_table(const uint8_t *bwt, size_t n, const uint32_t *idx, void *ws)
{
    int rc = gmtf_bwt_rank_given(n, idx);
    if (rc)
        return rc;
    uint32_t(*chk)[256] = ws, run[4][256];
    memset(run, 0, sizeof run);
    size_t ng = rank_chunks(n);
    for (size_t g = 0; g <= ng; g++) {
        for (unsigned v = 0; v < 256; v++)
            chk[g][v] = run[0][v] + run[1][v] + run[2][v] + run[3][v];
        if (g == ng)
            break;
        size_t a = g << RANK_SHIFT, b = a + RANK_CHUNK < n ? a + RANK_CHUNK : n, i = a;
        for (; i + 4 <= b; i += 4) {
            run[0][bwt[i]]++;
            run[1][bwt[i + 1]]++;
            run[2][bwt[i + 2]]++;
            run[3][bwt[i + 3]]++;
        }
        for (; i < b; i++)
            run[0][bwt[i]]++;
    }
    return 0;
}

void gmtf_bwt_rank_range(const uint8_t *bwt, const void *ws, size_t n, const uint32_t *idx,
                         size_t off, size_t len, uint8_t *dst)
{
    if (len == 0)
        return;
    const uint32_t(*chk)[256] = ws;
    size_t ng = rank_chunks(n), end = off + len;
    uint32_t c0[256], sum = 1; /* row 0 is the sentinel */
    for (unsigned v = 0; v < 256; v++) {
        c0[v] = sum;
        sum += chk[ng][v];
    }
    unsigned shift = gmtf_bwt_step_log2(n), count = gmtf_bwt_sample_count(n);
    unsigned k0 = (unsigned)(off >> shift), k1 = (unsigned)((end - 1) >> shift);
    uint32_t p = idx[0];
    for (unsigned k = k0; k <= k1; k++) {
        size_t s = k + 1 < count ? (size_t)(k + 1) << shift : n; /* the suffix we stand at */
        uint32_t r = k + 1 < count ? idx[k + 1] : 0;
        size_t lo = (size_t)k << shift > off ? (size_t)k << shift : off;
        while (s > lo) {
            size_t i = r - (r > p);
            i = i < n ? i : n - 1; /* rows are <= n; p itself only on bad input */
            uint8_t c = bwt[i];
            size_t a = i & ~(size_t)(RANK_CHUNK - 1), g = i >> RANK_SHIFT;
            uint32_t rk = i - a >= RANK_CHUNK / 2 && a + RANK_CHUNK <= n
                              ? chk[g + 1][c] - count_byte(bwt + i, a + RANK_CHUNK - i, c)
                              : chk[g][c] + count_byte(bwt + a, i - a, c);
            if (--s < end)
                dst[s - off] = c;
            r = c0[c] + rk; /* <= n: bwt[i] = c is counted in chk, not in rk */
        }
    }
}

int gmtf_bwt_rank_to_table(const uint8_t *bwt, size_t n, void *ws)
{
    const uint32_t(*chk)[256] = ws;
    size_t ng = rank_chunks(n);
    gmtf_bwt_counts c;
    for (unsigned k = 0; k <= 4; k++) {
        size_t g = ng * k / 4, at = g << RANK_SHIFT;
        c.start[k] = (uint32_t)(at < n ? at : n);
        if (k < 4) {
            size_t h = ng * (k + 1) / 4;
            for (unsigned v = 0; v < 256; v++)
                c.cnt[k][v] = chk[h][v] - chk[g][v];
        }
    }
    int rc = gmtf_bwt_counts_check(&c, n);
    if (!rc)
        bwt_table(bwt, n, ws, &c);
    return rc;
}
