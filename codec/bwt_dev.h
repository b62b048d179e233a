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

#include <stddef.h>
#include <stdint.h>

#include "gpu_lanes.h"

/* The calls of gpu_bwt.h / gpu_ibwt.h that the codec uses (same meaning). */
typedef struct gmtf_bwt_dev_ops {
    const char *name;
    int (*fwd_create)(void **ctx);
    void (*fwd_destroy)(void *ctx);
    int (*fwd)(void *ctx, const uint8_t *src, const uint64_t *off, size_t count,
               const uint32_t *step, uint8_t *dst, uint32_t *idx);
    int (*inv_create)(void **ctx);
    void (*inv_destroy)(void *ctx);
    int (*inv)(void *ctx, const uint8_t *bwt, const uint64_t *off, size_t count,
               const uint32_t *step, const uint32_t *idx, uint8_t *dst);
    /* Optional (gpu_lanes.h): method 2's lanes decoded on the device. */
    int (*lanes_create)(void **ctx);
    void (*lanes_destroy)(void *ctx);
    int (*lanes)(void *ctx, const uint8_t *in, uint64_t nin, size_t count,
                 const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                 const uint64_t *out_off, uint8_t *out, uint8_t *bad);
} gmtf_bwt_dev_ops;

enum { GMTF_BWT_DEV_FWD, GMTF_BWT_DEV_INV, GMTF_BWT_DEV_LANES };
#define GMTF_BWT_DEV_PIPE_MAX 16

typedef struct gmtf_bwt_dev {
    const gmtf_bwt_dev_ops *ops; /* NULL: no device */
    void *ctx[3];                /* forward, inverse, lanes; NULL until first used */
    int use_lanes;               /* decode method 2 on the device (ops->lanes) */
    int retired;                 /* a call failed: no more device calls */
    int last_err;                /* the error that retired it */
    uint64_t min_bytes[2];       /* smallest batch (bytes) each direction sends */
    long fault_at;               /* tests: device call number fault_at fails (-EIO) */
    long calls;                  /* device calls so far */
    uint64_t blocks[3];          /* blocks each direction did on the device */
    uint64_t ns[3];              /* wall time of each direction's device calls */
    unsigned pipe[2];            /* most chunks a batch is cut into, each direction */
    uint64_t chunk_min;          /* fewest bytes a chunk holds */
} gmtf_bwt_dev;

/* The GPU's ops, or NULL in a build without CUDA. */
const gmtf_bwt_dev_ops *gmtf_bwt_dev_gpu(void);

/* Sets up d for ops (NULL: no device). Environment, read here:
 * GMTF_GPU_BWT_MIN / GMTF_GPU_IBWT_MIN (smallest batch in bytes sent to
 * the device, each direction), GMTF_GPU_PIPE / GMTF_GPU_IPIPE (most
 * chunks a batch is cut into, 1..GMTF_BWT_DEV_PIPE_MAX; a chunk holds
 * GMTF_GPU_CHUNK_MIN bytes or more), GMTF_GPU_FAULT=N (device call N, from 1,
 * fails as a device error would: the fault-injection hook). */
void gmtf_bwt_dev_init(gmtf_bwt_dev *d, const gmtf_bwt_dev_ops *ops);
void gmtf_bwt_dev_free(gmtf_bwt_dev *d);

/* 1 when a batch of that many bytes goes to the device in that direction. */
int gmtf_bwt_dev_wants(const gmtf_bwt_dev *d, int dir, uint64_t bytes);

/* The device calls: 0, or a negative code; on a device error (anything
 * but -EINVAL / -EUCLEAN, which the input caused) the device is retired. */
int gmtf_bwt_dev_forward(gmtf_bwt_dev *d, const uint8_t *src, const uint64_t *off, size_t count,
                         const uint32_t *step, uint8_t *dst, uint32_t *idx);
int gmtf_bwt_dev_inverse(gmtf_bwt_dev *d, const uint8_t *bwt, const uint64_t *off, size_t count,
                         const uint32_t *step, const uint32_t *idx, uint8_t *dst);
int gmtf_bwt_dev_lanes(gmtf_bwt_dev *d, const uint8_t *in, uint64_t nin, size_t count,
                       const gmtf_gpu_lane *lanes, const uint16_t *cum, const uint8_t *sel,
                       const uint64_t *out_off, uint8_t *out, uint8_t *bad);

#endif
