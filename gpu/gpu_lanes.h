/* gpu/: decoding of lane-parallel rANS runs ("method 2" of the codec's
 * QLFC coder) on the GPU, many blocks at once, one thread a lane.
 *
 * Plain C over buffers. The host parses each block's header (its tables,
 * selectors, lane lists and rANS states: codec/entropy_lanes.c) into the
 * structures below; the device runs every lane's runs to the end and writes
 * the decoded bytes. The model (symbol alphabets, contexts, table layout)
 * is the codec's and is repeated here; the layout macros below let the
 * codec check at compile time that both sides agree.
 *
 * Untrusted input: the lanes' word streams are bounds-checked on every
 * read, every rank, length and table index is checked or clamped on the
 * device; a lane that breaks a rule stops and marks its block bad. The
 * structures themselves come from the caller's parser and are checked on
 * the host (-EINVAL) before anything runs.
 *
 * Errors: 0 or a negative errno-style code (-ENODEV, -EINVAL, -ENOMEM,
 * -EIO as gpu_ibwt.h). */
#ifndef GMTF_GPU_LANES_H
#define GMTF_GPU_LANES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GMTF_GPU_LANES 32           /* lanes a block */
#define GMTF_GPU_LANES_NSYM 16      /* symbols a table */
#define GMTF_GPU_LANES_CUM (16 + 2) /* cumulative counts a table */

/* One lane's decoding state after its block's header. */
typedef struct gmtf_gpu_lane {
    uint64_t x[2];          /* rANS states A and B */
    uint64_t in, in_end;    /* its word stream: byte offsets in the batch's input */
    uint32_t pos, end;      /* next and end output offsets in the block */
    uint32_t start;         /* the lane's first output offset */
    uint32_t active;        /* live bytes in list */
    uint32_t group_base;    /* its first selector */
    uint32_t c, rtab, ltab; /* the next run: byte, rank table, length tables */
    uint8_t list[256], er[256], el[256], hr[256];
} gmtf_gpu_lane;

/* The layout the device assumes (the codec checks it at compile time):
 * tables a block (the last one the one-symbol table), tables a selector
 * set, output bytes a selector, selectors a block. */
#define GMTF_GPU_LANES_NTABLES 1357
#define GMTF_GPU_LANES_TPS 168
#define GMTF_GPU_LANES_GROUP 4096
#define GMTF_GPU_LANES_MAX_GROUPS 4128

typedef struct gmtf_gpu_lanes_ctx gmtf_gpu_lanes_ctx;

int gmtf_gpu_lanes_create(gmtf_gpu_lanes_ctx **out);
/* The same on CUDA device dev (0 .. gmtf_gpu_device_count() - 1, else
 * -ENODEV); each call makes dev the calling thread's current device. */
int gmtf_gpu_lanes_create_on(int dev, gmtf_gpu_lanes_ctx **out);
void gmtf_gpu_lanes_destroy(gmtf_gpu_lanes_ctx *ctx);
int gmtf_gpu_lanes_ok(const gmtf_gpu_lanes_ctx *ctx);
const char *gmtf_gpu_lanes_error(const gmtf_gpu_lanes_ctx *ctx);

/* Decodes count blocks: in[0..nin) holds every lane's word stream; block b
 * has lanes[32 b .. 32 b + 32), its tables at cum + b * ntables * 18
 * (uint16, cumulative counts of 12-bit frequencies), its selectors at
 * sel + b * max_groups; its output goes to out[out_off[b] .. out_off[b+1]).
 * bad[b] = 1 when the block's lanes broke a rule (the caller's "corrupt"),
 * else 0. A block whose lanes are all at their end (pos == end) is a
 * stand-in: nothing is written to its part of out. */
int gmtf_gpu_lanes_decode(gmtf_gpu_lanes_ctx *ctx, const uint8_t *in, uint64_t nin, size_t count,
                          const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                          const uint64_t *out_off, uint8_t *out, uint8_t *bad);

/* The same, the output kept on the device for the inverse BWT
 * (gmtf_gpu_lanes_out_device; valid until the next decode): the blocks
 * without work (stand-ins) get their bytes there from fill (at out_off,
 * like out), the blocks with work are not copied back. */
int gmtf_gpu_lanes_decode_keep(gmtf_gpu_lanes_ctx *ctx, const uint8_t *in, uint64_t nin,
                               size_t count, const gmtf_gpu_lane *lanes, const uint16_t *cum,
                               const uint8_t *sel, const uint64_t *out_off, const uint8_t *fill,
                               uint8_t *bad);
/* The device pointer of the last decode_keep's or decode_groups' output
 * (the bytes of out_off[0]); -EINVAL after any other call. */
int gmtf_gpu_lanes_out_device(gmtf_gpu_lanes_ctx *ctx, void **out);

/* decode_keep in groups that end apart: group g is the blocks
 * [gend[g - 1], gend[g]) (gend[-1] = 0, ascending, gend[ngroups - 1] =
 * count, 1 <= ngroups <= GMTF_GPU_LANES_GROUPS_MAX), launched on its own
 * stream after the uploads; returns once all is launched, nothing waited
 * (in the emulation: all done). The caller's buffers must stay as they
 * are until every group is waited. group_event(g): a cudaEvent_t (as void
 * *) recorded when group g's lanes are done, for another context's stream
 * to wait on (NULL in the emulation or for no such group); group_wait(g):
 * waits for group g and gives its blocks' verdicts (bad[0 .. its count),
 * as decode's bad; bad may be NULL). */
#define GMTF_GPU_LANES_GROUPS_MAX 8
int gmtf_gpu_lanes_decode_groups(gmtf_gpu_lanes_ctx *ctx, const uint8_t *in, uint64_t nin,
                                 size_t count, const gmtf_gpu_lane *lanes, const uint16_t *cum,
                                 const uint8_t *sel, const uint64_t *out_off, const uint8_t *fill,
                                 size_t ngroups, const size_t *gend);
void *gmtf_gpu_lanes_group_event(gmtf_gpu_lanes_ctx *ctx, size_t g);
int gmtf_gpu_lanes_group_wait(gmtf_gpu_lanes_ctx *ctx, size_t g, uint8_t *bad);

/* ---- encoding ---------------------------------------------------------------
 * Method 2's encoder in two device steps around the codec's choices
 * (codec/entropy_lanes.c): scan, then the host picks table sets, selectors
 * and tables from what the scan gave, then code. Block b of a batch is
 * bwt[off[b] .. off[b+1]) (off[0] = 0, 1 byte .. 16 MiB a block), cut into
 * 32 lanes of ceil(n / 32) bytes; lane j of block b (L = 32 b + j) covers
 * [a, e) of its block and owns groups gbase(j) .. of its block's
 * selectors (one a 4 KiB of the lane). */
#define GMTF_GPU_LANES_NSHARED 12 /* tables counted by the scan: offsets, escaped lengths */

typedef struct gmtf_gpu_lanes_scan_out {
    uint8_t *rk;      /* off[count] bytes: lane L's run ranks from rk[roff[L]] */
    uint16_t *keys;   /* 2 off[count]: its runs' two keys from keys[2 roff[L]] */
    uint32_t *runs;   /* 32 count: runs a lane */
    uint64_t *roff;   /* 32 count + 1: each lane's first run in rk, the total last */
    uint8_t *init;    /* 256 a lane: its bytes by first use */
    uint16_t *ninit;  /* 32 count: how many */
    uint32_t *gstart; /* GMTF_GPU_LANES_MAX_GROUPS a block: first run of each group,
                       * counted from its lane's first run */
    uint32_t *shared; /* GMTF_GPU_LANES_NSHARED x 16 a lane: counts */
} gmtf_gpu_lanes_scan_out;

typedef struct gmtf_gpu_lanes_enc gmtf_gpu_lanes_enc;

int gmtf_gpu_lanes_enc_create(gmtf_gpu_lanes_enc **out);
/* The same on CUDA device dev, as gmtf_gpu_lanes_create_on. */
int gmtf_gpu_lanes_enc_create_on(int dev, gmtf_gpu_lanes_enc **out);
void gmtf_gpu_lanes_enc_destroy(gmtf_gpu_lanes_enc *ctx);
const char *gmtf_gpu_lanes_enc_error(const gmtf_gpu_lanes_enc *ctx);
/* The device time of the last scan and code kernels (ms; 0 in the
 * emulation): for benchmarks. */
void gmtf_gpu_lanes_enc_kernel_ms(const gmtf_gpu_lanes_enc *ctx, double *scan, double *code);

/* Scans count blocks into o's buffers (sizes above); the device keeps the
 * batch and the scan for gmtf_gpu_lanes_enc_code. */
int gmtf_gpu_lanes_enc_scan(gmtf_gpu_lanes_enc *ctx, const uint8_t *bwt, size_t count,
                            const uint64_t *off, gmtf_gpu_lanes_scan_out *o);

/* Codes the lanes of the last scan's blocks: block b's selectors at
 * sel + b * GMTF_GPU_LANES_MAX_GROUPS, its tables at cum + b * NTABLES * 18
 * (gmtf_gpu_lanes_decode's layout). Lane L's stream (its two rANS states,
 * then its words) goes to out at the sum of len[0 .. L); len[L] = 0 when it
 * did not fit in 2 bytes an input byte + 64 (the caller codes that lane).
 * -ENOSPC when the streams exceed cap. */
int gmtf_gpu_lanes_enc_code(gmtf_gpu_lanes_enc *ctx, const uint8_t *sel, const uint16_t *cum,
                            uint8_t *out, uint64_t cap, uint32_t *len);

/* The same two steps fed from the device (the codec's batch: the forward
 * BWT's output never comes up for them), their host side in pinned
 * buffers the context holds (allocated once, grown, reused):
 * - scan_dev: dbwt is a device pointer to the blocks' BWT bytes (at off,
 *   off[0] = 0), copied on the device (it may change after the call); o's
 *   pointers are set to the context's copies, valid until its next scan;
 * - tables: the context's buffers for the plan of the last scan_dev's
 *   blocks: selectors and tables (gmtf_gpu_lanes_enc_code's layout) and
 *   skip[b] (1: block b is not coded, its lanes' lengths 0);
 * - code_dev: codes the blocks not skipped with those; *streams and *len
 *   (as gmtf_gpu_lanes_enc_code's out and len) point into the context,
 *   valid until its next code_dev or scan_dev. */
int gmtf_gpu_lanes_enc_scan_dev(gmtf_gpu_lanes_enc *ctx, const void *dbwt, size_t count,
                                const uint64_t *off, gmtf_gpu_lanes_scan_out *o);

/* The plan's statistics on the device (codec/entropy_lanes.c's
 * choose_selectors for 1 and 2 table sets, the same integer arithmetic),
 * block by block; the host quantises the tables, estimates the headers and
 * picks (gmtf_lanes_enc_dev_plan_stats). */
#define GMTF_GPU_LANES_PLAN_SETS 2
typedef struct gmtf_gpu_lanes_plan {
    uint32_t bad;    /* the scan broke a rule in this block (the host's -EIO) */
    uint32_t big;    /* runs of rank >= big_rank (the method rule) */
    uint32_t runs;   /* runs of the block */
    uint32_t ng;     /* its groups (selectors) */
    uint64_t est[2]; /* code size estimates (1/256 bits): 1 set, 2 sets */
    uint32_t cnt1[GMTF_GPU_LANES_TPS * 16];    /* counts, 1 set */
    uint32_t cnt2[2][GMTF_GPU_LANES_TPS * 16]; /* counts by set, 2 sets */
} gmtf_gpu_lanes_plan;

/* Scan and plan in one device call: the scan as scan_dev (dev = 0: bwt is
 * host memory) and the plan above on its outputs where they lie, so that
 * the runs' ranks and keys never come down: o's pointers are set to the
 * context's pinned buffers, o->rk, o->keys and o->roff to NULL; *plans
 * (count) and *psel (the 2-set selectors, GMTF_GPU_LANES_MAX_GROUPS a
 * block) point into the context, valid until its next scan. tables and
 * code_dev follow as after scan_dev. */
int gmtf_gpu_lanes_enc_scan_plan(gmtf_gpu_lanes_enc *ctx, const void *bwt, int dev, size_t count,
                                 const uint64_t *off, unsigned big_rank, gmtf_gpu_lanes_scan_out *o,
                                 const gmtf_gpu_lanes_plan **plans, const uint8_t **psel);
/* The device time of the last scan_plan's plan kernel (ms; 0 in the
 * emulation). */
double gmtf_gpu_lanes_enc_plan_ms(const gmtf_gpu_lanes_enc *ctx);
int gmtf_gpu_lanes_enc_tables(gmtf_gpu_lanes_enc *ctx, uint8_t **sel, uint16_t **cum,
                              uint8_t **skip);
int gmtf_gpu_lanes_enc_code_dev(gmtf_gpu_lanes_enc *ctx, const uint8_t **streams,
                                const uint32_t **len);

#ifdef __cplusplus
}
#endif

#endif
