/* gmtf block codec: BWT -> QLFC entropy coding (frame version 2; version 1
 * frames, BWT -> MTF -> zero-run coding -> entropy coding, stay readable).
 *
 * Public API of libgmtf. Every function returns 0 (or a non-negative count)
 * on success and a negative errno-style code on failure; gmtf_strerror()
 * turns a code into text.
 *
 * Memory: a gmtf_codec owns its thread pool, its MTF backend instances and
 * one workspace per worker thread, made at the worker's first block:
 * 2 x max_block of buffers, 4 x max_block for the BWT and 0.7 MiB of
 * entropy tables, plus 7.25 x max_block of encoder scratch once the worker
 * encodes (gmtf_codec_trim drops that again). Once a worker's workspace
 * exists, coding a block allocates nothing. A batch call allocates small
 * bookkeeping arrays (tens of bytes per block) and, when the batch goes to
 * a batch MTF backend (the GPU), two staging buffers of the batch's size,
 * kept and grown to the largest batch seen.
 *
 * A frame is one self-describing compressed block (docs/codec.md). Frames
 * are untrusted input: decoders check every field and never read or write
 * out of bounds, whatever the bytes. */
#ifndef GMTF_CODEC_H
#define GMTF_CODEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GMTF_BLOCK_MIN 1u
#define GMTF_BLOCK_MAX (16u << 20) /* 16 MiB: largest block a frame holds */
#define GMTF_BLOCK_DEFAULT (900u << 10)

/* Error codes beyond the errno ones (all negative). */
#define GMTF_E_CORRUPT (-1001)   /* frame damaged: bad magic, field or data */
#define GMTF_E_CHECKSUM (-1002)  /* header, payload or data checksum mismatch */
#define GMTF_E_TRUNCATED (-1003) /* input ends inside a frame */
#define GMTF_E_VERSION (-1004)   /* frame from a newer format version */
#define GMTF_E_BACKEND (-1005)   /* unknown or unavailable MTF backend */

const char *gmtf_strerror(int err);
const char *gmtf_version(void);

/* ---- codec context ---------------------------------------------------- */

typedef struct gmtf_codec gmtf_codec;

typedef struct gmtf_codec_options {
    unsigned threads;       /* worker threads for batches; 0 = 1 */
    const char *mtf;        /* MTF backend name, NULL or "auto" = best available */
    uint32_t max_block;     /* largest block to be encoded/decoded; 0 = GMTF_BLOCK_MAX */
    unsigned frame_version; /* frames to write: 0 = the newest (2); 1 = version 1
                             * (MTF ranks), readable by older decoders */
    const char *gpus;       /* GPUs for batches: "all", or numbers "0,1"; NULL: the
                             * GMTF_GPUS environment variable, else all (docs/gpu.md) */
} gmtf_codec_options;

/* Creates a codec: the thread pool and the MTF backend instances (a GPU
 * instance starts CUDA only at its first batch). Workspaces for blocks up
 * to max_block are allocated lazily, once per worker. Returns 0, -ENOMEM,
 * -EINVAL or GMTF_E_BACKEND. */
int gmtf_codec_create(gmtf_codec **out, const gmtf_codec_options *opt);
void gmtf_codec_destroy(gmtf_codec *c);
/* 0 when list is a valid GPU list (gmtf_codec_options.gpus: "all", or
 * device numbers 0..15 separated by commas or colons, none twice), else
 * -EINVAL.
 * Devices in the list that the host lacks are left out when the codec is
 * made (none left: batches on the CPU). */
int gmtf_codec_gpus_check(const char *list);
/* Name of the MTF backend this codec uses (resolved, never "auto"). */
const char *gmtf_codec_mtf_name(const gmtf_codec *c);
unsigned gmtf_codec_threads(const gmtf_codec *c);
/* 1 when this codec's batches (from the size rule's minimum on) go to a
 * GPU: a gpu backend (or auto) with a device found and not retired by a
 * failed call; else 0. Callers may size their batches by it (a device's
 * batch costs about as much at 128 MiB as at 256). */
int gmtf_codec_batch_device(const gmtf_codec *c);
/* Frees the encoder-only scratch of every worker (about 7.25 x max_block
 * each; a worker that only decodes never has it), keeping what decoding
 * needs; the next encode allocates it again. For a long-lived codec that
 * encodes now and then and decodes in between (a mounted filesystem). Not
 * concurrent with other calls on c. */
void gmtf_codec_trim(gmtf_codec *c);
/* Readies c for batches of about batch_bytes (encode: 1, decode: 0)
 * before the first one: every worker's workspace, and with a device its
 * contexts (CUDA's start) and the pinned staging, which the first batch
 * would otherwise make. A caller may run it on a thread of its own while it
 * reads the first batch (nothing else may use c meanwhile). 0 or -ENOMEM;
 * a device that cannot start is left to the first batch to find. */
int gmtf_codec_prepare(gmtf_codec *c, uint64_t batch_bytes, int encode);

/* The batch a caller will encode next (gmtf_batch_encode's arguments).
 * after, on the way in: NULL for the batch after the one being encoded;
 * else the codec asks for the batch after the one whose src is after (two
 * ahead), and a hook that answers that leaves after as it was (a hook that
 * fills *next anew, after NULL, answers only for the next batch). */
typedef struct gmtf_batch_next {
    const uint8_t *src;
    const uint64_t *off;
    size_t count;
    uint8_t *dst;
    uint64_t cap;
    const uint8_t *after;
} gmtf_batch_next;

/* Asked during a batch encode on the device for the batch the caller will
 * encode next (on the caller's thread; it may wait until that batch is
 * read): 1 with *next filled, 0 when there is none. With after set it is
 * asked on a thread of the codec's, during the encode of the batch before
 * after's or after that call returned, until the caller's next encode
 * call; it may wait until that batch is read. */
typedef int (*gmtf_batch_next_fn)(void *arg, gmtf_batch_next *next);

/* Encoding ahead on a device: with fn set, a batch encode on the device
 * asks fn for the next batch and starts it (its checksums, its copy into a
 * second staging set and its device step) beside its own last steps, so
 * that the device does not wait for them; the next gmtf_batch_encode with
 * exactly those arguments takes that work over (another encode, a decode
 * or a prepare first waits for it and drops it). Between the two calls
 * the next batch's src, off and dst must stay as they are. A batch coded
 * mostly on the CPU also has a helper thread ask fn for the batch after
 * the next one (gmtf_batch_next.after) and start it the same way (two
 * ahead, a third staging set); its src, off and dst must then stay until
 * its own call. gmtf_codec_prepare readies the staging sets. fn NULL: off
 * (the default), after waiting for any batch started ahead. The frames
 * are the same either way. */
void gmtf_codec_set_next(gmtf_codec *c, gmtf_batch_next_fn fn, void *arg);

/* The encode's staging on a device from pageable memory (on = 1) rather
 * than pinned (0, the default unless encoding ahead), for a short-lived
 * process: pinning costs about 0.7 ms a MiB on the H100 host, serialized
 * in the driver, at the prepare and again at the exit, which a process
 * with few batches does not win back (mkfs.gmtf: docs/gpu.md, mkfs11).
 * Call it before gmtf_codec_prepare; the frames are the same either way. */
void gmtf_codec_set_pageable(gmtf_codec *c, int on);

/* ---- single frames ---------------------------------------------------- */

/* Largest frame that encoding n bytes can produce (n plus a small header). */
size_t gmtf_frame_bound(size_t n);

/* Encodes src[0..n) (1 <= n <= max_block; n == 0 gives a valid empty
 * frame) into dst, which must hold gmtf_frame_bound(n) bytes.
 * Returns the frame length or a negative code. Not thread-safe on one
 * codec: use the batch calls, or one codec per thread. */
long gmtf_frame_encode(gmtf_codec *c, const void *src, size_t n, void *dst, size_t cap);

/* Decodes one frame that starts at src (len bytes available; trailing bytes
 * after the frame are ignored). dst must hold the frame's original length
 * (see gmtf_frame_info). Returns the original length or a negative code. */
long gmtf_frame_decode(gmtf_codec *c, const void *src, size_t len, void *dst, size_t cap);

/* Decodes bytes [off, off + cnt) of the block of the frame at src (len
 * bytes available) into dst (cnt bytes). For a BWT frame of version 2 it
 * checks the payload's checksum (in the header), then walks only the
 * inverse BWT's chains that cover the range (one per 32 KiB of block, so
 * at most 32 KiB more than cnt) after the entropy decoding and the
 * inverse's rank counts (docs/codec.md; the inverse's table for blocks
 * under 64 KiB or the whole block), and the codec keeps those for this
 * frame: a later
 * range of the same frame (the same header: the header checksum, which
 * covers the payload checksum, lengths and data checksum) on this codec
 * checks the payload and walks its chains only, until the codec's next
 * other call. The data checksum covers the whole block, so it is checked
 * only when the range is the whole block (then as gmtf_frame_decode
 * does); a partial range is as trustworthy as the header and the payload,
 * whose checksums are both checked, and the samples, which are checked
 * against the block's length. Other frames (raw, run: checked whole;
 * version 1: decoded whole) cost what gmtf_frame_decode does. Returns cnt
 * or a negative code (GMTF_E_CHECKSUM for a damaged payload, -EINVAL when
 * the range is outside the block). Not thread-safe on one codec. */
long gmtf_frame_decode_range(gmtf_codec *c, const void *src, size_t len, size_t off, size_t cnt,
                             void *dst);

typedef struct gmtf_frame_info {
    uint32_t frame_len; /* header + payload bytes */
    uint32_t orig_len;  /* decoded bytes */
    uint8_t method;     /* GMTF_METHOD_* */
    uint32_t data_crc;  /* CRC-32C of the decoded bytes */
} gmtf_frame_info;

#define GMTF_METHOD_RAW 0 /* stored: payload is the data */
#define GMTF_METHOD_RUN 1 /* one byte repeated orig_len times */
#define GMTF_METHOD_BWT                                                                            \
    2 /* BWT + entropy (version 1: MTF + zero-run + rank coder;
                           * version 2: QLFC coder) */

/* Parses and checks a frame header (magic, version, header checksum,
 * lengths fit in len). Reads no payload. Returns 0 or a negative code. */
int gmtf_frame_info_get(const void *src, size_t len, gmtf_frame_info *info);

/* ---- batches -----------------------------------------------------------
 * A batch is count blocks in one buffer: block i is
 * src[off[i] .. off[i+1]), off has count+1 entries, off[0] = 0.
 * The blocks run in parallel on the codec's thread pool; the result is the
 * same bytes whatever the thread count. */

/* Bound on the output of gmtf_batch_encode for that batch. */
uint64_t gmtf_batch_bound(const uint64_t *off, size_t count);

/* Encodes every block into one frame each, packed one after another in dst
 * (cap bytes; gmtf_batch_bound is always enough). dst_off (count+1
 * entries) receives where each frame starts and, last, the total length.
 * Returns 0 or a negative code (no partial result is promised then). */
int gmtf_batch_encode(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                      uint8_t *dst, uint64_t cap, uint64_t *dst_off);
/* As gmtf_batch_encode; crc (count entries, may be NULL) also receives the
 * CRC-32C of each block, the data checksum its frame carries
 * (gmtf_frame_info.data_crc), so that a caller need not parse the frames
 * it just made. */
int gmtf_batch_encode_crc(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                          uint8_t *dst, uint64_t cap, uint64_t *dst_off, uint32_t *crc);
/* As gmtf_batch_encode_crc; adaptive (count entries, may be NULL): block i
 * takes method 3, the adaptive coder, when adaptive[i] is not 0, whatever
 * the method rule says (frame version 2; a block too short for the BWT or
 * incompressible is stored as it would be), for a caller that knows a
 * block is read seldom for its bytes (mkfs: a frame of few large files,
 * docs/format.md "Pack size"). The frames are the same bytes on every
 * path (CPU, device, any thread count). A hinted batch drops work started
 * ahead for it (gmtf_codec_set_next takes no hints) and is not split
 * among several devices (the codec's own path codes it). */
int gmtf_batch_encode_hint(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                           uint8_t *dst, uint64_t cap, uint64_t *dst_off, uint32_t *crc,
                           const uint8_t *adaptive);

/* Decodes count frames at src[foff[i] .. foff[i+1]) into dst, block i at
 * dst[doff[i] .. doff[i+1]) (the caller knows the sizes, e.g. from
 * gmtf_frame_info_get). status[i] gets 0 or the error of frame i; the
 * return value is 0 when all succeeded, else the first error. */
int gmtf_batch_decode(gmtf_codec *c, const uint8_t *src, const uint64_t *foff, size_t count,
                      uint8_t *dst, const uint64_t *doff, int *status);

/* ---- MTF backends ------------------------------------------------------ */

/* Names of all MTF backends known to this build ("scalar", "simd",
 * "simd-avx2", "gpu", "gpu-4by8", ...); *available tells whether each can
 * run on this machine. Returns the count. */
size_t gmtf_mtf_backend_count(void);
const char *gmtf_mtf_backend_name(size_t i, int *available);

/* ---- checksum ---------------------------------------------------------- */

/* CRC-32C (Castagnoli), hardware-accelerated where the CPU has it. */
uint32_t gmtf_crc32c(uint32_t crc, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
