/* The frame layer of libgmtf: one block through the whole pipeline with a
 * caller's workspace and MTF backend, and the pieces the staged batch path
 * (batch.c) runs between its batch-wide MTF calls. Frame layout: frame.c
 * and docs/codec.md. Internal to libgmtf. */
#ifndef GMTF_FRAME_H
#define GMTF_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "gmtf_codec.h"
#include "mtf.h"

#define GMTF_FRAME_MAGIC 0x46544D47u /* "GMTF" */
#define GMTF_FRAME_V1 1              /* MTF ranks, rank coder methods 0/1 */
#define GMTF_FRAME_V2 2              /* QLFC coder methods 2/3, evenly spaced BWT samples */
#ifndef GMTF_FRAME_VERSION           /* a build may default to 1, for comparisons */
#define GMTF_FRAME_VERSION 2         /* newest: what encoders write by default */
#endif
#define GMTF_FRAME_FIXED 24 /* header bytes without BWT indexes */

/* ---- workspace (workspace.c) -------------------------------------------- */

/* Scratch memory of one worker, sized for blocks up to max_block. The rank
 * coder's encoder scratch (7.25 x max_block) is there only once the worker
 * has encoded: a decoder needs just the coder's fixed tables. */
typedef struct gmtf_workspace {
    size_t max_block;
    uint8_t *buf_a; /* max_block bytes: BWT output / decoded ranks */
    uint8_t *buf_b; /* max_block bytes: MTF ranks (encoder only) */
    void *bwt_ws;   /* gmtf_bwt_workspace_size(max_block) */
    void *rank_ws;  /* gmtf_rank_workspace_size(max_block) once rank_enc, else of 0 */
    int rank_enc;   /* rank_ws can encode (gmtf_workspace_encoder) */
    /* bwt_ws holds the inverse's table (or, range_rank, buf_a the BWT
     * output and bwt_ws its rank counts) of the version 2 BWT frame last
     * decoded by range (gmtf_frame_decode_range_ws), identified by these
     * header fields; any other use of the workspace clears range_valid. */
    int range_valid;
    int range_rank; /* buf_a holds the block's BWT output and bwt_ws its rank
                     * counts (gmtf_bwt_rank_table), not the table */
    uint32_t range_hcrc, range_flen, range_n, range_dcrc;
} gmtf_workspace;

/* Allocates a workspace that decodes; 0 or -ENOMEM. */
int gmtf_workspace_init(gmtf_workspace *w, size_t max_block);
/* Adds the encoder scratch (no-op when there); 0 or -ENOMEM. Call before
 * gmtf_frame_encode_ws or gmtf_frame_encode_ranks with w->rank_ws. */
int gmtf_workspace_encoder(gmtf_workspace *w);
/* Drops the encoder scratch again (kept on -ENOMEM: still valid). */
void gmtf_workspace_trim(gmtf_workspace *w);
void gmtf_workspace_free(gmtf_workspace *w);

/* ---- header (frame.c) --------------------------------------------------- */

/* Writes a frame header for the given fields into dst; returns its size. */
size_t gmtf_frame_write_header(uint8_t *dst, uint8_t method, uint32_t orig_len,
                               uint32_t payload_len, uint32_t data_crc, const uint32_t *idx,
                               unsigned nidx);
/* Version 2 header: its length for a block of n bytes, and the writer
 * (idx: gmtf_bwt_sample_count(n) rows, BWT frames only). A BWT frame's
 * header carries the CRC-32C of its payload: the writer computes it from
 * the payload_len bytes at dst + gmtf_frame_header_len_v2(method,
 * orig_len), which must be in place (raw and run headers read nothing). */
size_t gmtf_frame_header_len_v2(uint8_t method, size_t n);
size_t gmtf_frame_write_header_v2(uint8_t *dst, uint8_t method, uint32_t orig_len,
                                  uint32_t payload_len, uint32_t data_crc, const uint32_t *idx);
/* Parses and checks a header of either version; *hdr_len and idx[]
 * (GMTF_BWT_MAX_SAMPLES entries) receive the header size and BWT indexes,
 * *version the frame version. */
int gmtf_frame_parse(const uint8_t *src, size_t len, gmtf_frame_info *info, unsigned *hdr_len,
                     uint32_t *idx, unsigned *nidx);
int gmtf_frame_parse_version(const uint8_t *src, size_t len, gmtf_frame_info *info,
                             unsigned *hdr_len, uint32_t *idx, unsigned *nidx, unsigned *version);
/* The payload checksum of a frame parse accepted (src, its info, header
 * length and version): a version 2 BWT frame's payload against the CRC-32C
 * its header carries; 0 or GMTF_E_CHECKSUM. 0 for every other frame (raw
 * and run frames are checked by their data checksum, version 1 frames have
 * none). Every decoder calls it before an entropy decoder reads the
 * payload. */
int gmtf_frame_check_payload(const uint8_t *src, const gmtf_frame_info *fi, unsigned hdr_len,
                             unsigned version);

/* ---- one frame ---------------------------------------------------------- */

/* Encodes src[0..n) into dst (cap >= gmtf_frame_bound(n)) as a frame of
 * version (1 or 2) with MTF instance mtf (version 1 only) and workspace w
 * (encoder scratch present); *data_crc (may be NULL) gets the CRC-32C of
 * src. Returns the frame length or a negative code. */
long gmtf_frame_encode_ws(const gmtf_mtf *mtf, gmtf_workspace *w, const uint8_t *src, size_t n,
                          uint8_t *dst, size_t cap, unsigned version, uint32_t *data_crc);
/* As gmtf_frame_encode_ws; adaptive: a version 2 BWT block takes method 3
 * whatever the method rule says (gmtf_batch_encode_hint). */
long gmtf_frame_encode_ws_as(const gmtf_mtf *mtf, gmtf_workspace *w, const uint8_t *src, size_t n,
                             uint8_t *dst, size_t cap, unsigned version, uint32_t *data_crc,
                             int adaptive);
/* Decodes the frame at src[0..len) into dst (cap bytes); returns the
 * original length or a negative code. */
long gmtf_frame_decode_ws(const gmtf_mtf *mtf, gmtf_workspace *w, const uint8_t *src, size_t len,
                          uint8_t *dst, size_t cap);

/* Decodes bytes [off, off + cnt) of the frame at src[0..len) into
 * dst[0..cnt) (gmtf_frame_decode_range); w's range state lets a later
 * range of the same frame skip the entropy decoding and the table. */
long gmtf_frame_decode_range_ws(const gmtf_mtf *mtf, gmtf_workspace *w, const uint8_t *src,
                                size_t len, size_t off, size_t cnt, uint8_t *dst);

/* ---- pieces, for the staged batch path ---------------------------------- */

/* Empty, tiny and one-byte-run blocks: writes the frame and returns its
 * length, or 0 when the block needs the BWT path. */
long gmtf_frame_encode_special(const uint8_t *src, size_t n, uint8_t *dst, uint32_t crc);
/* Entropy-codes MTF ranks into a BWT frame (raw frame when that is smaller). */
long gmtf_frame_encode_ranks(const uint8_t *src, const uint8_t *ranks, size_t n,
                             const uint32_t *idx, uint32_t crc, uint8_t *dst, void *rank_ws);
/* Version 2: empty, tiny and run blocks as encode_special (0 when the block
 * needs the BWT), and a BWT block's frame from its BWT output bwt and
 * samples idx (gmtf_bwt_forward_step's layout; raw when not smaller;
 * adaptive: method 3 whatever the method rule says). */
long gmtf_frame_encode_special_v2(const uint8_t *src, size_t n, uint8_t *dst, uint32_t crc);
long gmtf_frame_encode_bwt_v2(const uint8_t *src, const uint8_t *bwt, size_t n, const uint32_t *idx,
                              uint32_t crc, uint8_t *dst, void *rank_ws, int adaptive);
/* For an encoder that codes the payload itself (a device): the room a
 * version 2 BWT frame of n bytes leaves for its payload, which goes at
 * dst + gmtf_frame_header_len_v2(GMTF_METHOD_BWT, n) (0: none, the frame
 * is raw); and the frame around plen bytes coded there: the header with
 * the payload's CRC-32C, or the raw frame when plen is -ENOSPC. Returns
 * the frame length or a negative code (plen's, or -EINVAL when it is 0 or
 * over the room). */
size_t gmtf_frame_payload_cap_v2(size_t n);
long gmtf_frame_finish_bwt_v2(const uint8_t *src, size_t n, const uint32_t *idx, uint32_t crc,
                              uint8_t *dst, long plen);
/* Parses a frame; raw and run frames are decoded into dst (returns 0);
 * version 1 BWT frames have their MTF ranks decoded into ranks[0..orig_len)
 * (returns GMTF_DECODE_RANKS), version 2 ones their BWT output (returns
 * GMTF_DECODE_BWT_V2: no inverse MTF); -EINVAL when a BWT frame is larger
 * than ranks_cap. idx holds GMTF_BWT_MAX_SAMPLES entries. */
#define GMTF_DECODE_RANKS 1
#define GMTF_DECODE_BWT_V2 2
long gmtf_frame_decode_begin(const uint8_t *src, size_t len, uint8_t *dst, size_t cap,
                             uint8_t *ranks, size_t ranks_cap, void *rank_ws, gmtf_frame_info *fi,
                             uint32_t *idx);
/* Inverse BWT of the inverse-MTF output (BWT frames) and the data check;
 * kind: what gmtf_frame_decode_begin returned (the sample layout).
 * mtf_out may be dst itself: the inverse BWT reads all of it first. */
long gmtf_frame_decode_end(const uint8_t *mtf_out, uint8_t *dst, const gmtf_frame_info *fi,
                           const uint32_t *idx, void *bwt_ws, long kind);

#endif
