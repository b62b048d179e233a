/* Entropy coding of zero-run coded MTF ranks: the method byte that starts
 * every payload, the choice of method on encode, the dispatch on decode,
 * and the workspace layout (docs/entropy.md has the measurements and the
 * payload layouts). The methods (entropy_internal.h):
 *   0  adaptive binary range coder (entropy_adaptive.c): best ratio
 *   1  semi-static rANS over the same events (entropy_rans.c): about twice
 *      as fast to decode
 * A new method gets the next byte value, a case in each decode switch,
 * and its place in gmtf_rank_encode's choice; the bytes of existing
 * methods never change (frames on disk use them). */
#include <errno.h>
#include <string.h>

#include "entropy_internal.h"
#include "gmtf_codec.h"
#include "rank_coder.h"

enum { METHOD_ADAPTIVE = 0, METHOD_RANS = 1 };

/* Method 1 is kept unless method 0 is smaller by more than slack/1024 of
 * its size: large blocks, where decoding speed counts and method 1's
 * tables are cheap, accept more (about 1.4% is typical there). */
#define RANS_BIG_N (512u << 10)
#define RANS_SLACK_BIG 48
#define RANS_SLACK_SMALL 8

/* ---- workspace ---------------------------------------------------------
 *
 * The fixed part, which is all a decoder touches: method 0's model, then
 * method 1's tables. Then the encoder's scratch for blocks of n bytes:
 * method 1's (right behind its tables, as gmtf_rans_encode wants it), then
 * the method-0 trial (the payload method 0 would give, kept while the
 * choice is made). */

static size_t fixed_bytes(void)
{
    return gmtf_adaptive_ws_size() + gmtf_rans_ws_size();
}

/* The method-0 trial: larger results count as "does not fit" (a block is
 * stored raw long before). */
static size_t trial_cap(size_t n)
{
    return n + n / 4 + 64;
}

size_t gmtf_rank_workspace_size(size_t max_block)
{
    return fixed_bytes() + ALIGN_UP(gmtf_rans_scratch_size(max_block)) +
           ALIGN_UP(trial_cap(max_block));
}

static void *ws_adaptive(void *ws)
{
    return ws;
}

static void *ws_rans(void *ws)
{
    return (uint8_t *)ws + gmtf_adaptive_ws_size();
}

static uint8_t *ws_trial(void *ws, size_t n)
{
    return (uint8_t *)ws + fixed_bytes() + ALIGN_UP(gmtf_rans_scratch_size(n));
}

/* ---- encode ------------------------------------------------------------ */

long gmtf_entropy_encode(const uint16_t *syms, size_t count, uint8_t *dst, size_t cap, void *ws)
{
    if (cap < 1)
        return -ENOSPC;
    long r = gmtf_adaptive_encode_syms(syms, count, dst + 1, cap - 1, ws_adaptive(ws));
    if (r < 0)
        return r;
    dst[0] = METHOD_ADAPTIVE;
    return r + 1;
}

long gmtf_rank_encode(const uint8_t *ranks, size_t n, uint8_t *dst, size_t cap, void *ws)
{
    if (cap < 1)
        return -ENOSPC;
    if (n > GMTF_BLOCK_MAX)
        return -EINVAL;
    if (n < RANS_MIN_N) {
        long ad = gmtf_adaptive_encode(ranks, n, dst + 1, cap - 1, ws_adaptive(ws));
        if (ad < 0)
            return ad;
        dst[0] = METHOD_ADAPTIVE;
        return ad + 1;
    }
    /* Both methods into the workspace, then the choice, so that the bytes
     * never depend on cap: method 1 unless method 0 is clearly smaller
     * (data whose statistics drift within the block, like kennedy.xls).
     * Sizes below count the method byte. */
    gmtf_rans_out res;
    long hyb = gmtf_rans_encode(ranks, n, ws_rans(ws), &res);
    if (hyb >= 0)
        hyb++;
    uint8_t *trial = ws_trial(ws, n);
    long ad = gmtf_adaptive_encode(ranks, n, trial, trial_cap(n), ws_adaptive(ws));
    if (ad < 0 && ad != -ENOSPC)
        return ad;
    if (ad >= 0)
        ad++;
    uint64_t slack = n >= RANS_BIG_N ? RANS_SLACK_BIG : RANS_SLACK_SMALL;
    if (hyb >= 0 && (ad < 0 || (uint64_t)hyb <= (uint64_t)ad + (uint64_t)ad * slack / 1024)) {
        if ((size_t)hyb > cap)
            return -ENOSPC;
        dst[0] = METHOD_RANS;
        gmtf_rans_emit(&res, dst + 1);
        return hyb;
    }
    if (ad < 0 || (size_t)ad > cap)
        return -ENOSPC;
    dst[0] = METHOD_ADAPTIVE;
    memcpy(dst + 1, trial, (size_t)ad - 1);
    return ad;
}

/* ---- decode ------------------------------------------------------------ */

int gmtf_entropy_decode(const uint8_t *src, size_t len, uint16_t *syms, size_t count, void *ws)
{
    if (len < 1)
        return GMTF_E_CORRUPT;
    switch (src[0]) {
    case METHOD_ADAPTIVE:
        return gmtf_adaptive_decode_syms(src + 1, len - 1, syms, count, ws_adaptive(ws));
    case METHOD_RANS: return gmtf_rans_decode_syms(src + 1, len - 1, syms, count, ws_rans(ws));
    default: return GMTF_E_CORRUPT;
    }
}

int gmtf_rank_decode(const uint8_t *src, size_t len, uint8_t *ranks, size_t n, void *ws)
{
    if (len < 1)
        return GMTF_E_CORRUPT;
    switch (src[0]) {
    case METHOD_ADAPTIVE: return gmtf_adaptive_decode(src + 1, len - 1, ranks, n, ws_adaptive(ws));
    case METHOD_RANS: return gmtf_rans_decode(src + 1, len - 1, ranks, n, ws_rans(ws));
    default: return GMTF_E_CORRUPT;
    }
}
