/* The AVX-512 family: the whole 256-byte queue lives in four ZMM registers,
 * so no step touches memory. A compare against 64 positions yields a mask
 * register; positions 0..r are rewritten with one masked move.
 *
 * "avx512bw": AVX-512F/BW only (Skylake-X and later): one symbol per step;
 *   byte shifts by VALIGNQ + VPALIGNR.
 * "avx512":   adds VBMI (Ice Lake, Zen 4 and later): encode looks up two
 *   symbols per step when both are in the first 64 positions; decode moves
 *   a byte to the front with one VPERMB, composing two steps into one.
 * "avx512x2": the "avx512" steps with two blocks interleaved, so the two
 *   dependency chains overlap (encode2/decode2); one block is encoded as
 *   two halves the same way, and decoded as "avx512" does. */
#include "mtf_internal.h"
#include "mtf_runs.h"

#if GMTF_SIMD_X86
#include <immintrin.h>

#define T_BW __attribute__((target("avx512f,avx512bw,bmi,bmi2")))
#define T_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi,bmi,bmi2")))

typedef struct {
    __m512i h0, h1, h2, h3; /* queue positions 0..63, 64..127, ... */
} q512;

T_BW static inline void q512_init(q512 *q)
{
    __m512i iota = _mm512_loadu_si512(gmtf_simd_rot64[0]);
    q->h0 = iota;
    q->h1 = _mm512_add_epi8(iota, _mm512_set1_epi8(64));
    q->h2 = _mm512_add_epi8(iota, _mm512_set1_epi8((char)128));
    q->h3 = _mm512_add_epi8(iota, _mm512_set1_epi8((char)192));
}

/* lanes 0..l set, l < 64 */
static inline uint64_t le64(unsigned l)
{
    return ~0ull >> (63 - l);
}

/* ---- AVX-512BW ---------------------------------------------------------- */

/* [prev[63], cur[0..62]] with VALIGNQ (whole lanes) + VPALIGNR (bytes) */
T_BW static inline __m512i push_bw(__m512i cur, __m512i prev)
{
    return _mm512_alignr_epi8(cur, _mm512_alignr_epi64(cur, prev, 6), 15);
}

/* Shifts positions 0..r back by one across the four registers and puts the
 * broadcast byte bs first; m1..m3 select the positions < r + 1 of h1..h3. */
T_BW static inline void q512_push_bw(q512 *q, __m512i bs, uint64_t m1, uint64_t m2, uint64_t m3)
{
    __m512i h0 = q->h0, h1 = q->h1, h2 = q->h2;
    q->h3 = _mm512_mask_mov_epi8(q->h3, m3, push_bw(q->h3, h2));
    q->h2 = _mm512_mask_mov_epi8(h2, m2, push_bw(h2, h1));
    q->h1 = _mm512_mask_mov_epi8(h1, m1, push_bw(h1, h0));
    q->h0 = push_bw(h0, bs);
}

T_BW static inline unsigned enc_step_bw(q512 *q, unsigned s)
{
    __m512i bs = _mm512_set1_epi8((char)s);
    uint64_t k = _mm512_cmpeq_epi8_mask(q->h0, bs);
    if (__builtin_expect(k != 0, 1)) {
        __m512i sh = push_bw(q->h0, bs);
        __asm__("" : "+v"(sh)); /* keep the shifts off the mask chain */
        /* k ^ (k - 1) in mask registers: a general-register round trip costs more */
        __mmask64 upto = _kxor_mask64(k, _kadd_mask64(k, _cvtu64_mask64(~0ull)));
        q->h0 = _mm512_mask_mov_epi8(q->h0, upto, sh);
        return (unsigned)__builtin_ctzll(k);
    }
    uint64_t a1 = _mm512_cmpeq_epi8_mask(q->h1, bs);
    uint64_t a2 = _mm512_cmpeq_epi8_mask(q->h2, bs);
    uint64_t a3 = _mm512_cmpeq_epi8_mask(q->h3, bs);
    /* blsmsk(0) = all ones: registers before the match shift entirely */
    uint64_t m1 = _blsmsk_u64(a1);
    uint64_t m2 = a1 ? 0 : _blsmsk_u64(a2);
    uint64_t m3 = (a1 | a2) ? 0 : _blsmsk_u64(a3);
    q512_push_bw(q, bs, m1, m2, m3);
    return a1   ? 64 + (unsigned)__builtin_ctzll(a1)
           : a2 ? 128 + (unsigned)__builtin_ctzll(a2)
                : 192 + (unsigned)__builtin_ctzll(a3);
}

/* byte l of v broadcast to every 16-bit lane's low byte (VPERMW + VPSRLVW) */
T_BW static inline __m512i pick_bw(__m512i v, unsigned l)
{
    __m512i w = _mm512_permutexvar_epi16(_mm512_set1_epi16((short)(l >> 1)), v);
    return _mm512_srlv_epi16(w, _mm512_set1_epi16((short)((l & 1) * 8)));
}

T_BW static inline unsigned dec_step_bw(q512 *q, unsigned r)
{
    if (__builtin_expect(r < 16, 1)) { /* one in-lane shuffle rotates 0..r */
        q->h0 = _mm512_shuffle_epi8(q->h0, _mm512_load_si512(gmtf_simd_rot64[r]));
        return (unsigned)_mm_cvtsi128_si32(_mm512_castsi512_si128(q->h0)) & 0xff;
    }
    if (r < 64) {
        __m512i sv = pick_bw(q->h0, r);
        __m512i h = _mm512_mask_mov_epi8(q->h0, le64(r), push_bw(q->h0, q->h0));
        q->h0 = _mm512_mask_mov_epi8(h, 1, sv);
        return (unsigned)_mm_cvtsi128_si32(_mm512_castsi512_si128(sv)) & 0xff;
    }
    unsigned j = r >> 6, l = r & 63;
    __m512i hj = j == 1 ? q->h1 : j == 2 ? q->h2 : q->h3;
    __m512i sv = pick_bw(hj, l);
    unsigned s = (unsigned)_mm_cvtsi128_si32(_mm512_castsi512_si128(sv)) & 0xff;
    uint64_t m1 = j == 1 ? le64(l) : ~0ull;
    uint64_t m2 = j == 2 ? le64(l) : j > 2 ? ~0ull : 0;
    uint64_t m3 = j == 3 ? le64(l) : 0;
    q512_push_bw(q, _mm512_set1_epi8((char)s), m1, m2, m3);
    return s;
}

/* Without VBMI2 (no byte compress) the run heads go through the scalar
 * helpers of mtf_runs.h. */
T_BW void gmtf_simd_mtf_encode_avx512bw(const uint8_t *src, uint8_t *dst, size_t n)
{
    q512 q;
    gmtf_runs_work w;
    unsigned prev = 0; /* the queue front: a leading 0 has rank 0 */
    q512_init(&q);
    for (size_t off = 0; off < n; off += GMTF_RUNS_PIECE) {
        size_t len = n - off < GMTF_RUNS_PIECE ? n - off : GMTF_RUNS_PIECE;
        if (!GMTF_RUNS_WORTH(gmtf_runs_repeats(src + off, len, prev), len)) {
            for (size_t i = off; i < off + len; i++)
                dst[i] = (uint8_t)enc_step_bw(&q, src[i]);
            prev = src[off + len - 1];
            continue;
        }
        size_t nh = gmtf_runs_heads(src + off, len, &prev, &w);
        for (size_t j = 0; j < nh; j++)
            w.out[j] = (uint8_t)enc_step_bw(&q, w.in[j]);
        gmtf_runs_scatter(dst + off, len, nh, &w);
    }
}

T_BW void gmtf_simd_mtf_decode_avx512bw(const uint8_t *src, uint8_t *dst, size_t n)
{
    q512 q;
    gmtf_runs_work w;
    q512_init(&q);
    w.out[0] = 0;
    for (size_t off = 0; off < n; off += GMTF_RUNS_PIECE) {
        size_t len = n - off < GMTF_RUNS_PIECE ? n - off : GMTF_RUNS_PIECE;
        if (!GMTF_RUNS_WORTH(gmtf_runs_zeros(src + off, len), len)) {
            for (size_t i = off; i < off + len; i++)
                dst[i] = (uint8_t)dec_step_bw(&q, src[i]);
            w.out[0] = dst[off + len - 1];
            continue;
        }
        size_t nh = gmtf_runs_nonzero(src + off, len, &w);
        for (size_t j = 0; j < nh; j++)
            w.out[1 + j] = (uint8_t)dec_step_bw(&q, w.in[j]);
        gmtf_runs_fill(src + off, dst + off, len, nh, &w);
    }
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(avx512bw)

/* ---- AVX-512VBMI -------------------------------------------------------- */

/* index vectors for VPERMT2B: lane 0 takes the second operand's lane 63
 * (push) or lanes 0, 1 (push2); the rest take cur[i - 1] or cur[i - 2] */
#define IDX_ROW(f)                                                                                 \
    f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), f(8), f(9), f(10), f(11), f(12), f(13), f(14), \
        f(15), f(16), f(17), f(18), f(19), f(20), f(21), f(22), f(23), f(24), f(25), f(26), f(27), \
        f(28), f(29), f(30), f(31), f(32), f(33), f(34), f(35), f(36), f(37), f(38), f(39), f(40), \
        f(41), f(42), f(43), f(44), f(45), f(46), f(47), f(48), f(49), f(50), f(51), f(52), f(53), \
        f(54), f(55), f(56), f(57), f(58), f(59), f(60), f(61), f(62), f(63)
#define PUSH1(i) ((i) == 0 ? 127 : (i)-1)
#define PUSH2(i) ((i) < 2 ? 64 + (i) : (i)-2)
static const uint8_t idx_push1[64] __attribute__((aligned(64))) = {IDX_ROW(PUSH1)};
static const uint8_t idx_push2[64] __attribute__((aligned(64))) = {IDX_ROW(PUSH2)};

T_VBMI static inline __m512i push_vb(__m512i cur, __m512i prev, __m512i ip1)
{
    return _mm512_permutex2var_epi8(cur, ip1, prev);
}

typedef struct {
    q512 q;
    __m512i ip1, ip2; /* idx_push1, idx_push2 kept in registers */
} st512;

T_VBMI static inline void st512_init(st512 *st)
{
    q512_init(&st->q);
    st->ip1 = _mm512_load_si512(idx_push1);
    st->ip2 = _mm512_load_si512(idx_push2);
}

T_VBMI static inline unsigned enc_step_vb(st512 *st, unsigned s)
{
    q512 *q = &st->q;
    __m512i bs = _mm512_set1_epi8((char)s);
    uint64_t k = _mm512_cmpeq_epi8_mask(q->h0, bs);
    __m512i sh0 = push_vb(q->h0, bs, st->ip1);
    if (__builtin_expect(k != 0, 1)) {
        q->h0 = _mm512_mask_mov_epi8(q->h0, _blsmsk_u64(k), sh0);
        return (unsigned)__builtin_ctzll(k);
    }
    uint64_t a1 = _mm512_cmpeq_epi8_mask(q->h1, bs);
    uint64_t a2 = _mm512_cmpeq_epi8_mask(q->h2, bs);
    uint64_t a3 = _mm512_cmpeq_epi8_mask(q->h3, bs);
    uint64_t m1 = _blsmsk_u64(a1);
    uint64_t m2 = a1 ? 0 : _blsmsk_u64(a2);
    uint64_t m3 = (a1 | a2) ? 0 : _blsmsk_u64(a3);
    __m512i h0 = q->h0, h1 = q->h1, h2 = q->h2;
    q->h3 = _mm512_mask_mov_epi8(q->h3, m3, push_vb(q->h3, h2, st->ip1));
    q->h2 = _mm512_mask_mov_epi8(h2, m2, push_vb(h2, h1, st->ip1));
    q->h1 = _mm512_mask_mov_epi8(h1, m1, push_vb(h1, h0, st->ip1));
    q->h0 = sh0;
    return a1   ? 64 + (unsigned)__builtin_ctzll(a1)
           : a2 ? 128 + (unsigned)__builtin_ctzll(a2)
                : 192 + (unsigned)__builtin_ctzll(a3);
}

T_VBMI static inline unsigned dec_step_vb(st512 *st, unsigned r)
{
    q512 *q = &st->q;
    if (__builtin_expect(r < 64, 1)) {
        q->h0 = _mm512_permutexvar_epi8(_mm512_load_si512(gmtf_simd_rot64[r]), q->h0);
        return (unsigned)_mm_cvtsi128_si32(_mm512_castsi512_si128(q->h0)) & 0xff;
    }
    unsigned j = r >> 6, l = r & 63;
    __m512i bl = _mm512_set1_epi8((char)l);
    /* queue position r, broadcast: h1|h2 by VPERMI2B, or h3 */
    __m512i sv = j == 3 ? _mm512_permutexvar_epi8(bl, q->h3)
                        : _mm512_permutex2var_epi8(q->h1, _mm512_set1_epi8((char)(r - 64)), q->h2);
    uint64_t m1 = j == 1 ? le64(l) : ~0ull;
    uint64_t m2 = j == 2 ? le64(l) : j > 2 ? ~0ull : 0;
    uint64_t m3 = j == 3 ? le64(l) : 0;
    __m512i h0 = q->h0, h1 = q->h1, h2 = q->h2;
    q->h3 = _mm512_mask_mov_epi8(q->h3, m3, push_vb(q->h3, h2, st->ip1));
    q->h2 = _mm512_mask_mov_epi8(h2, m2, push_vb(h2, h1, st->ip1));
    q->h1 = _mm512_mask_mov_epi8(h1, m1, push_vb(h1, h0, st->ip1));
    q->h0 = push_vb(h0, sv, st->ip1);
    return (unsigned)_mm_cvtsi128_si32(_mm512_castsi512_si128(sv)) & 0xff;
}

/* Two ranks below 64: compose the two rotations (off the dependency chain)
 * and apply them with one VPERMB. The first byte ends at position 1 unless
 * the second rank is 0. */
T_VBMI static inline void dec_pair_vb(st512 *st, unsigned ra, unsigned rb, uint8_t *out)
{
    if (__builtin_expect((ra | rb) < 64, 1)) {
        __m512i pa = _mm512_load_si512(gmtf_simd_rot64[ra]);
        __m512i pb = _mm512_load_si512(gmtf_simd_rot64[rb]);
        st->q.h0 = _mm512_permutexvar_epi8(_mm512_permutexvar_epi8(pb, pa), st->q.h0);
        unsigned w = (unsigned)_mm_cvtsi128_si32(_mm512_castsi512_si128(st->q.h0));
        out[1] = (uint8_t)w;
        out[0] = (uint8_t)(rb ? w >> 8 : w);
        return;
    }
    out[0] = (uint8_t)dec_step_vb(st, ra);
    out[1] = (uint8_t)dec_step_vb(st, rb);
}

/* ---- run-head encoder (adds VBMI2) --------------------------------------
 * A byte equal to its predecessor has rank 0 and leaves the queue alone;
 * BWT output is 60-80% such bytes. So each piece of input is done in three
 * passes: compress the run heads out (VPCOMPRESSB), run the MTF chain over
 * the heads only, two at a time (consecutive heads always differ), and
 * expand the ranks back with zeros in between (VPEXPANDB). Only the middle
 * pass is a dependency chain; the others are pure throughput. */

#define T_VB2 __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi,bmi2,popcnt")))
#define PIECE 4096 /* bytes per round of the three passes; buffers on the stack */

typedef struct {
    st512 st;
    __m512i prev; /* lane 63: the byte before the next piece (0 at start) */
} enc512;

typedef struct {
    uint8_t heads[PIECE + 64];
    uint8_t ranks[PIECE + 64];
    uint64_t masks[PIECE / 64];
} enc512_work;

T_VB2 static inline void enc512_init(enc512 *e)
{
    st512_init(&e->st);
    e->prev = _mm512_setzero_si512(); /* the queue front is 0 */
}

static inline uint64_t len_mask(size_t len)
{
    return len >= 64 ? ~0ull : (1ull << len) - 1;
}

/* Pass 1: heads and their masks for src[0..n), n <= PIECE. */
T_VB2 static inline size_t heads_collect(enc512 *e, const uint8_t *src, size_t n, enc512_work *w)
{
    size_t j = 0;
    __m512i pv = e->prev;
    for (size_t i = 0; i < n; i += 64) {
        uint64_t lm = len_mask(n - i);
        __m512i v = _mm512_maskz_loadu_epi8(lm, src + i);
        __m512i before = _mm512_permutex2var_epi8(v, e->st.ip1, pv); /* [pv[63], v[0..62]] */
        uint64_t m = _mm512_mask_cmpneq_epi8_mask(lm, v, before);
        _mm512_storeu_si512(w->heads + j, _mm512_maskz_compress_epi8(m, v));
        w->masks[i / 64] = m;
        j += (size_t)__builtin_popcountll(m);
        pv = v;
    }
    if (n % 64) /* bring the last byte to lane 63 */
        pv = _mm512_permutexvar_epi8(_mm512_set1_epi8((char)(n % 64 - 1)), pv);
    e->prev = pv;
    return j;
}

/* Pass 3: ranks back to their places, zeros between. */
T_VB2 static inline void ranks_expand(const enc512_work *w, uint8_t *dst, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i += 64) {
        uint64_t m = w->masks[i / 64];
        __m512i v = _mm512_maskz_expand_epi8(m, _mm512_loadu_si512(w->ranks + j));
        _mm512_mask_storeu_epi8(dst + i, len_mask(n - i), v);
        j += (size_t)__builtin_popcountll(m);
    }
}

/* Positions 0..r of a match mask k: k ^ (k - 1), kept in mask registers
 * (a round trip through a general register costs more on Zen 4/5). */
T_VB2 static inline __mmask64 upto(__mmask64 k)
{
    return _kxor_mask64(k, _kadd_mask64(k, _cvtu64_mask64(~0ull)));
}

/* Pass 2 step: heads a != b, both usually in the first 64 positions. */
T_VB2 static inline void enc_heads_pair(st512 *st, unsigned a, unsigned b, uint8_t *out)
{
    __m512i ba = _mm512_set1_epi8((char)a), bb = _mm512_set1_epi8((char)b);
    __m512i h0 = st->q.h0;
    __mmask64 ka = _mm512_cmpeq_epi8_mask(h0, ba);
    __mmask64 kb = _mm512_cmpeq_epi8_mask(h0, bb);
    if (__builtin_expect((_kortestz_mask64_u8(ka, ka) | _kortestz_mask64_u8(kb, kb)) == 0, 1)) {
        __m512i sh1 = push_vb(h0, bb, st->ip1);
        __m512i sh2 = _mm512_permutex2var_epi8(h0, st->ip2, _mm512_mask_blend_epi8(1, ba, bb));
        /* keep the shuffles off the mask chain: no masked-permute fusion */
        __asm__("" : "+v"(sh1), "+v"(sh2));
        __mmask64 pa = upto(ka), pb = upto(kb);
        __mmask64 m_two = _kor_mask64(_kshiftli_mask64(_kand_mask64(pa, pb), 1), _cvtu64_mask64(1));
        h0 = _mm512_mask_mov_epi8(h0, _kor_mask64(pa, pb), sh1);
        st->q.h0 = _mm512_mask_mov_epi8(h0, m_two, sh2);
        unsigned ra = (unsigned)__builtin_ctzll(_cvtmask64_u64(ka));
        unsigned rb = (unsigned)__builtin_ctzll(_cvtmask64_u64(kb));
        out[0] = (uint8_t)ra;
        out[1] = (uint8_t)(rb + (rb < ra));
        return;
    }
    out[0] = (uint8_t)enc_step_vb(st, a);
    out[1] = (uint8_t)enc_step_vb(st, b);
}

T_VB2 static inline void enc_heads(st512 *st, const uint8_t *h, uint8_t *r, size_t n)
{
    size_t i = 0;
    for (; i + 2 <= n; i += 2)
        enc_heads_pair(st, h[i], h[i + 1], r + i);
    if (i < n)
        r[i] = (uint8_t)enc_step_vb(st, h[i]);
}

T_VB2 void gmtf_simd_mtf_encode_avx512(const uint8_t *src, uint8_t *dst, size_t n)
{
    enc512 e;
    enc512_work w;
    enc512_init(&e);
    for (size_t off = 0; off < n; off += PIECE) {
        size_t len = n - off < PIECE ? n - off : PIECE;
        size_t nh = heads_collect(&e, src + off, len, &w);
        enc_heads(&e.st, w.heads, w.ranks, nh);
        ranks_expand(&w, dst + off, len);
    }
}

/* ---- run-head decoder (VBMI2) -------------------------------------------
 * Rank 0 repeats the previous byte and leaves the queue alone, so as in
 * the encoder the zero ranks are compressed out, the VPERMB chain decodes
 * the nonzero ranks only, and a fill pass gives every lane the byte of the
 * last head at or before it: head lanes get ordinals 1, 2, ... (VPEXPANDB),
 * a prefix maximum carries them right, and one VPERMT2B reads the bytes
 * from a window whose lane 0 is the byte before the chunk. */

typedef struct {
    uint8_t heads[PIECE + 64];     /* nonzero ranks */
    uint8_t syms[1 + PIECE + 128]; /* [0]: byte before the piece; then the heads' bytes */
    uint64_t masks[PIECE / 64];
} dec512_work;

T_VB2 static inline size_t nonzero_collect(const uint8_t *src, size_t n, dec512_work *w)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i += 64) {
        uint64_t lm = len_mask(n - i);
        __m512i v = _mm512_maskz_loadu_epi8(lm, src + i);
        uint64_t m = _mm512_mask_test_epi8_mask(lm, v, v);
        _mm512_storeu_si512(w->heads + j, _mm512_maskz_compress_epi8(m, v));
        w->masks[i / 64] = m;
        j += (size_t)__builtin_popcountll(m);
    }
    return j;
}

/* lanes shifted up by k, zeros in */
T_VB2 static inline __m512i lanes_up(__m512i v, __m512i iota, unsigned k)
{
    return _mm512_maskz_permutexvar_epi8(~0ull << k,
                                         _mm512_sub_epi8(iota, _mm512_set1_epi8((char)k)), v);
}

T_VB2 static inline void fill_forward(uint8_t *dst, size_t n, size_t nh, dec512_work *w)
{
    const __m512i iota = _mm512_load_si512(gmtf_simd_rot64[0]);
    const __m512i iota1 = _mm512_add_epi8(iota, _mm512_set1_epi8(1));
    size_t j = 0;
    for (size_t i = 0; i < n; i += 64) {
        uint64_t m = w->masks[i / 64];
        __m512i o = _mm512_maskz_expand_epi8(m, iota1); /* head ordinals 1.. */
        for (unsigned k = 1; k < 64; k *= 2)
            o = _mm512_max_epu8(o, lanes_up(o, iota, k));
        __m512i out = _mm512_permutex2var_epi8(_mm512_loadu_si512(w->syms + j), o,
                                               _mm512_loadu_si512(w->syms + j + 64));
        _mm512_mask_storeu_epi8(dst + i, len_mask(n - i), out);
        j += (size_t)__builtin_popcountll(m);
    }
    w->syms[0] = w->syms[nh];
}

T_VB2 static inline void dec_heads(st512 *st, const uint8_t *r, uint8_t *out, size_t n)
{
    size_t i = 0;
    for (; i + 2 <= n; i += 2)
        dec_pair_vb(st, r[i], r[i + 1], out + i);
    if (i < n)
        out[i] = (uint8_t)dec_step_vb(st, r[i]);
}

T_VB2 void gmtf_simd_mtf_decode_avx512(const uint8_t *src, uint8_t *dst, size_t n)
{
    st512 st;
    dec512_work w;
    st512_init(&st);
    w.syms[0] = 0; /* a leading rank 0 is the queue front, 0 */
    for (size_t off = 0; off < n; off += PIECE) {
        size_t len = n - off < PIECE ? n - off : PIECE;
        size_t nh = nonzero_collect(src + off, len, &w);
        dec_heads(&st, w.heads, w.syms + 1, nh);
        fill_forward(dst + off, len, nh, &w);
    }
}

GMTF_SIMD_PAIR_BY_TWO_CALLS(avx512)

T_VBMI void gmtf_simd_mtf_decode_avx512x2(const uint8_t *src, uint8_t *dst, size_t n)
{
    gmtf_simd_mtf_decode_avx512(src, dst, n);
}

/* Two blocks (or block halves) piece by piece from states a and b, their
 * head chains interleaved. */
T_VB2 static void enc_two(enc512 *pa, const uint8_t *s0, uint8_t *d0, size_t n0, enc512 *pb,
                          const uint8_t *s1, uint8_t *d1, size_t n1)
{
    enc512 a = *pa, b = *pb; /* locals, so the queues stay in registers */
    enc512_work wa, wb;
    size_t off = 0;
    for (; off < n0 && off < n1; off += PIECE) {
        size_t la = n0 - off < PIECE ? n0 - off : PIECE;
        size_t lb = n1 - off < PIECE ? n1 - off : PIECE;
        size_t ha = heads_collect(&a, s0 + off, la, &wa);
        size_t hb = heads_collect(&b, s1 + off, lb, &wb);
        size_t both = (ha < hb ? ha : hb) & ~(size_t)1, i;
        for (i = 0; i < both; i += 2) {
            enc_heads_pair(&a.st, wa.heads[i], wa.heads[i + 1], wa.ranks + i);
            enc_heads_pair(&b.st, wb.heads[i], wb.heads[i + 1], wb.ranks + i);
        }
        enc_heads(&a.st, wa.heads + i, wa.ranks + i, ha - i);
        enc_heads(&b.st, wb.heads + i, wb.ranks + i, hb - i);
        ranks_expand(&wa, d0 + off, la);
        ranks_expand(&wb, d1 + off, lb);
    }
    for (size_t o = off; o < n0; o += PIECE) { /* the longer block's rest */
        size_t len = n0 - o < PIECE ? n0 - o : PIECE;
        size_t nh = heads_collect(&a, s0 + o, len, &wa);
        enc_heads(&a.st, wa.heads, wa.ranks, nh);
        ranks_expand(&wa, d0 + o, len);
    }
    for (size_t o = off; o < n1; o += PIECE) {
        size_t len = n1 - o < PIECE ? n1 - o : PIECE;
        size_t nh = heads_collect(&b, s1 + o, len, &wb);
        enc_heads(&b.st, wb.heads, wb.ranks, nh);
        ranks_expand(&wb, d1 + o, len);
    }
}

T_VB2 void gmtf_simd_mtf_encode2_avx512x2(const uint8_t *s0, uint8_t *d0, size_t n0,
                                          const uint8_t *s1, uint8_t *d1, size_t n1)
{
    enc512 a, b;
    enc512_init(&a);
    enc512_init(&b);
    enc_two(&a, s0, d0, n0, &b, s1, d1, n1);
}

/* The queue after encoding src[0..n) from the identity: its bytes in order
 * of last occurrence, most recent first, then the bytes it lacks in
 * increasing order (they keep their initial order). A backward scan; a
 * 64-byte chunk whose bytes are all seen already is skipped after one
 * table lookup (VPERMI2B into the 256-byte seen table). */
T_VB2 static void queue_after(const uint8_t *src, size_t n, uint8_t q[256])
{
    uint8_t seen[256] __attribute__((aligned(64))) = {0};
    __m512i t0 = _mm512_setzero_si512(), t1 = t0, t2 = t0, t3 = t0;
    size_t k = 0, i = n;
    while (i > 0 && k < 256) {
        size_t len = i < 64 ? i : 64;
        i -= len;
        __m512i v = _mm512_maskz_loadu_epi8(len_mask(len), src + i);
        __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
        __m512i look = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
        if (!(_mm512_cmpeq_epi8_mask(look, _mm512_setzero_si512()) & len_mask(len)))
            continue;
        for (size_t j = len; j-- > 0;) { /* a new byte in this chunk: walk it */
            uint8_t c = src[i + j];
            if (!seen[c]) {
                seen[c] = 1;
                q[k++] = c;
            }
        }
        t0 = _mm512_load_si512(seen);
        t1 = _mm512_load_si512(seen + 64);
        t2 = _mm512_load_si512(seen + 128);
        t3 = _mm512_load_si512(seen + 192);
    }
    for (unsigned c = 0; c < 256; c++)
        if (!seen[c])
            q[k++] = (uint8_t)c;
}

/* One block as two chains: the second half starts from the queue the
 * first half leaves (the parallel-MTF idea), so the halves interleave like
 * two blocks. Small blocks are not worth the scan. */
T_VB2 void gmtf_simd_mtf_encode_avx512x2(const uint8_t *src, uint8_t *dst, size_t n)
{
    if (n < 4 * PIECE) {
        gmtf_simd_mtf_encode_avx512(src, dst, n);
        return;
    }
    size_t mid = n / 2;
    uint8_t q[256] __attribute__((aligned(64)));
    queue_after(src, mid, q);
    enc512 a, b;
    enc512_init(&a);
    enc512_init(&b);
    b.st.q.h0 = _mm512_load_si512(q);
    b.st.q.h1 = _mm512_load_si512(q + 64);
    b.st.q.h2 = _mm512_load_si512(q + 128);
    b.st.q.h3 = _mm512_load_si512(q + 192);
    b.prev = _mm512_set1_epi8((char)src[mid - 1]); /* = the queue front */
    enc_two(&a, src, dst, mid, &b, src + mid, dst + mid, n - mid);
}

T_VB2 void gmtf_simd_mtf_decode2_avx512x2(const uint8_t *s0, uint8_t *d0, size_t n0,
                                          const uint8_t *s1, uint8_t *d1, size_t n1)
{
    st512 a, b;
    dec512_work wa, wb;
    st512_init(&a);
    st512_init(&b);
    wa.syms[0] = wb.syms[0] = 0;
    size_t off = 0;
    for (; off < n0 && off < n1; off += PIECE) {
        size_t la = n0 - off < PIECE ? n0 - off : PIECE;
        size_t lb = n1 - off < PIECE ? n1 - off : PIECE;
        size_t ha = nonzero_collect(s0 + off, la, &wa);
        size_t hb = nonzero_collect(s1 + off, lb, &wb);
        size_t both = (ha < hb ? ha : hb) & ~(size_t)1, i;
        for (i = 0; i < both; i += 2) {
            dec_pair_vb(&a, wa.heads[i], wa.heads[i + 1], wa.syms + 1 + i);
            dec_pair_vb(&b, wb.heads[i], wb.heads[i + 1], wb.syms + 1 + i);
        }
        dec_heads(&a, wa.heads + i, wa.syms + 1 + i, ha - i);
        dec_heads(&b, wb.heads + i, wb.syms + 1 + i, hb - i);
        fill_forward(d0 + off, la, ha, &wa);
        fill_forward(d1 + off, lb, hb, &wb);
    }
    for (size_t o = off; o < n0; o += PIECE) { /* the longer block's rest */
        size_t len = n0 - o < PIECE ? n0 - o : PIECE;
        size_t nh = nonzero_collect(s0 + o, len, &wa);
        dec_heads(&a, wa.heads, wa.syms + 1, nh);
        fill_forward(d0 + o, len, nh, &wa);
    }
    for (size_t o = off; o < n1; o += PIECE) {
        size_t len = n1 - o < PIECE ? n1 - o : PIECE;
        size_t nh = nonzero_collect(s1 + o, len, &wb);
        dec_heads(&b, wb.heads, wb.syms + 1, nh);
        fill_forward(d1 + o, len, nh, &wb);
    }
}
#endif
