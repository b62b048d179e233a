/* The codec's batch BWT device: the GPU's forward BWT (gpu/gpu_bwt.h) and
 * inverse BWT (gpu/gpu_ibwt.h) behind an ops table, so that batch.c knows
 * no CUDA and the tests can put the CPU emulations of those kernels in the
 * GPU's place. One per codec (gmtf_codec.bwt_dev), used by the batch calls
 * only (which a codec serialises); the device contexts are made at the
 * first batch that goes to the device. A device call that fails retires
 * the device for the codec's life (contexts destroyed, every later batch on
 * the CPU); the batch that saw the failure is redone on the CPU by the
 * caller. Internal to libgmtf. */
#ifndef GMTF_BWT_DEV_H
#define GMTF_BWT_DEV_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_lanes.h"

/* The calls of gpu_bwt.h / gpu_ibwt.h that the codec uses (same meaning);
 * the create calls make their context on device dev (gmtf_gpu_*_create_on). */
typedef struct gmtf_bwt_dev_ops {
    const char *name;
    int (*fwd_create)(int dev, void **ctx);
    void (*fwd_destroy)(void *ctx);
    int (*fwd)(void *ctx, const uint8_t *src, const uint64_t *off, size_t count,
               const uint32_t *step, uint8_t *dst, uint32_t *idx);
    int (*inv_create)(int dev, void **ctx);
    void (*inv_destroy)(void *ctx);
    int (*inv)(void *ctx, const uint8_t *bwt, const uint64_t *off, size_t count,
               const uint32_t *step, const uint32_t *idx, uint8_t *dst);
    /* Optional (gpu_lanes.h): method 2's lanes decoded on the device. */
    int (*lanes_create)(int dev, void **ctx);
    void (*lanes_destroy)(void *ctx);
    int (*lanes)(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                 const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                 const uint64_t *out_off, uint8_t *out, uint8_t *bad);
    /* Optional (gpu_lanes.h): method 2's encoder fed from the device:
     * enc_scan scans the output of the last fwd call on fwd_ctx (still on
     * the device; gmtf_gpu_lanes_enc_scan_dev), enc_tables and enc_code as
     * gmtf_gpu_lanes_enc_tables / _code_dev. */
    int (*enc_create)(int dev, void **ctx);
    void (*enc_destroy)(void *ctx);
    int (*enc_scan)(void *ctx, void *fwd_ctx, size_t count, const uint64_t *off,
                    gmtf_gpu_lanes_scan_out *o);
    int (*enc_tables)(void *ctx, uint8_t **sel, uint16_t **cum, uint8_t **skip);
    int (*enc_code)(void *ctx, const uint8_t **streams, const uint32_t **len);
    /* Optional: enc_scan and the plan's statistics in one device call
     * (gmtf_gpu_lanes_enc_scan_plan, dev = 1). */
    int (*enc_scan_plan)(void *ctx, void *fwd_ctx, size_t count, const uint64_t *off,
                         unsigned big_rank, gmtf_gpu_lanes_scan_out *o,
                         const gmtf_gpu_lanes_plan **plans, const uint8_t **psel);
    /* Optional (gpu_ibwt.h): the inverse BWT of bytes already on the
     * device (the output of lanes_keep, which leaves it on the device and
     * fills the stand-ins' bytes from fill: gmtf_gpu_lanes_decode_keep,
     * gmtf_gpu_ibwt_batch_dev). */
    int (*lanes_keep)(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                      const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                      const uint64_t *out_off, const uint8_t *fill, uint8_t *bad);
    int (*inv_dev)(void *ctx, void *lanes_ctx, const uint64_t *off, size_t count,
                   const uint32_t *step, const uint32_t *idx, uint8_t *dst);
    /* Optional: the lanes and the inverse in groups that end apart, each
     * group's inverse queued behind its own lanes (gmtf_gpu_lanes_decode_groups,
     * gmtf_gpu_ibwt_batch_dev_start): lanes_groups launches every group's
     * lanes (lanes_keep's arguments and the groups' ends); inv_group_start
     * queues group g's inverse on the inverse context ctx (off, step, idx:
     * the group's blocks; their bytes on the device at off[0] - base of the
     * lanes' output); inv_group_wait waits for it and gives the group's
     * lanes verdicts (bad, as lanes'). */
    int (*lanes_groups)(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                        const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                        const uint64_t *out_off, const uint8_t *fill, size_t ngroups,
                        const size_t *gend);
    int (*inv_group_start)(void *ctx, void *lanes_ctx, size_t g, uint64_t base, const uint64_t *off,
                           size_t count, const uint32_t *step, const uint32_t *idx, uint8_t *dst);
    int (*inv_group_wait)(void *ctx, void *lanes_ctx, size_t g, uint8_t *bad);
} gmtf_bwt_dev_ops;

/* Contexts: forward, inverse, lanes (decode), and three encoders (chunk k
 * takes encoder k % 3: three chunks are between their scan and their code
 * step at once, batch.c's enc_pipeline). */
enum {
    GMTF_BWT_DEV_FWD,
    GMTF_BWT_DEV_INV,
    GMTF_BWT_DEV_LANES,
    GMTF_BWT_DEV_ENC0,
    GMTF_BWT_DEV_ENC1,
    GMTF_BWT_DEV_ENC2,
    GMTF_BWT_DEV_NCTX
};
#define GMTF_BWT_DEV_PIPE_MAX 16

typedef struct gmtf_bwt_dev {
    const gmtf_bwt_dev_ops *ops;        /* NULL: no device */
    int device;                         /* the device its contexts are made on */
    void *ctx[GMTF_BWT_DEV_NCTX];       /* NULL until first used */
    int use_lanes;                      /* decode method 2 on the device (ops->lanes) */
    int use_enc;                        /* encode method 2 on the device (ops->enc_*) */
    int use_plan;                       /* and its plan's statistics (ops->enc_scan_plan) */
    int use_inv_dev;                    /* invert the lanes' output on the device (ops->inv_dev) */
    int copy_in;                        /* decode: payloads copied to pinned memory for the lanes */
    int split_m3;                       /* decode: method 2 blocks and the others in two chunks */
    int retired;                        /* a call failed: no more device calls */
    int hold;                           /* retirement keeps the contexts (gmtf_bwt_dev_hold) */
    pthread_mutex_t lock;               /* the bookkeeping of calls from two threads */
    int last_err;                       /* the error that retired it */
    uint64_t min_bytes[2];              /* smallest batch (bytes) each direction sends */
    long fault_at;                      /* tests: device call number fault_at fails (-EIO) */
    long calls;                         /* device calls so far */
    uint64_t blocks[GMTF_BWT_DEV_NCTX]; /* blocks each context did on the device */
    uint64_t ns[GMTF_BWT_DEV_NCTX];     /* wall time of each context's device calls */
    unsigned pipe[2];                   /* most chunks a batch is cut into, each direction */
    uint64_t chunk_min;                 /* fewest bytes a chunk holds */
    unsigned dec_groups;                /* decode: groups of the lanes and inverse (1: none) */
    int use_groups;                     /* ops->lanes_groups etc. and dec_groups > 1 */
    int dec_taper;                      /* groups' shares tapered (GMTF_GPU_DEC_TAPER; 1) */
    void *inv_grp[GMTF_GPU_LANES_GROUPS_MAX]; /* inverse contexts of groups 1.. (0: ctx[INV]) */
} gmtf_bwt_dev;

/* The GPU's ops, or NULL in a build without CUDA. */
const gmtf_bwt_dev_ops *gmtf_bwt_dev_gpu(void);
/* Usable GPUs (gmtf_gpu_device_count; 0 without CUDA). */
int gmtf_bwt_dev_gpu_count(void);

/* Sets up d for ops (NULL: no device). Environment, read here:
 * GMTF_GPU_BWT_MIN / GMTF_GPU_IBWT_MIN (smallest batch in bytes sent to
 * the device, each direction), GMTF_GPU_PIPE / GMTF_GPU_IPIPE (most
 * chunks a batch is cut into, 1..GMTF_BWT_DEV_PIPE_MAX; a chunk holds
 * GMTF_GPU_CHUNK_MIN bytes or more), GMTF_GPU_FAULT=N (device call N, from 1,
 * fails as a device error would: the fault-injection hook). */
void gmtf_bwt_dev_init(gmtf_bwt_dev *d, const gmtf_bwt_dev_ops *ops);
/* The same for device number device (gmtf_bwt_dev_init: device 0). With
 * GMTF_GPU_FAULT_DEV=K set, GMTF_GPU_FAULT applies to device K only. */
void gmtf_bwt_dev_init_on(gmtf_bwt_dev *d, const gmtf_bwt_dev_ops *ops, int device);
void gmtf_bwt_dev_free(gmtf_bwt_dev *d);

/* on = 1: a retirement leaves the contexts (and their host buffers, which
 * other threads may still read) in place; on = 0 closes them if the
 * device was retired meanwhile. */
void gmtf_bwt_dev_hold(gmtf_bwt_dev *d, int on);

/* Makes the contexts a batch in that direction uses (forward and the
 * encoders, or the inverse and the lanes decoder) ahead of it: no device
 * call is counted. 0, or the code of the context that failed. */
int gmtf_bwt_dev_prepare(gmtf_bwt_dev *d, int dir);

/* 1 when a batch of that many bytes goes to the device in that direction. */
int gmtf_bwt_dev_wants(const gmtf_bwt_dev *d, int dir, uint64_t bytes);

/* The device calls: 0, or a negative code; on a device error (anything
 * but -EINVAL / -EUCLEAN, which the input caused) the device is retired. */
int gmtf_bwt_dev_forward(gmtf_bwt_dev *d, const uint8_t *src, const uint64_t *off, size_t count,
                         const uint32_t *step, uint8_t *dst, uint32_t *idx);
int gmtf_bwt_dev_inverse(gmtf_bwt_dev *d, const uint8_t *bwt, const uint64_t *off, size_t count,
                         const uint32_t *step, const uint32_t *idx, uint8_t *dst);
/* keep (with use_inv_dev): the lanes' output stays on the device for
 * gmtf_bwt_dev_inverse_lanes, the stand-ins' bytes taken from out. */
int gmtf_bwt_dev_lanes(gmtf_bwt_dev *d, const uint8_t *in, uint64_t nin, size_t count,
                       const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                       const uint64_t *out_off, uint8_t *out, uint8_t *bad, int keep);
/* Method 2's encoder on encoder context e % 3: the scan of the last
 * forward call's output (off: its blocks from 0), then the code step; the
 * tables are no device call (-ENODEV when the device is gone). */
int gmtf_bwt_dev_enc_scan(gmtf_bwt_dev *d, int e, size_t count, const uint64_t *off,
                          gmtf_gpu_lanes_scan_out *o);
/* The scan and the plan's statistics (use_plan) in one call, as enc_scan. */
int gmtf_bwt_dev_enc_scan_plan(gmtf_bwt_dev *d, int e, size_t count, const uint64_t *off,
                               unsigned big_rank, gmtf_gpu_lanes_scan_out *o,
                               const gmtf_gpu_lanes_plan **plans, const uint8_t **psel);
int gmtf_bwt_dev_enc_tables(gmtf_bwt_dev *d, int e, uint8_t **sel, uint16_t **cum, uint8_t **skip);
int gmtf_bwt_dev_enc_code(gmtf_bwt_dev *d, int e, size_t count, const uint8_t **streams,
                          const uint32_t **len);
/* The inverse BWT of the last lanes call's output (on the device). */
int gmtf_bwt_dev_inverse_lanes(gmtf_bwt_dev *d, const uint64_t *off, size_t count,
                               const uint32_t *step, const uint32_t *idx, uint8_t *dst);
/* use_groups: the lanes of count blocks in ngroups groups (gend as
 * gmtf_gpu_lanes_decode_groups'), each group's inverse queued behind its
 * lanes (block j's rows at idx + ioff[j], its output at dst + out_off[j]);
 * returns once queued (one device call). Then group_wait(g), from any
 * thread, once for each group: 0 when group g's output is in dst (bad: its
 * count blocks' verdicts), else an error (the device retired: decode it on the
 * CPU). The caller holds the device (gmtf_bwt_dev_hold) from the start to
 * the last wait. */
int gmtf_bwt_dev_dec_groups(gmtf_bwt_dev *d, const uint8_t *in, uint64_t nin, size_t count,
                            const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                            const uint64_t *out_off, const uint8_t *fill, size_t ngroups,
                            const size_t *gend, const uint32_t *step, const uint32_t *idx,
                            const uint64_t *ioff, uint8_t *dst);
int gmtf_bwt_dev_dec_group_wait(gmtf_bwt_dev *d, size_t g, size_t count, uint8_t *bad);
/* gmtf_bwt_dev_inverse on group g's inverse context (made if needed; g <
 * GMTF_GPU_LANES_GROUPS_MAX): the blocks outside the groups, beside them. */
int gmtf_bwt_dev_inverse_grp(gmtf_bwt_dev *d, size_t g, const uint8_t *bwt, const uint64_t *off,
                             size_t count, const uint32_t *step, const uint32_t *idx, uint8_t *dst);

#endif
