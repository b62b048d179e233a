/* The codec context, shared by codec.c (life cycle, single frames),
 * batch.c (the batch API) and workspace.c (per-worker scratch). Not
 * installed. */
#ifndef GMTF_CODEC_INTERNAL_H
#define GMTF_CODEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bwt_dev.h"
#include "frame.h"
#include "gmtf_codec.h"
#include "mtf.h"
#include "multi_dev.h"
#include "threadpool.h"

/* A host buffer of the batch path, grown, never shrunk: pinned (from the
 * batch backend's allocator) when there is one, else malloc (batch.c). */
struct gmtf_hbuf {
    void *p;
    uint64_t cap;
    int pinned;
};

struct gmtf_codec {
    gmtf_mtf mtf;        /* per-block MTF instance */
    gmtf_mtf batch_inst; /* the batch backend's instance when it is another one */
    gmtf_mtf *batch_mtf; /* batch hooks (GPU): &mtf, &batch_inst or NULL when none */
    uint32_t max_block;
    uint32_t need; /* the largest block of the call under way, 0: max_block (workspace.c) */
    unsigned threads;
    unsigned frame_version; /* written by encoders: 1 or 2 */
    gmtf_pool *pool;        /* NULL when threads == 1 */
    gmtf_workspace *ws;     /* one per thread, allocated lazily */
    /* Staging buffers for batch MTF backends (grown, never shrunk; batch.c). */
    uint8_t *stage_a, *stage_b;
    uint64_t stage_cap;
    int stage_pinned; /* staging came from gmtf_mtf_host_alloc(batch_mtf) */
    /* The batch BWT device (the GPU) for version 2 frames, and the sample
     * rows of a batch it transforms (from the same allocator as staging). */
    gmtf_bwt_dev bwt_dev;
    uint32_t *stage_idx;
    uint64_t stage_idx_cap;
    int stage_idx_pinned;
    /* Method 2 decoded on the device: the lanes, tables and selectors of a
     * batch's blocks and a copy of their payloads, for the uploads. */
    struct gmtf_hbuf dec_lanes, dec_cum, dec_sel, dec_in;
    /* Two devices or more: their states (bwt_dev is then unused), made
     * with the MTF backend name the codec was made with ("" = auto), so
     * that theirs has the same batch backend (its pinned allocator). */
    gmtf_multi_dev *multi;
    char mtf_name[64];
    /* Encoding ahead (gmtf_codec_set_next; batch.c): the caller's next-batch
     * hook, the encode's own staging sets ([set][0]: input, [1]: BWT
     * output, [2]: sample rows; set 1 for the batches that run ahead, set 0
     * when the encode's staging is not pinned: GMTF_ENC_PIN; set 2 when
     * a batch runs two ahead), the set the next batch started takes, the
     * batch started ahead, if any, and the one after it (two ahead). */
    gmtf_batch_next_fn next_fn;
    void *next_arg;
    struct gmtf_hbuf enc_st[3][3];
    unsigned enc_set;
    struct enc_ahead *ahead, *ahead2;
    int enc_pageable; /* gmtf_codec_set_pageable */
};

/* Lazily allocates workspace i, for decoding (gmtf_codec_workspace) or
 * for encoding too (gmtf_codec_workspace_enc). Returns NULL on -ENOMEM.
 * (workspace.c) */
gmtf_workspace *gmtf_codec_workspace(gmtf_codec *c, unsigned i);
gmtf_workspace *gmtf_codec_workspace_enc(gmtf_codec *c, unsigned i);
/* As gmtf_codec_workspace, keeping the workspace's range state. */
gmtf_workspace *gmtf_codec_workspace_range(gmtf_codec *c, unsigned i);
/* The largest block the call under way encodes or decodes (0: max_block):
 * workspaces taken until it is set again are sized for it. (workspace.c) */
void gmtf_codec_need(gmtf_codec *c, uint64_t n);

/* Frees the batch staging buffers (batch.c). */
void gmtf_batch_stage_free(gmtf_codec *c);

/* Test hooks (codec.c): puts ops in place of the codec's batch BWT device
 * (the CPU emulations of the GPU kernels; NULL: none), and the device's
 * state (its size rule, fault hook and counters). */
void gmtf_codec_set_bwt_dev(gmtf_codec *c, const gmtf_bwt_dev_ops *ops);
gmtf_bwt_dev *gmtf_codec_bwt_dev(gmtf_codec *c);
/* The same with the device number (multi_dev.c's device codecs). */
void gmtf_codec_set_bwt_dev_on(gmtf_codec *c, const gmtf_bwt_dev_ops *ops, int device);
/* Test hook: ops as devices dev[0..n) (n >= 2: multi_dev.h; 1: one; 0:
 * none), as the codec does for GPUs. 0 or a negative code. */
int gmtf_codec_set_bwt_devs(gmtf_codec *c, const gmtf_bwt_dev_ops *ops, const int *dev, unsigned n);
/* The codec without devices (multi_dev.c's device codecs). */
int gmtf_codec_create_bare(gmtf_codec **out, const gmtf_codec_options *opt);

#endif
