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
    if (n >= GMTF_QLFC_LANES_MIN) {
        long r = gmtf_lanes_encode_or_defer(bwt, n, dst, cap, ws);
        if (r != -EXDEV)
            return r;
    }
    return gmtf_adaptive_qlfc_encode(bwt, n, dst, cap, ws);
}

int gmtf_qlfc_decode(const uint8_t *src, size_t len, uint8_t *bwt, size_t n, void *ws)
{
    if (len < 1 || n == 0 || n > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    if (src[0] == GMTF_QLFC_METHOD_LANES)
        return gmtf_lanes_decode(src, len, bwt, n, ws);
    if (src[0] == GMTF_QLFC_METHOD_ADAPTIVE)
        return gmtf_adaptive_qlfc_decode(src, len, bwt, n, ws);
    return GMTF_E_CORRUPT;
}
