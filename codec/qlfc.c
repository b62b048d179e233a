/* QLFC coders of BWT output (qlfc.h): the method rule, workspaces and the
 * dispatch on the payload's method byte. The rank transform both methods
 * share is in qlfc_ranks.c, below them. */
#include <errno.h>
#include <string.h>

#include "gmtf_codec.h"
#include "qlfc.h"
#include "qlfc_internal.h"

/* Method 2's transform says method 3: many big ranks, or long runs. */
static int lanes_defer(const uint8_t *bwt, size_t n, uint8_t *rk)
{
    size_t seg = (n + GMTF_QLFC_NLANES - 1) / GMTF_QLFC_NLANES, runs = 0, big = 0;
    for (size_t a = 0; a < n; a += seg) {
        uint8_t init[256];
        uint16_t d;
        size_t k = gmtf_qlfc_ranks(bwt, a, a + seg < n ? a + seg : n, rk, init, &d);
        for (size_t i = 0; i < k; i++)
            big += rk[i] >= GMTF_QLFC_BIG_RANK;
        runs += k;
    }
    return (uint64_t)big * GMTF_QLFC_BIG_DIV >= runs || (uint64_t)runs * GMTF_QLFC_SPARSE < n;
}

/* log2(x) in 16.16 fixed point for 1 <= x < 2^32, by integers only (the
 * incompressibility rule below must decide alike on every machine). */
static uint64_t log2_q16(uint32_t x)
{
    unsigned e = 31;
    while (!(x >> e))
        e--;
    /* mantissa m in [1, 2) as Q30, then 16 bits of log2(m) by squaring */
    uint64_t m = e >= 30 ? (uint64_t)x >> (e - 30) : (uint64_t)x << (30 - e), r = 0;
    for (int b = 15; b >= 0; b--) {
        m = (m * m) >> 30;
        if (m >= (2ull << 30)) {
            m >>= 1;
            r |= 1ull << b;
        }
    }
    return ((uint64_t)e << 16) | r;
}

/* The incompressibility rule: the block is stored raw without running
 * method 3 when, in every segment of about GMTF_QLFC_RAW_SEG bytes, the
 * order-0 entropy of its runs' ranks comes to GMTF_QLFC_RAW_BITS/16 bits
 * per byte or more (random or already compressed data: 7.95 there). The
 * adaptive coder then makes at best a payload of about the block's size
 * (random data: 1.003 n), spending 0.5 s per MiB to learn it; the rule
 * costs one pass of the rank transform. A segment of compressible data
 * anywhere in the block keeps the coder. */
static int looks_incompressible(const uint8_t *bwt, size_t n, uint8_t *rk)
{
    if (n < GMTF_QLFC_RAW_MIN)
        return 0;
    size_t nseg = n / GMTF_QLFC_RAW_SEG ? n / GMTF_QLFC_RAW_SEG : 1;
    for (size_t j = 0; j < nseg; j++) {
        size_t a = n * j / nseg, b = n * (j + 1) / nseg;
        uint8_t init[256];
        uint16_t d;
        size_t k = gmtf_qlfc_ranks(bwt, a, b, rk, init, &d);
        uint32_t hist[256] = {0};
        for (size_t i = 0; i < k; i++)
            hist[rk[i]]++;
        /* k log2 k - sum h log2 h: the ranks' bits at their own order-0
         * entropy (lengths not counted: the estimate errs low) */
        uint64_t bits = (uint64_t)k * log2_q16((uint32_t)k);
        for (unsigned v = 0; v < 256; v++)
            if (hist[v])
                bits -= (uint64_t)hist[v] * log2_q16(hist[v]);
        if (bits * 16 < (uint64_t)(b - a) * GMTF_QLFC_RAW_BITS * 65536)
            return 0;
    }
    return 1;
}

unsigned gmtf_qlfc_method(const uint8_t *bwt, size_t n, void *ws)
{
    if (n < GMTF_QLFC_LANES_MIN || lanes_defer(bwt, n, ws))
        return GMTF_QLFC_METHOD_ADAPTIVE;
    return GMTF_QLFC_METHOD_LANES;
}

static size_t max_sz(size_t a, size_t b)
{
    return a > b ? a : b;
}

size_t gmtf_qlfc_workspace_size(size_t max_block)
{
    return max_sz(gmtf_lanes_workspace_size(max_block), gmtf_cm_workspace_size(max_block));
}

size_t gmtf_qlfc_decode_workspace_size(void)
{
    return max_sz(gmtf_lanes_decode_workspace_size(), gmtf_cm_decode_workspace_size());
}

long gmtf_qlfc_encode(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
#if GMTF_QLFC_CM_LANES > 0
    if (gmtf_qlfc_method(bwt, n, ws) == GMTF_QLFC_METHOD_LANES)
        return gmtf_cm_lanes_encode(bwt, n, GMTF_QLFC_CM_LANES, dst, cap, ws);
#endif
    if (n >= GMTF_QLFC_LANES_MIN) {
        long r = gmtf_lanes_encode_or_defer(bwt, n, dst, cap, ws);
        if (r != -EXDEV)
            return r;
    }
    if (looks_incompressible(bwt, n, ws))
        return -ENOSPC;
    return gmtf_adaptive_qlfc_encode(bwt, n, dst, cap, ws);
}

long gmtf_qlfc_encode_deferred(const uint8_t *bwt, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    if (n == 0 || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    if (looks_incompressible(bwt, n, ws))
        return -ENOSPC;
    return gmtf_adaptive_qlfc_encode(bwt, n, dst, cap, ws);
}

int gmtf_qlfc_decode_counted(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws,
                             gmtf_bwt_counts *counts)
{
    if (len < 1 || n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    if (src[0] == GMTF_QLFC_METHOD_LANES)
        return gmtf_lanes_decode_counted(src, len, bwt, n, ws, counts);
    if (src[0] == GMTF_QLFC_METHOD_ADAPTIVE)
        return gmtf_adaptive_qlfc_decode_counted(src, len, bwt, n, ws, counts);
    if (src[0] == GMTF_QLFC_METHOD_CM_LANES)
        return gmtf_cm_lanes_decode_counted(src, len, bwt, n, ws, counts);
    return GMTF_E_CORRUPT;
}

int gmtf_qlfc_decode_ranked(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws,
                            uint32_t (*chk)[256])
{
    if (len >= 1 && src[0] == GMTF_QLFC_METHOD_LANES) {
        int rc = gmtf_lanes_decode_ranked(src, len, bwt, n, ws, chk);
        return rc < 0 ? rc : 1;
    }
    return gmtf_qlfc_decode_counted(src, len, bwt, n, ws, NULL);
}

int gmtf_qlfc_decode(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws)
{
    return gmtf_qlfc_decode_counted(src, len, bwt, n, ws, NULL);
}
