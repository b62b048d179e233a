/* Several GPUs for one codec: one device state each (a codec of its own:
 * its gmtf_bwt_dev with contexts and streams on that device, its pinned
 * staging, its thread pool with its share of the workers, since a pool
 * takes one run at a time), and the dealing of a batch's blocks to them.
 * A batch that goes to the devices is cut into contiguous runs of blocks,
 * sized by each device's measured throughput (bytes per ms of its last
 * batches; equal shares at first), and the runs go through the
 * single-device batch path at once, one host thread a device. A device
 * that fails is retired alone (its run is redone on the CPU by its own
 * codec, as with one device); later batches are dealt to the devices left.
 * Frames depend on the block's bytes only, so the output is the same
 * whatever the devices. Internal to libgmtf (docs/gpu.md, "Several GPUs"). */
#ifndef GMTF_MULTI_DEV_H
#define GMTF_MULTI_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "bwt_dev.h"
#include "gmtf_codec.h"

#define GMTF_MULTI_DEV_MAX 16

/* The codec calls it makes on the device codecs, given by codec.c (this
 * file sits below codec.c and batch.c, which call it). */
typedef struct gmtf_multi_dev_calls {
    int (*create)(gmtf_codec **out, const gmtf_codec_options *o); /* no device */
    void (*set_dev)(gmtf_codec *c, const gmtf_bwt_dev_ops *ops, int device);
    void (*destroy)(gmtf_codec *c);
    int (*encode)(gmtf_codec *c, const uint8_t *src, const uint64_t *off, size_t count,
                  uint8_t *dst, uint64_t cap, uint64_t *dst_off, uint32_t *crc);
    int (*decode)(gmtf_codec *c, const uint8_t *src, const uint64_t *foff, size_t count,
                  uint8_t *dst, const uint64_t *doff, int *status);
    int (*prepare)(gmtf_codec *c, uint64_t batch_bytes, int encode);
} gmtf_multi_dev_calls;

typedef struct gmtf_multi_dev {
    gmtf_multi_dev_calls calls;
    unsigned n;                            /* devices */
    int device[GMTF_MULTI_DEV_MAX];        /* their numbers */
    gmtf_codec *sub[GMTF_MULTI_DEV_MAX];   /* one codec a device */
    double rate[2][GMTF_MULTI_DEV_MAX];    /* bytes/ms of its last batches, a direction; 0: none */
    uint64_t dealt[2][GMTF_MULTI_DEV_MAX]; /* bytes dealt to it so far, a direction */
    uint64_t batches;                      /* batches dealt */
} gmtf_multi_dev;

/* Parses a device list: "all", or device numbers 0..GMTF_MULTI_DEV_MAX-1
 * separated by commas or colons, no repeats, in the order given ("0,1", "1").
 * Fills dev[] and *n; 0 or -EINVAL. */
int gmtf_multi_dev_parse(const char *list, int *dev, unsigned *n, int *all);

/* Makes the device states: a codec for each of dev[0..n), n >= 2, with the
 * options o (threads: the share of each, at least 1) and ops as its BWT
 * device on that device number. 0 or a negative code. */
int gmtf_multi_dev_create(gmtf_multi_dev **out, const gmtf_multi_dev_calls *calls,
                          const gmtf_codec_options *o, const gmtf_bwt_dev_ops *ops, const int *dev,
                          unsigned n);
void gmtf_multi_dev_destroy(gmtf_multi_dev *m);

/* Devices still in service. */
unsigned gmtf_multi_dev_live(const gmtf_multi_dev *m);

/* The batch calls (arguments as gmtf_batch_encode_crc / gmtf_batch_decode,
 * already checked by the caller): 1 when the batch is not for the devices
 * (too small, version 1 frames, every device retired: the caller codes it
 * itself), else 0 or the first error in block order. */
int gmtf_multi_dev_encode(gmtf_multi_dev *m, const uint8_t *src, const uint64_t *off, size_t count,
                          uint8_t *dst, uint64_t *dst_off, uint32_t *crc);
int gmtf_multi_dev_decode(gmtf_multi_dev *m, const uint8_t *src, const uint64_t *foff, size_t count,
                          uint8_t *dst, const uint64_t *doff, int *status);

/* gmtf_codec_prepare for every device in service, each for its share. */
int gmtf_multi_dev_prepare(gmtf_multi_dev *m, uint64_t batch_bytes, int encode);

/* The cut of a batch of count blocks (offsets off, from off[0]) into runs
 * for the n weights w (> 0): run k is blocks [cut[k], cut[k+1]), cut[0] =
 * 0, cut[n] = count; run k gets about w[k] / sum(w) of the bytes. */
void gmtf_multi_dev_cut(const uint64_t *off, size_t count, const double *w, unsigned n,
                        size_t *cut);

#endif
