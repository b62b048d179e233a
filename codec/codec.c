/* The codec context (create, destroy, trim), single-frame calls, version
 * and error text. The batch API is in batch.c, the per-worker scratch in
 * workspace.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "gmtf_config.h"

const char *gmtf_version(void)
{
    return GMTF_VERSION;
}

const char *gmtf_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case GMTF_E_CORRUPT: return "corrupt frame";
    case GMTF_E_CHECKSUM: return "checksum mismatch";
    case GMTF_E_TRUNCATED: return "truncated frame";
    case GMTF_E_VERSION: return "frame from a newer format version";
    case GMTF_E_BACKEND: return "unknown or unavailable MTF backend";
    default: return err < 0 ? strerror(-err) : "unknown error";
    }
}

/* The codec's MTF instances: the per-block backend's, and the batch
 * backend's when that is another one (auto: simd per block, the GPU for
 * large batches). */
static int mtf_instances(gmtf_codec *c, const char *name, const gmtf_mtf_backend *mtf)
{
    int rc = gmtf_mtf_init(&c->mtf, mtf);
    if (rc < 0)
        return rc;
    const gmtf_mtf_backend *batch = gmtf_mtf_batch_backend(name, mtf);
    if (batch == mtf) {
        c->batch_mtf = &c->mtf;
    } else if (batch) {
        rc = gmtf_mtf_init(&c->batch_inst, batch);
        if (rc < 0)
            return rc;
        c->batch_mtf = &c->batch_inst;
    }
    return 0;
}

/* The codec and its devices: the list given (option, else GMTF_GPUS,
 * else all), less the devices the host lacks. */
static int codec_devices(gmtf_codec *c, const gmtf_codec_options *o, const gmtf_bwt_dev_ops *ops)
{
    const char *list = o->gpus ? o->gpus : getenv("GMTF_GPUS");
    int dev[GMTF_MULTI_DEV_MAX], all = 1;
    unsigned n = 0;
    if (list && *list && gmtf_multi_dev_parse(list, dev, &n, &all) < 0)
        return -EINVAL;
    if (!ops)
        return gmtf_codec_set_bwt_devs(c, NULL, NULL, 0);
    int have = gmtf_bwt_dev_gpu_count();
    unsigned keep = 0;
    if (all)
        for (int k = 0; k < have && k < GMTF_MULTI_DEV_MAX; k++)
            dev[keep++] = k;
    else
        for (unsigned k = 0; k < n; k++)
            if (dev[k] < have)
                dev[keep++] = dev[k];
    return gmtf_codec_set_bwt_devs(c, ops, dev, keep);
}

int gmtf_codec_create(gmtf_codec **out, const gmtf_codec_options *opt)
{
    gmtf_codec *c = NULL;
    int rc = gmtf_codec_create_bare(&c, opt);
    if (rc < 0)
        return rc;
    /* The GPU's BWT when batches go to the GPU (the gpu and auto backends:
     * a batch backend named gpu*; simd and scalar have batch hooks too but
     * stay on the CPU); GMTF_GPU_BWT=0 keeps it off (comparisons). */
    const char *env = getenv("GMTF_GPU_BWT");
    int use_dev =
        c->batch_mtf && strncmp(c->batch_mtf->ops->name, "gpu", 3) == 0 && !(env && *env == '0');
    gmtf_codec_options o = {0};
    if (opt)
        o = *opt;
    o.threads = c->threads;
    o.max_block = c->max_block;
    o.frame_version = c->frame_version;
    rc = codec_devices(c, &o, use_dev ? gmtf_bwt_dev_gpu() : NULL);
    if (rc < 0) {
        gmtf_codec_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

int gmtf_codec_create_bare(gmtf_codec **out, const gmtf_codec_options *opt)
{
    gmtf_codec_options o = {0};
    if (opt)
        o = *opt;
    if (o.threads == 0)
        o.threads = 1;
    if (o.threads > 1024 || o.max_block > GMTF_BLOCK_MAX || o.frame_version > GMTF_FRAME_VERSION)
        return -EINVAL;
    if (o.max_block == 0)
        o.max_block = GMTF_BLOCK_MAX;
    const gmtf_mtf_backend *mtf = gmtf_mtf_backend_find(o.mtf);
    if (!mtf)
        return GMTF_E_BACKEND;
    gmtf_codec *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->max_block = o.max_block;
    c->threads = o.threads;
    if (o.mtf)
        snprintf(c->mtf_name, sizeof c->mtf_name, "%s", o.mtf);
    c->frame_version = o.frame_version ? o.frame_version : GMTF_FRAME_VERSION;
    int rc = mtf_instances(c, o.mtf, mtf);
    if (rc == 0) {
        c->ws = calloc(o.threads, sizeof *c->ws);
        rc = c->ws ? 0 : -ENOMEM;
    }
    if (rc == 0 && o.threads > 1)
        rc = gmtf_pool_create(&c->pool, o.threads);
    gmtf_bwt_dev_init(&c->bwt_dev, NULL);
    if (rc < 0) {
        gmtf_codec_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

void gmtf_codec_destroy(gmtf_codec *c)
{
    if (!c)
        return;
    gmtf_multi_dev_destroy(c->multi);
    gmtf_pool_destroy(c->pool);
    if (c->ws)
        for (unsigned i = 0; i < c->threads; i++)
            gmtf_workspace_free(&c->ws[i]);
    free(c->ws);
    gmtf_batch_stage_free(c);
    gmtf_bwt_dev_free(&c->bwt_dev);
    gmtf_mtf_free(&c->batch_inst);
    gmtf_mtf_free(&c->mtf);
    free(c);
}

void gmtf_codec_set_bwt_dev(gmtf_codec *c, const gmtf_bwt_dev_ops *ops)
{
    gmtf_codec_set_bwt_dev_on(c, ops, 0);
}

void gmtf_codec_set_bwt_dev_on(gmtf_codec *c, const gmtf_bwt_dev_ops *ops, int device)
{
    gmtf_multi_dev_destroy(c->multi);
    c->multi = NULL;
    gmtf_bwt_dev_free(&c->bwt_dev);
    gmtf_bwt_dev_init_on(&c->bwt_dev, ops, device);
}

int gmtf_codec_set_bwt_devs(gmtf_codec *c, const gmtf_bwt_dev_ops *ops, const int *dev, unsigned n)
{
    if (!ops || n == 0) {
        gmtf_codec_set_bwt_dev_on(c, NULL, 0);
        return 0;
    }
    if (n == 1) {
        gmtf_codec_set_bwt_dev_on(c, ops, dev[0]);
        return 0;
    }
    gmtf_codec_set_bwt_dev_on(c, NULL, 0);
    gmtf_codec_options o = {.threads = c->threads,
                            .mtf = c->mtf_name[0] ? c->mtf_name : NULL,
                            .max_block = c->max_block,
                            .frame_version = c->frame_version};
    static const gmtf_multi_dev_calls calls = {
        .create = gmtf_codec_create_bare,
        .set_dev = gmtf_codec_set_bwt_dev_on,
        .destroy = gmtf_codec_destroy,
        .encode = gmtf_batch_encode_crc,
        .decode = gmtf_batch_decode,
        .prepare = gmtf_codec_prepare,
    };
    return gmtf_multi_dev_create(&c->multi, &calls, &o, ops, dev, n);
}

gmtf_bwt_dev *gmtf_codec_bwt_dev(gmtf_codec *c)
{
    return &c->bwt_dev;
}

const char *gmtf_codec_mtf_name(const gmtf_codec *c)
{
    return c->mtf.ops->name;
}

unsigned gmtf_codec_threads(const gmtf_codec *c)
{
    return c->threads;
}

int gmtf_codec_batch_device(const gmtf_codec *c)
{
    return c->bwt_dev.ops != NULL && !c->bwt_dev.retired;
}

void gmtf_codec_trim(gmtf_codec *c)
{
    for (unsigned i = 0; i < c->threads; i++)
        gmtf_workspace_trim(&c->ws[i]);
    for (unsigned k = 0; c->multi && k < c->multi->n; k++)
        gmtf_codec_trim(c->multi->sub[k]);
}

long gmtf_frame_encode(gmtf_codec *c, const void *src, size_t n, void *dst, size_t cap)
{
    gmtf_codec_need(c, n);
    gmtf_workspace *w = gmtf_codec_workspace_enc(c, 0);
    gmtf_codec_need(c, 0);
    if (!w)
        return -ENOMEM;
    return gmtf_frame_encode_ws(&c->mtf, w, src, n, dst, cap, c->frame_version, NULL);
}

long gmtf_frame_decode(gmtf_codec *c, const void *src, size_t len, void *dst, size_t cap)
{
    gmtf_codec_need(c, cap);
    gmtf_workspace *w = gmtf_codec_workspace(c, 0);
    gmtf_codec_need(c, 0);
    if (!w)
        return -ENOMEM;
    return gmtf_frame_decode_ws(&c->mtf, w, src, len, dst, cap);
}

long gmtf_frame_decode_range(gmtf_codec *c, const void *src, size_t len, size_t off, size_t cnt,
                             void *dst)
{
    gmtf_workspace *w = gmtf_codec_workspace_range(c, 0);
    if (!w)
        return -ENOMEM;
    return gmtf_frame_decode_range_ws(&c->mtf, w, src, len, off, cnt, dst);
}
