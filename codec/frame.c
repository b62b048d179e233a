/* Frames: one self-describing compressed block (layout in docs/codec.md).
 *
 *   0  u32 magic "GMTF"        4  u8 version    5 u8 method
 *   6  u8 BWT index count K   7  u8 flags (0)
 *   8  u32 original length    12  u32 payload length
 *  16  u32 CRC-32C of the original bytes
 *  20  u32 idx[K]             20+4K  u32 CRC-32C of bytes [0, 20+4K)
 *
 * Version 1 (MTF ranks, method 0/1 rank coder): K = clamp(n/16384, 1, 16)
 * indexes in the header. Version 2 (QLFC coder, qlfc.h): K = 0, so the
 * first 24 bytes read as a valid version-1 header with no index and a
 * version-1 decoder reports GMTF_E_VERSION; a BWT frame then has its
 * samples (rows - 1 of the suffixes at multiples of the step, 3 bytes
 * each), a CRC-32C of its payload (every byte after the header) and a
 * CRC-32C of everything before, then the payload.
 *
 * The header checksum is checked before anything else is trusted, so a
 * damaged header is rejected without decoding; a version 2 BWT frame's
 * payload checksum before the entropy decoder reads the payload, so a
 * decode of part of the block (which the data checksum cannot cover)
 * still never works from a damaged payload; the data checksum catches
 * everything else. Raw and run frames need no payload checksum: the data
 * checksum is computed over the payload (raw) or from its one byte (run)
 * before any byte is returned. */
#include <errno.h>
#include <string.h>

#include "bwt.h"
#include "byteorder.h"
#include "frame.h"
#include "qlfc.h"
#include "rank_coder.h"

size_t gmtf_frame_bound(size_t n)
{
    return n + GMTF_FRAME_FIXED;
}

size_t gmtf_frame_write_header(uint8_t *dst, uint8_t method, uint32_t orig_len,
                               uint32_t payload_len, uint32_t data_crc, const uint32_t *idx,
                               unsigned nidx)
{
    store_le32(dst, GMTF_FRAME_MAGIC);
    dst[4] = GMTF_FRAME_V1;
    dst[5] = method;
    dst[6] = (uint8_t)nidx;
    dst[7] = 0;
    store_le32(dst + 8, orig_len);
    store_le32(dst + 12, payload_len);
    store_le32(dst + 16, data_crc);
    for (unsigned i = 0; i < nidx; i++)
        store_le32(dst + 20 + 4 * i, idx[i]);
    size_t h = 20 + 4 * (size_t)nidx;
    store_le32(dst + h, gmtf_crc32c(0, dst, h));
    return h + 4;
}

static void store_le24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
}

static uint32_t load_le24(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

size_t gmtf_frame_header_len_v2(uint8_t method, size_t n)
{
    if (method != GMTF_METHOD_BWT)
        return GMTF_FRAME_FIXED;
    return GMTF_FRAME_FIXED + 3 * (size_t)gmtf_bwt_sample_count(n) + 8;
}

size_t gmtf_frame_write_header_v2(uint8_t *dst, uint8_t method, uint32_t orig_len,
                                  uint32_t payload_len, uint32_t data_crc, const uint32_t *idx)
{
    store_le32(dst, GMTF_FRAME_MAGIC);
    dst[4] = GMTF_FRAME_V2;
    dst[5] = method;
    dst[6] = 0;
    dst[7] = 0;
    store_le32(dst + 8, orig_len);
    store_le32(dst + 12, payload_len);
    store_le32(dst + 16, data_crc);
    store_le32(dst + 20, gmtf_crc32c(0, dst, 20));
    if (method != GMTF_METHOD_BWT)
        return GMTF_FRAME_FIXED;
    unsigned count = gmtf_bwt_sample_count(orig_len);
    for (unsigned i = 0; i < count; i++)
        store_le24(dst + GMTF_FRAME_FIXED + 3 * i, idx[i] - 1);
    size_t h = GMTF_FRAME_FIXED + 3 * (size_t)count;
    store_le32(dst + h, gmtf_crc32c(0, dst + h + 8, payload_len));
    store_le32(dst + h + 4, gmtf_crc32c(0, dst, h + 4));
    return h + 8;
}

/* Version 2 after the common 24 bytes passed their checksum. */
static int parse_v2(const uint8_t *src, size_t len, gmtf_frame_info *info, unsigned *hdr_len,
                    uint32_t *idx, unsigned *nidx)
{
    uint8_t method = src[5];
    uint32_t orig = load_le32(src + 8), plen = load_le32(src + 12);
    if (src[6] != 0 || src[7] != 0 || orig > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    size_t h = GMTF_FRAME_FIXED;
    unsigned count = 0;
    switch (method) {
    case GMTF_METHOD_RAW:
        if (plen != orig)
            return GMTF_E_CORRUPT;
        break;
    case GMTF_METHOD_RUN:
        if (plen != 1 || orig == 0)
            return GMTF_E_CORRUPT;
        break;
    case GMTF_METHOD_BWT:
        if (orig == 0 || plen == 0 || plen >= orig)
            return GMTF_E_CORRUPT;
        count = gmtf_bwt_sample_count(orig);
        h = gmtf_frame_header_len_v2(method, orig);
        if (len < h)
            return GMTF_E_TRUNCATED;
        if (gmtf_crc32c(0, src, h - 4) != load_le32(src + h - 4))
            return GMTF_E_CHECKSUM;
        break;
    default: return GMTF_E_CORRUPT;
    }
    if (plen > len - h)
        return GMTF_E_TRUNCATED;
    info->frame_len = (uint32_t)(h + plen);
    info->orig_len = orig;
    info->method = method;
    info->data_crc = load_le32(src + 16);
    if (hdr_len)
        *hdr_len = (unsigned)h;
    if (idx)
        for (unsigned i = 0; i < count; i++)
            idx[i] = load_le24(src + GMTF_FRAME_FIXED + 3 * i) + 1;
    if (nidx)
        *nidx = count;
    return 0;
}

int gmtf_frame_parse(const uint8_t *src, size_t len, gmtf_frame_info *info, unsigned *hdr_len,
                     uint32_t *idx, unsigned *nidx)
{
    unsigned version;
    return gmtf_frame_parse_version(src, len, info, hdr_len, idx, nidx, &version);
}

int gmtf_frame_parse_version(const uint8_t *src, size_t len, gmtf_frame_info *info,
                             unsigned *hdr_len, uint32_t *idx, unsigned *nidx, unsigned *version)
{
    if (len < GMTF_FRAME_FIXED)
        return GMTF_E_TRUNCATED;
    if (load_le32(src) != GMTF_FRAME_MAGIC)
        return GMTF_E_CORRUPT;
    unsigned k = src[6];
    if (k > GMTF_BWT_MAX_INDEXES)
        return GMTF_E_CORRUPT;
    size_t h = 20 + 4 * (size_t)k;
    if (len < h + 4)
        return GMTF_E_TRUNCATED;
    if (gmtf_crc32c(0, src, h) != load_le32(src + h))
        return GMTF_E_CHECKSUM;
    /* The header is intact from here on: reject what this version can't read. */
    *version = src[4];
    if (src[4] == GMTF_FRAME_V2)
        return parse_v2(src, len, info, hdr_len, idx, nidx);
    if (src[4] != GMTF_FRAME_V1)
        return src[4] > GMTF_FRAME_V2 ? GMTF_E_VERSION : GMTF_E_CORRUPT;
    uint8_t method = src[5];
    uint32_t orig = load_le32(src + 8), plen = load_le32(src + 12);
    if (src[7] != 0 || orig > GMTF_BLOCK_MAX)
        return GMTF_E_CORRUPT;
    switch (method) {
    case GMTF_METHOD_RAW:
        if (k != 0 || plen != orig)
            return GMTF_E_CORRUPT;
        break;
    case GMTF_METHOD_RUN:
        if (k != 0 || plen != 1 || orig == 0)
            return GMTF_E_CORRUPT;
        break;
    case GMTF_METHOD_BWT:
        if (orig == 0 || k != gmtf_bwt_index_count(orig) || plen == 0 || plen >= orig)
            return GMTF_E_CORRUPT;
        break;
    default: return GMTF_E_CORRUPT;
    }
    if (plen > len - (h + 4))
        return GMTF_E_TRUNCATED;
    info->frame_len = (uint32_t)(h + 4 + plen);
    info->orig_len = orig;
    info->method = method;
    info->data_crc = load_le32(src + 16);
    if (hdr_len)
        *hdr_len = (unsigned)(h + 4);
    if (idx)
        for (unsigned i = 0; i < k; i++)
            idx[i] = load_le32(src + 20 + 4 * i);
    if (nidx)
        *nidx = k;
    return 0;
}

int gmtf_frame_check_payload(const uint8_t *src, const gmtf_frame_info *fi, unsigned hdr_len,
                             unsigned version)
{
    if (version != GMTF_FRAME_V2 || fi->method != GMTF_METHOD_BWT)
        return 0;
    /* parse_v2 put the payload inside the buffer: hdr_len + payload =
     * frame_len <= len, and hdr_len >= 32 for a BWT frame */
    uint32_t want = load_le32(src + hdr_len - 8);
    return gmtf_crc32c(0, src + hdr_len, fi->frame_len - hdr_len) == want ? 0 : GMTF_E_CHECKSUM;
}

int gmtf_frame_info_get(const void *src, size_t len, gmtf_frame_info *info)
{
    return gmtf_frame_parse(src, len, info, NULL, NULL, NULL);
}

static int is_run(const uint8_t *s, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (s[i] != s[0])
            return 0;
    return 1;
}

static long frame_raw(const uint8_t *src, size_t n, uint8_t *dst, uint32_t crc)
{
    size_t h =
        gmtf_frame_write_header(dst, GMTF_METHOD_RAW, (uint32_t)n, (uint32_t)n, crc, NULL, 0);
    if (n) /* an empty frame: src may be NULL */
        memcpy(dst + h, src, n);
    return (long)(h + n);
}

static long frame_raw_v2(const uint8_t *src, size_t n, uint8_t *dst, uint32_t crc)
{
    size_t h =
        gmtf_frame_write_header_v2(dst, GMTF_METHOD_RAW, (uint32_t)n, (uint32_t)n, crc, NULL);
    if (n) /* an empty frame: src may be NULL */
        memcpy(dst + h, src, n);
    return (long)(h + n);
}

static long encode_special_v2(const uint8_t *src, size_t n, uint8_t *dst, uint32_t crc)
{
    if (n < 16)
        return frame_raw_v2(src, n, dst, crc);
    if (is_run(src, n)) {
        size_t h = gmtf_frame_write_header_v2(dst, GMTF_METHOD_RUN, (uint32_t)n, 1, crc, NULL);
        dst[h] = src[0];
        return (long)(h + 1);
    }
    return 0;
}

long gmtf_frame_encode_special(const uint8_t *src, size_t n, uint8_t *dst, uint32_t crc)
{
    if (n == 0 || n < 16)
        return frame_raw(src, n, dst, crc);
    if (is_run(src, n)) {
        size_t h = gmtf_frame_write_header(dst, GMTF_METHOD_RUN, (uint32_t)n, 1, crc, NULL, 0);
        dst[h] = src[0];
        return (long)(h + 1);
    }
    return 0;
}

long gmtf_frame_encode_ranks(const uint8_t *src, const uint8_t *ranks, size_t n,
                             const uint32_t *idx, uint32_t crc, uint8_t *dst, void *rank_ws)
{
    unsigned k = gmtf_bwt_index_count(n);
    size_t h = 24 + 4 * (size_t)k;
    /* The payload must leave the frame smaller than a raw one. */
    long plen = gmtf_rank_encode(ranks, n, dst + h, n - 4 * (size_t)k - 1, rank_ws);
    if (plen == -ENOSPC)
        return frame_raw(src, n, dst, crc);
    if (plen < 0)
        return plen;
    gmtf_frame_write_header(dst, GMTF_METHOD_BWT, (uint32_t)n, (uint32_t)plen, crc, idx, k);
    return (long)(h + (size_t)plen);
}

long gmtf_frame_encode_special_v2(const uint8_t *src, size_t n, uint8_t *dst, uint32_t crc)
{
    return encode_special_v2(src, n, dst, crc);
}

size_t gmtf_frame_payload_cap_v2(size_t n)
{
    size_t h = gmtf_frame_header_len_v2(GMTF_METHOD_BWT, n);
    /* the frame must be smaller than a raw one (n + 24) */
    return n > h ? n + GMTF_FRAME_FIXED - h - 1 : 0;
}

long gmtf_frame_finish_bwt_v2(const uint8_t *src, size_t n, const uint32_t *idx, uint32_t crc,
                              uint8_t *dst, long plen)
{
    if (plen == -ENOSPC)
        return frame_raw_v2(src, n, dst, crc);
    if (plen < 0)
        return plen;
    if (plen == 0 || (size_t)plen > gmtf_frame_payload_cap_v2(n))
        return -EINVAL;
    size_t h =
        gmtf_frame_write_header_v2(dst, GMTF_METHOD_BWT, (uint32_t)n, (uint32_t)plen, crc, idx);
    return (long)(h + (size_t)plen);
}

/* Version 2: the BWT output coded by the QLFC coder (raw when that is not
 * smaller); adaptive: method 3 whatever the method rule says (the caller's
 * hint, gmtf_batch_encode_hint), still raw when incompressible. */
long gmtf_frame_encode_bwt_v2(const uint8_t *src, const uint8_t *bwt, size_t n, const uint32_t *idx,
                              uint32_t crc, uint8_t *dst, void *rank_ws, int adaptive)
{
    size_t h = gmtf_frame_header_len_v2(GMTF_METHOD_BWT, n), cap = gmtf_frame_payload_cap_v2(n);
    long plen = !cap       ? -ENOSPC
                : adaptive ? gmtf_qlfc_encode_deferred(bwt, n, dst + h, cap, rank_ws)
                           : gmtf_qlfc_encode(bwt, n, dst + h, cap, rank_ws);
    return gmtf_frame_finish_bwt_v2(src, n, idx, crc, dst, plen);
}

static long encode_v2(gmtf_workspace *w, const uint8_t *src, size_t n, uint8_t *dst, uint32_t crc,
                      int adaptive)
{
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    int rc = gmtf_bwt_forward_step(src, w->buf_a, n, idx, w->bwt_ws);
    if (rc < 0)
        return rc;
    return gmtf_frame_encode_bwt_v2(src, w->buf_a, n, idx, crc, dst, w->rank_ws, adaptive);
}

long gmtf_frame_encode_ws(const gmtf_mtf *mtf, gmtf_workspace *w, const uint8_t *src, size_t n,
                          uint8_t *dst, size_t cap, unsigned version, uint32_t *data_crc)
{
    return gmtf_frame_encode_ws_as(mtf, w, src, n, dst, cap, version, data_crc, 0);
}

long gmtf_frame_encode_ws_as(const gmtf_mtf *mtf, gmtf_workspace *w, const uint8_t *src, size_t n,
                             uint8_t *dst, size_t cap, unsigned version, uint32_t *data_crc,
                             int adaptive)
{
    if (n > w->max_block || n > GMTF_BLOCK_MAX)
        return -EINVAL;
    if (cap < gmtf_frame_bound(n))
        return -ENOSPC;
    w->range_valid = 0;
    uint32_t crc = gmtf_crc32c(0, src, n);
    if (data_crc)
        *data_crc = crc;
    if (version != GMTF_FRAME_V1) {
        long r = encode_special_v2(src, n, dst, crc);
        return r ? r : encode_v2(w, src, n, dst, crc, adaptive);
    }
    long r = gmtf_frame_encode_special(src, n, dst, crc);
    if (r)
        return r;
    uint32_t idx[GMTF_BWT_MAX_INDEXES];
    int rc = gmtf_bwt_forward(src, w->buf_a, n, idx, w->bwt_ws);
    if (rc < 0)
        return rc;
    gmtf_mtf_encode(mtf, w->buf_a, w->buf_b, n);
    return gmtf_frame_encode_ranks(src, w->buf_b, n, idx, crc, dst, w->rank_ws);
}

/* gmtf_frame_decode_begin; counts (NULL: none) receive a version 2
 * block's byte counts for the inverse's table. */
static long decode_begin(const uint8_t *src, size_t len, uint8_t *dst, size_t cap, uint8_t *ranks,
                         size_t ranks_cap, void *rank_ws, gmtf_frame_info *fi, uint32_t *idx,
                         gmtf_bwt_counts *counts)
{
    unsigned h, k, version;
    int rc = gmtf_frame_parse_version(src, len, fi, &h, idx, &k, &version);
    if (rc < 0)
        return rc;
    size_t n = fi->orig_len;
    if (n > cap)
        return -ENOSPC;
    rc = gmtf_frame_check_payload(src, fi, h, version);
    if (rc < 0)
        return rc;
    const uint8_t *pay = src + h;
    size_t plen = fi->frame_len - h;
    switch (fi->method) {
    case GMTF_METHOD_RAW:
        if (n) /* an empty frame: dst may be NULL */
            memcpy(dst, pay, n);
        return 0;
    case GMTF_METHOD_RUN: memset(dst, pay[0], n); return 0;
    default:
        if (n > ranks_cap)
            return -EINVAL;
        if (version == GMTF_FRAME_V2) {
            rc = gmtf_qlfc_decode_counted(pay, plen, ranks, n, rank_ws, counts);
            return rc < 0 ? rc : GMTF_DECODE_BWT_V2;
        }
        rc = gmtf_rank_decode(pay, plen, ranks, n, rank_ws);
        return rc < 0 ? rc : GMTF_DECODE_RANKS;
    }
}

long gmtf_frame_decode_begin(const uint8_t *src, size_t len, uint8_t *dst, size_t cap,
                             uint8_t *ranks, size_t ranks_cap, void *rank_ws, gmtf_frame_info *fi,
                             uint32_t *idx)
{
    return decode_begin(src, len, dst, cap, ranks, ranks_cap, rank_ws, fi, idx, NULL);
}

static long decode_end(const uint8_t *mtf_out, uint8_t *dst, const gmtf_frame_info *fi,
                       const uint32_t *idx, void *bwt_ws, long kind, const gmtf_bwt_counts *counts)
{
    size_t n = fi->orig_len;
    if (fi->method == GMTF_METHOD_BWT) {
        int rc = kind == GMTF_DECODE_BWT_V2
                     ? gmtf_bwt_inverse_counted(mtf_out, dst, n, idx, bwt_ws, counts)
                     : gmtf_bwt_inverse(mtf_out, dst, n, idx, bwt_ws);
        if (rc < 0)
            return rc;
    }
    if (gmtf_crc32c(0, dst, n) != fi->data_crc)
        return GMTF_E_CHECKSUM;
    return (long)n;
}

long gmtf_frame_decode_end(const uint8_t *mtf_out, uint8_t *dst, const gmtf_frame_info *fi,
                           const uint32_t *idx, void *bwt_ws, long kind)
{
    return decode_end(mtf_out, dst, fi, idx, bwt_ws, kind, NULL);
}

long gmtf_frame_decode_ws(const gmtf_mtf *mtf, gmtf_workspace *w, const uint8_t *src, size_t len,
                          uint8_t *dst, size_t cap)
{
    w->range_valid = 0;
    gmtf_frame_info fi;
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    gmtf_bwt_counts counts;
    long r =
        decode_begin(src, len, dst, cap, w->buf_a, w->max_block, w->rank_ws, &fi, idx, &counts);
    if (r < 0)
        return r;
    /* The inverse MTF goes into dst and the inverse BWT runs there in place
     * (it reads all of its input before it writes): a decoder touches
     * buf_a, bwt_ws and the rank tables only, not buf_b, which keeps one
     * block less resident per decoding worker. A version 2 frame has its
     * BWT output in buf_a already. */
    if (r == GMTF_DECODE_RANKS)
        gmtf_mtf_decode(mtf, w->buf_a, dst, fi.orig_len);
    return decode_end(r == GMTF_DECODE_BWT_V2 ? w->buf_a : dst, dst, &fi, idx, w->bwt_ws, r,
                      r == GMTF_DECODE_BWT_V2 ? &counts : NULL);
}

/* CRC-32C of n copies of byte c. */
static uint32_t run_crc(uint8_t c, size_t n)
{
    uint8_t buf[4096];
    memset(buf, c, sizeof buf);
    uint32_t crc = 0;
    for (; n > sizeof buf; n -= sizeof buf)
        crc = gmtf_crc32c(crc, buf, sizeof buf);
    return gmtf_crc32c(crc, buf, n);
}

/* A version 2 BWT frame by range: the entropy decoding and the rank
 * counts (or, for a small block, the inverse's table) unless w holds them
 * for this frame already (same header checksum, lengths and data
 * checksum), then the chains of the range. The whole block (a second read
 * of the frame: fs/frame_read.c) turns the counts into the table first,
 * which later ranges then walk. */
static long range_v2(gmtf_workspace *w, const uint8_t *src, const gmtf_frame_info *fi, unsigned h,
                     const uint32_t *idx, size_t off, size_t cnt, uint8_t *dst)
{
    size_t n = fi->orig_len;
    if (n > w->max_block)
        return -EINVAL;
    /* every call, a kept table too: this payload is what the caller has */
    int rc = gmtf_frame_check_payload(src, fi, h, GMTF_FRAME_V2);
    if (rc < 0)
        return rc;
    uint32_t hcrc = load_le32(src + h - 4);
    if (!(w->range_valid && w->range_hcrc == hcrc && w->range_flen == fi->frame_len &&
          w->range_n == n && w->range_dcrc == fi->data_crc)) {
        w->range_valid = 0;
        gmtf_bwt_counts counts;
        /* the whole block at once: the table from the decoder's counts,
         * without the rank counts it would turn into that table */
        int rank = cnt < n && gmtf_bwt_rank_fits(n, w->max_block);
        if (rank) { /* method 2 counts the rows as it decodes */
            rc = gmtf_qlfc_decode_ranked(src + h, fi->frame_len - h, w->buf_a, n, w->rank_ws,
                                         w->bwt_ws);
            if (rc >= 0)
                rc = rc == 1 ? gmtf_bwt_rank_given(n, idx)
                             : gmtf_bwt_rank_table(w->buf_a, n, idx, w->bwt_ws);
        } else {
            rc = gmtf_qlfc_decode_counted(src + h, fi->frame_len - h, w->buf_a, n, w->rank_ws,
                                          &counts);
            if (rc == 0)
                rc = gmtf_bwt_table_counted(w->buf_a, n, idx, w->bwt_ws, &counts);
        }
        if (rc < 0)
            return rc;
        w->range_valid = 1;
        w->range_rank = rank;
        w->range_hcrc = hcrc;
        w->range_flen = fi->frame_len;
        w->range_n = (uint32_t)n;
        w->range_dcrc = fi->data_crc;
    }
    if (w->range_rank && cnt == n) {
        w->range_valid = 0;
        rc = gmtf_bwt_rank_to_table(w->buf_a, n, w->bwt_ws);
        if (rc < 0)
            return rc;
        w->range_valid = 1;
        w->range_rank = 0;
    }
    if (w->range_rank)
        gmtf_bwt_rank_range(w->buf_a, w->bwt_ws, n, idx, off, cnt, dst);
    else
        gmtf_bwt_range_step(w->bwt_ws, n, idx, off, cnt, dst);
    if (cnt == n && gmtf_crc32c(0, dst, n) != fi->data_crc)
        return GMTF_E_CHECKSUM;
    return (long)cnt;
}

long gmtf_frame_decode_range_ws(const gmtf_mtf *mtf, gmtf_workspace *w, const uint8_t *src,
                                size_t len, size_t off, size_t cnt, uint8_t *dst)
{
    gmtf_frame_info fi;
    uint32_t idx[GMTF_BWT_MAX_SAMPLES];
    unsigned h, k, version;
    int rc = gmtf_frame_parse_version(src, len, &fi, &h, idx, &k, &version);
    if (rc < 0)
        return rc;
    size_t n = fi.orig_len;
    if (off > n || cnt > n - off)
        return -EINVAL;
    const uint8_t *pay = src + h;
    switch (fi.method) {
    case GMTF_METHOD_RAW:
        if (gmtf_crc32c(0, pay, n) != fi.data_crc)
            return GMTF_E_CHECKSUM;
        if (cnt)
            memcpy(dst, pay + off, cnt);
        return (long)cnt;
    case GMTF_METHOD_RUN:
        if (run_crc(pay[0], n) != fi.data_crc)
            return GMTF_E_CHECKSUM;
        memset(dst, pay[0], cnt);
        return (long)cnt;
    default:
        if (version == GMTF_FRAME_V2)
            return range_v2(w, src, &fi, h, idx, off, cnt, dst);
        /* Version 1: the whole block (its chains are not evenly spaced). */
        if (n > w->max_block)
            return -EINVAL;
        long r = gmtf_frame_decode_ws(mtf, w, src, len, w->buf_b, w->max_block);
        if (r < 0)
            return r;
        memcpy(dst, w->buf_b + off, cnt);
        return (long)cnt;
    }
}
