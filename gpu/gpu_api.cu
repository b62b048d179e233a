/* The C API of gpu.h: device probe, contexts, batch geometry, the launch
 * sequence, and host-to-host batches pipelined over streams. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gpu_internal.cuh"

/* ---- probe -------------------------------------------------------------- */

static int probe_result = -1;

/* Usable devices: 0, 1, ... up to the first one below compute capability
 * 7.0 (so that device numbers are CUDA's). */
static int probe(void)
{
    int n = 0, ok = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess)
        for (; ok < n; ok++) {
            cudaDeviceProp p;
            if (cudaGetDeviceProperties(&p, ok) != cudaSuccess || p.major < 7)
                break;
        }
    cudaGetLastError(); /* clear the error of a failed probe */
    return ok;
}

extern "C" int gmtf_gpu_device_count(void)
{
    /* Racy first call is harmless: every caller computes the same value. */
    if (probe_result < 0)
        probe_result = probe();
    return probe_result;
}

extern "C" int gmtf_gpu_available(void)
{
    return gmtf_gpu_device_count() > 0;
}

extern "C" int gmtf_gpu_device_info(char *name, size_t len, int *sm_count)
{
    if (!gmtf_gpu_available())
        return -ENODEV;
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        cudaGetLastError();
        return -ENODEV;
    }
    if (name && len) {
        strncpy(name, p.name, len - 1);
        name[len - 1] = 0;
    }
    if (sm_count)
        *sm_count = p.multiProcessorCount;
    return 0;
}

int gmtf_gpu_use(gmtf_gpu_ctx *ctx)
{
    cudaError_t e = cudaSetDevice(ctx->device);
    return e == cudaSuccess ? 0 : gmtf_gpu_fail(ctx, e, "cudaSetDevice");
}

/* ---- variants ----------------------------------------------------------- */

extern "C" size_t gmtf_gpu_variant_count(void)
{
    return gmtf_variant_total;
}

extern "C" const char *gmtf_gpu_variant_name(size_t i)
{
    return i < gmtf_variant_total ? gmtf_variants[i].name : NULL;
}

extern "C" int gmtf_gpu_variant_find(const char *name)
{
    if (!name)
        return -EINVAL;
    for (size_t i = 0; i < gmtf_variant_total; i++)
        if (strcmp(gmtf_variants[i].name, name) == 0)
            return (int)i;
    return -EINVAL;
}

extern "C" unsigned gmtf_gpu_variant_flags(size_t i)
{
    return i < gmtf_variant_total ? gmtf_variants[i].flags : 0;
}

extern "C" unsigned gmtf_gpu_variant_depth(size_t i)
{
    return i < gmtf_variant_total ? gmtf_variants[i].depth : 0;
}

/* The default (variant < 0): the first entry of the table that has the
 * operation ("16+full" encodes, "8+full" decodes; docs/gpu.md). */
static int resolve_variant(int v, int decode, uint64_t n)
{
    (void)n; /* one default fits 16 MiB to 256 MiB batches (docs/gpu.md) */
    unsigned need = decode ? GMTF_GPU_DECODE : GMTF_GPU_ENCODE;
    if (v < 0) {
        for (size_t i = 0; i < gmtf_variant_total; i++)
            if (gmtf_variants[i].flags & need)
                return (int)i;
        return -EINVAL;
    }
    if ((size_t)v >= gmtf_variant_total || !(gmtf_variants[v].flags & need))
        return -EINVAL;
    return v;
}

/* ---- context ------------------------------------------------------------ */

int gmtf_gpu_fail(gmtf_gpu_ctx *ctx, cudaError_t e, const char *what)
{
    snprintf(ctx->err, sizeof ctx->err, "%s: %s", what, cudaGetErrorString(e));
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return -ENOMEM;
    }
    /* Sticky errors (a kernel fault) poison the CUDA context for good. */
    if (cudaDeviceSynchronize() != cudaSuccess)
        ctx->ok = 0;
    cudaGetLastError();
    return -EIO;
}

#define CK(ctx, call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return gmtf_gpu_fail((ctx), e_, #call);                                                \
    } while (0)

int gmtf_dbuf_reserve(gmtf_gpu_ctx *ctx, gmtf_dbuf *b, size_t bytes)
{
    if (bytes <= b->cap)
        return 0;
    cudaError_t e = gmtf_dev_regrow(&b->p, &b->cap, bytes);
    return e == cudaSuccess ? 0 : gmtf_gpu_fail(ctx, e, "cudaMalloc");
}

static int host_reserve(uint8_t **p, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return 0;
    if (*p)
        cudaFreeHost(*p);
    *p = NULL;
    *cap = 0;
    size_t want = bytes + bytes / 8;
    if (cudaHostAlloc((void **)p, want, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return -ENOMEM;
    }
    *cap = want;
    return 0;
}

extern "C" int gmtf_gpu_ctx_create(gmtf_gpu_ctx **out)
{
    return gmtf_gpu_ctx_create_on(0, out);
}

extern "C" int gmtf_gpu_ctx_create_on(int dev, gmtf_gpu_ctx **out)
{
    *out = NULL;
    if (dev < 0 || dev >= gmtf_gpu_device_count())
        return -ENODEV;
    gmtf_gpu_ctx *ctx = (gmtf_gpu_ctx *)calloc(1, sizeof *ctx);
    if (!ctx)
        return -ENOMEM;
    ctx->ok = 1;
    ctx->device = dev;
    bool fail = cudaSetDevice(dev) != cudaSuccess;
    for (int i = 0; i < GMTF_NSTREAMS && !fail; i++)
        fail = cudaStreamCreateWithFlags(&ctx->st[i], cudaStreamNonBlocking) != cudaSuccess;
    fail = fail || cudaEventCreate(&ctx->ev0) != cudaSuccess ||
           cudaEventCreate(&ctx->ev1) != cudaSuccess ||
           cudaEventCreateWithFlags(&ctx->ev_tab, cudaEventDisableTiming) != cudaSuccess;
    for (int i = 0; i < 64 && !fail; i++)
        fail = cudaEventCreateWithFlags(&ctx->ev_slice[i], cudaEventDisableTiming) != cudaSuccess;
    if (fail) {
        cudaGetLastError();
        gmtf_gpu_ctx_destroy(ctx);
        return -ENODEV;
    }
    *out = ctx;
    return 0;
}

extern "C" void gmtf_gpu_ctx_destroy(gmtf_gpu_ctx *ctx)
{
    if (!ctx)
        return;
    cudaSetDevice(ctx->device);
    gmtf_dbuf *bufs[] = {&ctx->in,       &ctx->out,    &ctx->off,     &ctx->ckscan,   &ctx->grscan,
                         &ctx->ck_start, &ctx->ck_len, &ctx->ck_kidx, &ctx->gr_first, &ctx->gr_cnt,
                         &ctx->keys,     &ctx->gmax,   &ctx->qin,     &ctx->esc,      &ctx->esc_cnt,
                         &ctx->ks_a,     &ctx->ks_b,   &ctx->ks_misc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->p)
            cudaFree(bufs[i]->p);
    for (int i = 0; i < GMTF_NSTREAMS; i++)
        if (ctx->st[i])
            cudaStreamDestroy(ctx->st[i]);
    if (ctx->ev0)
        cudaEventDestroy(ctx->ev0);
    if (ctx->ev1)
        cudaEventDestroy(ctx->ev1);
    if (ctx->ev_tab)
        cudaEventDestroy(ctx->ev_tab);
    for (int i = 0; i < 64; i++)
        if (ctx->ev_slice[i])
            cudaEventDestroy(ctx->ev_slice[i]);
    if (ctx->h_in)
        cudaFreeHost(ctx->h_in);
    if (ctx->h_out)
        cudaFreeHost(ctx->h_out);
    free(ctx->h_off);
    free(ctx->h_ckscan);
    free(ctx->h_grscan);
    free(ctx);
}

extern "C" int gmtf_gpu_ctx_ok(const gmtf_gpu_ctx *ctx)
{
    return ctx && ctx->ok;
}

extern "C" const char *gmtf_gpu_ctx_error(const gmtf_gpu_ctx *ctx)
{
    return ctx ? ctx->err : "no context";
}

extern "C" int gmtf_gpu_set_chunk(gmtf_gpu_ctx *ctx, uint32_t chunk)
{
    if (chunk && (chunk < 256 || chunk > 65536 || (chunk & (chunk - 1))))
        return -EINVAL;
    ctx->chunk_override = chunk;
    return 0;
}

/* Pinned host memory from REG_MIN bytes: allocated in 2 MiB pages
 * (MADV_HUGEPAGE), touched, then page-locked with cudaHostRegister, rather
 * than by cudaHostAlloc. On the H100 host (gVisor, driver 580; docs/gpu.md,
 * pipe11) cudaHostAlloc took 125-227 ms for 256 MiB and cudaFreeHost 41 ms
 * (and the exit as much again for what is left), while registering 256
 * MiB of touched 2 MiB pages took 7.9 ms and unregistering 5.2; both copy
 * at 55 GB/s. The registered blocks are listed (a short list: staging
 * buffers) so that gmtf_gpu_host_free knows how each was made.
 * GMTF_GPU_HOST_REG=0: cudaHostAlloc for every size (measurements). */
#define REG_MIN ((size_t)1 << 20)
#define REG_PAGE ((size_t)2 << 20)

struct reg_block {
    void *p;
    struct reg_block *next;
};
static struct reg_block *reg_list;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;

static int reg_on(void)
{
    const char *e = getenv("GMTF_GPU_HOST_REG");
    return !(e && *e == '0' && !e[1]);
}

static void *host_register(size_t size)
{
    size_t n = (size + REG_PAGE - 1) & ~(REG_PAGE - 1);
    struct reg_block *b = (struct reg_block *)malloc(sizeof *b);
    void *p = NULL;
    if (!b || posix_memalign(&p, REG_PAGE, n) != 0) {
        free(b);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n, MADV_HUGEPAGE); /* advice: plain pages if refused */
#endif
    const char *t = getenv("GMTF_GPU_HOST_REG_TOUCH"); /* 0: the driver's faults (measurements) */
    if (!(t && *t == '0'))
        memset(p, 0, n); /* the pages exist before the driver locks them */
    if (cudaHostRegister(p, n, cudaHostRegisterPortable) != cudaSuccess) {
        cudaGetLastError();
        free(p);
        free(b);
        return NULL;
    }
    b->p = p;
    pthread_mutex_lock(&reg_mu);
    b->next = reg_list;
    reg_list = b;
    pthread_mutex_unlock(&reg_mu);
    return p;
}

/* 1 when p was registered (and is now unregistered and freed). */
static int host_unregister(void *p)
{
    struct reg_block *b = NULL;
    pthread_mutex_lock(&reg_mu);
    for (struct reg_block **q = &reg_list; *q; q = &(*q)->next)
        if ((*q)->p == p) {
            b = *q;
            *q = b->next;
            break;
        }
    pthread_mutex_unlock(&reg_mu);
    if (!b)
        return 0;
    cudaHostUnregister(p);
    cudaGetLastError();
    free(p);
    free(b);
    return 1;
}

extern "C" void *gmtf_gpu_host_alloc(size_t size)
{
    void *p = NULL;
    if (!gmtf_gpu_available())
        return NULL;
    if (size >= REG_MIN && reg_on() && (p = host_register(size)) != NULL)
        return p;
    if (cudaHostAlloc(&p, size ? size : 1, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void gmtf_gpu_host_free(void *p)
{
    if (p && !host_unregister(p))
        cudaFreeHost(p);
}

/* ---- geometry ----------------------------------------------------------- */

/* Device input/output keep 256 bytes before and after the data, so the
 * chunk grid (multiples of the chunk size from the data start) is 256-byte
 * aligned and aligned 16-byte windows never leave the allocation. */
#define PAD 256

static uint32_t chunk_for(const gmtf_gpu_ctx *ctx, uint64_t n, uint32_t want_chunks,
                          uint32_t max_chunk, uint64_t max_block)
{
    uint32_t c = ctx->chunk_override;
    if (!c) {
        /* H100 sweep (docs/gpu.md): enough chunks to fill the GPU, but not
         * below 512 bytes, where the per-chunk queue work dominates */
        c = 8192;
        while (c > 512 && n / c < want_chunks)
            c >>= 1;
    }
    if (max_chunk && c > max_chunk)
        c = max_chunk;
    /* chunk index in block and position in chunk are 16-bit fields */
    while (c < 65536 && max_block / c + 2 >= 65535)
        c <<= 1;
    return c;
}

static int set_geometry(gmtf_gpu_ctx *ctx, const uint64_t *off, size_t count, uint32_t want_chunks,
                        uint32_t max_chunk)
{
    if (count + 1 > ctx->h_cap) {
        size_t cap = count + 1 + (count + 1) / 4 + 16;
        uint64_t *a = (uint64_t *)realloc(ctx->h_off, cap * sizeof *a);
        if (a)
            ctx->h_off = a;
        uint32_t *b = (uint32_t *)realloc(ctx->h_ckscan, cap * sizeof *b);
        if (b)
            ctx->h_ckscan = b;
        uint32_t *g = (uint32_t *)realloc(ctx->h_grscan, cap * sizeof *g);
        if (g)
            ctx->h_grscan = g;
        if (!a || !b || !g)
            return -ENOMEM;
        ctx->h_cap = cap;
    }
    uint64_t base = off[0], max_block = 0;
    for (size_t i = 0; i < count; i++) {
        if (off[i + 1] < off[i])
            return -EINVAL;
        max_block = max_block > off[i + 1] - off[i] ? max_block : off[i + 1] - off[i];
    }
    uint64_t n = off[count] - base;
    if (max_block >= 65535ull * 65536ull)
        return -EINVAL;
    uint32_t C = chunk_for(ctx, n, want_chunks, max_chunk, max_block);
    uint64_t nck = 0, ngr = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t s = off[i] - base, e = off[i + 1] - base;
        ctx->h_off[i] = s;
        ctx->h_ckscan[i] = (uint32_t)nck;
        ctx->h_grscan[i] = (uint32_t)ngr;
        uint64_t k = e > s ? (e - 1) / C - s / C + 1 : 0;
        nck += k;
        ngr += (k + GMTF_GROUP - 1) / GMTF_GROUP;
    }
    ctx->h_off[count] = n;
    ctx->h_ckscan[count] = (uint32_t)nck;
    ctx->h_grscan[count] = (uint32_t)ngr;
    if (nck >= 0xffffffffull)
        return -EINVAL;
    int rc;
    if ((rc = gmtf_dbuf_reserve(ctx, &ctx->in, n + 2 * PAD)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->out, n + 2 * PAD)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->off, (count + 1) * 8)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->ckscan, (count + 1) * 4)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->grscan, (count + 1) * 4)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->ck_start, nck * 8 + 8)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->ck_len, nck * 4 + 4)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->ck_kidx, nck * 4 + 4)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->gr_first, ngr * 4 + 4)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->gr_cnt, ngr * 4 + 4)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->keys, nck * 1024 + 16)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->gmax, ngr * 1024 + 16)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->qin, nck * 256 + 16)) ||
        (rc = gmtf_dbuf_reserve(ctx, &ctx->esc_cnt, nck * 4 + 4)))
        return rc;
    ctx->count = count;
    ctx->n = n;
    gmtf_batch_dev *d = &ctx->dev;
    d->in = (const uint8_t *)ctx->in.p + PAD;
    d->out = (uint8_t *)ctx->out.p + PAD;
    d->off = (const uint64_t *)ctx->off.p;
    d->ckscan = (const uint32_t *)ctx->ckscan.p;
    d->grscan = (const uint32_t *)ctx->grscan.p;
    d->ck_start = (uint64_t *)ctx->ck_start.p;
    d->ck_len = (uint32_t *)ctx->ck_len.p;
    d->ck_kidx = (uint32_t *)ctx->ck_kidx.p;
    d->gr_first = (uint32_t *)ctx->gr_first.p;
    d->gr_cnt = (uint32_t *)ctx->gr_cnt.p;
    d->keys = (uint32_t *)ctx->keys.p;
    d->gmax = (uint32_t *)ctx->gmax.p;
    d->qin = (uint8_t *)ctx->qin.p;
    d->esc = (uint32_t *)ctx->esc.p;
    d->esc_cnt = (uint32_t *)ctx->esc_cnt.p;
    d->chunk = C;
    d->count = count;
    d->nck = nck;
    d->ngr = ngr;
    return 0;
}

/* Escape records (and decode tokens) exist only for multi-pass variants:
 * per bytes a chunk can hold, as many bytes as the variant says. */
static int reserve_records(gmtf_gpu_ctx *ctx, uint32_t per_byte)
{
    if (!per_byte || !ctx->dev.nck)
        return 0;
    int rc =
        gmtf_dbuf_reserve(ctx, &ctx->esc, ctx->dev.nck * (size_t)ctx->dev.chunk * per_byte + 16);
    ctx->dev.esc = (uint32_t *)ctx->esc.p;
    return rc;
}

static int upload_tables(gmtf_gpu_ctx *ctx, cudaStream_t s)
{
    size_t count = ctx->count;
    CK(ctx, cudaMemcpyAsync(ctx->off.p, ctx->h_off, (count + 1) * 8, cudaMemcpyHostToDevice, s));
    CK(ctx,
       cudaMemcpyAsync(ctx->ckscan.p, ctx->h_ckscan, (count + 1) * 4, cudaMemcpyHostToDevice, s));
    CK(ctx,
       cudaMemcpyAsync(ctx->grscan.p, ctx->h_grscan, (count + 1) * 4, cudaMemcpyHostToDevice, s));
    gmtf_launch_chunk_table(&ctx->dev, s);
    return 0;
}

static void launch_range(gmtf_gpu_ctx *ctx, const gmtf_variant *v, int decode, const gmtf_range *r,
                         cudaStream_t s)
{
    if (decode) {
        v->decode(&ctx->dev, r, s);
        gmtf_launch_decode_finish(&ctx->dev, r, s, v->decode_map);
    } else {
        gmtf_launch_inbound_queues(&ctx->dev, r, s);
        v->encode(&ctx->dev, r, s);
    }
}

static gmtf_range whole_range(const gmtf_gpu_ctx *ctx)
{
    gmtf_range r = {0, ctx->count, 0, ctx->dev.nck, 0, ctx->dev.ngr};
    return r;
}

static int prepare(gmtf_gpu_ctx *ctx, int variant, int decode, const uint64_t *off, size_t count,
                   int sliced, const gmtf_variant **vout)
{
    if (!ctx || !ctx->ok)
        return -ENODEV;
    if (count && !off)
        return -EINVAL;
    int v = resolve_variant(variant, decode, count ? off[count] - off[0] : 0);
    if (v < 0)
        return -EINVAL;
    const gmtf_variant *var = &gmtf_variants[v];
    /* sliced: the batch runs in slices of about n / 8 on 3 streams while
     * transfers overlap, so only part of it is in the kernels at once:
     * ask for twice the chunks (smaller ones) to keep the GPU filled */
    int rc = set_geometry(ctx, off, count, sliced ? var->want_chunks * 2 : var->want_chunks,
                          var->max_chunk);
    if (!rc)
        rc = reserve_records(ctx, var->scratch_per_byte);
    *vout = var;
    return rc;
}

/* ---- staged use --------------------------------------------------------- */

extern "C" int gmtf_gpu_stage_upload(gmtf_gpu_ctx *ctx, const uint8_t *src, const uint64_t *off,
                                     size_t count)
{
    if (!ctx || !ctx->ok)
        return -ENODEV;
    if (gmtf_gpu_use(ctx))
        return -EIO;
    if (count && !off)
        return -EINVAL;
    /* geometry is set per run (the chunk size depends on the variant) */
    int rc = set_geometry(ctx, off, count, 65536, 0);
    if (rc)
        return rc;
    /* on our stream: a pageable cudaMemcpy may return before its DMA lands,
     * and non-blocking streams do not wait for the legacy stream */
    if (ctx->n) {
        CK(ctx, cudaMemcpyAsync((uint8_t *)ctx->in.p + PAD, src + off[0], ctx->n,
                                cudaMemcpyHostToDevice, ctx->st[0]));
        CK(ctx, cudaStreamSynchronize(ctx->st[0]));
    }
    ctx->staged = 1;
    return 0;
}

extern "C" int gmtf_gpu_stage_run(gmtf_gpu_ctx *ctx, int variant, int decode, double *kernel_ms)
{
    if (!ctx || !ctx->ok || !ctx->staged)
        return -ENODEV;
    if (gmtf_gpu_use(ctx))
        return -EIO;
    int v = resolve_variant(variant, decode, ctx->n);
    if (v < 0)
        return -EINVAL;
    const gmtf_variant *var = &gmtf_variants[v];
    /* the relative offsets of the staged batch are in h_off */
    size_t count = ctx->count;
    uint64_t *off = (uint64_t *)malloc((count + 1) * sizeof *off);
    if (!off)
        return -ENOMEM;
    memcpy(off, ctx->h_off, (count + 1) * sizeof *off);
    int rc = set_geometry(ctx, off, count, var->want_chunks, var->max_chunk);
    free(off);
    if (!rc)
        rc = reserve_records(ctx, var->scratch_per_byte);
    if (rc)
        return rc;
    cudaStream_t s = ctx->st[0];
    CK(ctx, cudaEventRecord(ctx->ev0, s));
    if ((rc = upload_tables(ctx, s)))
        return rc;
    gmtf_range r = whole_range(ctx);
    launch_range(ctx, var, decode, &r, s);
    CK(ctx, cudaGetLastError());
    CK(ctx, cudaEventRecord(ctx->ev1, s));
    CK(ctx, cudaEventSynchronize(ctx->ev1));
    if (kernel_ms) {
        float ms = 0;
        CK(ctx, cudaEventElapsedTime(&ms, ctx->ev0, ctx->ev1));
        *kernel_ms = ms;
    }
    return 0;
}

extern "C" int gmtf_gpu_stage_swap(gmtf_gpu_ctx *ctx)
{
    if (!ctx || !ctx->ok || !ctx->staged)
        return -ENODEV;
    gmtf_dbuf t = ctx->in;
    ctx->in = ctx->out;
    ctx->out = t;
    ctx->dev.in = (const uint8_t *)ctx->in.p + PAD;
    ctx->dev.out = (uint8_t *)ctx->out.p + PAD;
    return 0;
}

extern "C" int gmtf_gpu_stage_download(gmtf_gpu_ctx *ctx, uint8_t *dst)
{
    if (!ctx || !ctx->ok || !ctx->staged)
        return -ENODEV;
    if (gmtf_gpu_use(ctx))
        return -EIO;
    if (ctx->n) {
        CK(ctx, cudaMemcpyAsync(dst, (uint8_t *)ctx->out.p + PAD, ctx->n, cudaMemcpyDeviceToHost,
                                ctx->st[0]));
        CK(ctx, cudaStreamSynchronize(ctx->st[0]));
    }
    return 0;
}

/* ---- host to host, pipelined -------------------------------------------- */

static bool is_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

/* Slices of whole blocks, about n / 8 bytes each (at least 4 MiB): slice i
 * uploads on stream i % 3 while earlier slices compute and download. */
static size_t plan_slices(const gmtf_gpu_ctx *ctx, size_t *bounds, size_t max_slices)
{
    uint64_t n = ctx->n, target = n / 8 > (4u << 20) ? n / 8 : (4u << 20);
    size_t ns = 0;
    bounds[ns++] = 0;
    uint64_t from = 0;
    for (size_t b = 1; b <= ctx->count; b++) {
        if (b == ctx->count || (ctx->h_off[b] - from >= target && ns < max_slices)) {
            bounds[ns++] = b;
            from = ctx->h_off[b];
        }
    }
    return ns - 1;
}

static int run_host(gmtf_gpu_ctx *ctx, int variant, int decode, const uint8_t *src,
                    const uint64_t *off, size_t count, uint8_t *dst)
{
    const gmtf_variant *var;
    if (ctx && ctx->ok && gmtf_gpu_use(ctx))
        return -EIO;
    int rc = prepare(ctx, variant, decode, off, count, 1, &var);
    if (rc || !ctx->n)
        return rc;
    uint64_t n = ctx->n, base = off[0];
    bool pin_in = is_pinned(src), pin_out = is_pinned(dst);
    if (!pin_in && (rc = host_reserve(&ctx->h_in, &ctx->h_in_cap, n)))
        return rc;
    if (!pin_out && (rc = host_reserve(&ctx->h_out, &ctx->h_out_cap, n)))
        return rc;
    const uint8_t *hin = pin_in ? src + base : ctx->h_in;
    uint8_t *hout = pin_out ? dst + base : ctx->h_out;
    uint8_t *din = (uint8_t *)ctx->in.p + PAD, *dout = (uint8_t *)ctx->out.p + PAD;

    if ((rc = upload_tables(ctx, ctx->st[0])))
        return rc;
    CK(ctx, cudaEventRecord(ctx->ev_tab, ctx->st[0]));
    size_t bounds[65];
    size_t ns = plan_slices(ctx, bounds, 64);
    for (size_t i = 0; i < ns; i++) {
        cudaStream_t s = ctx->st[i % GMTF_NSTREAMS];
        size_t b0 = bounds[i], b1 = bounds[i + 1];
        uint64_t from = ctx->h_off[b0], to = ctx->h_off[b1];
        gmtf_range r = {
            b0, b1, ctx->h_ckscan[b0], ctx->h_ckscan[b1], ctx->h_grscan[b0], ctx->h_grscan[b1]};
        if (!pin_in)
            memcpy(ctx->h_in + from, src + base + from, to - from);
        CK(ctx, cudaStreamWaitEvent(s, ctx->ev_tab, 0));
        CK(ctx, cudaMemcpyAsync(din + from, hin + from, to - from, cudaMemcpyHostToDevice, s));
        launch_range(ctx, var, decode, &r, s);
        CK(ctx, cudaGetLastError());
        CK(ctx, cudaMemcpyAsync(hout + from, dout + from, to - from, cudaMemcpyDeviceToHost, s));
        CK(ctx, cudaEventRecord(ctx->ev_slice[i], s));
    }
    for (size_t i = 0; i < ns; i++) {
        CK(ctx, cudaEventSynchronize(ctx->ev_slice[i]));
        if (!pin_out) {
            uint64_t from = ctx->h_off[bounds[i]], to = ctx->h_off[bounds[i + 1]];
            memcpy(dst + base + from, ctx->h_out + from, to - from);
        }
    }
    ctx->staged = 0;
    return 0;
}

extern "C" int gmtf_gpu_mtf_encode_batch(gmtf_gpu_ctx *ctx, int variant, const uint8_t *src,
                                         const uint64_t *off, size_t count, uint8_t *dst)
{
    return run_host(ctx, variant, 0, src, off, count, dst);
}

extern "C" int gmtf_gpu_mtf_decode_batch(gmtf_gpu_ctx *ctx, int variant, const uint8_t *src,
                                         const uint64_t *off, size_t count, uint8_t *dst)
{
    return run_host(ctx, variant, 1, src, off, count, dst);
}
