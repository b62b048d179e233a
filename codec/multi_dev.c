/* Several GPUs for one codec (multi_dev.h): device lists, the device
 * states (a codec each), the cut of a batch into runs by measured
 * throughput, and the runs on one host thread a device. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec_internal.h"
#include "multi_dev.h"

int gmtf_multi_dev_parse(const char *list, int *dev, unsigned *n, int *all)
{
    *n = 0;
    *all = 0;
    if (!list || !*list)
        return -EINVAL;
    if (strcmp(list, "all") == 0) {
        *all = 1;
        return 0;
    }
    /* GMTF_GPUS_REPEAT=1 (measurements and tests): a device may be named
     * more than once, each a device state of its own, so that the path of
     * several GPUs runs on a host of one (scripts/gpu-codec-run) */
    const char *rep = getenv("GMTF_GPUS_REPEAT");
    int repeat = rep && strcmp(rep, "1") == 0;
    const char *p = list;
    for (;;) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        int v = 0;
        while (*p >= '0' && *p <= '9' && v < GMTF_MULTI_DEV_MAX)
            v = v * 10 + (*p++ - '0');
        if (v >= GMTF_MULTI_DEV_MAX || *n >= GMTF_MULTI_DEV_MAX)
            return -EINVAL;
        for (unsigned i = 0; i < *n && !repeat; i++)
            if (dev[i] == v)
                return -EINVAL;
        dev[(*n)++] = v;
        if (*p == 0)
            return 0;
        if (*p != ',' && *p != ':') /* ':' where commas separate options (gmtf -o) */
            return -EINVAL;
        p++;
    }
}

int gmtf_codec_gpus_check(const char *list)
{
    int dev[GMTF_MULTI_DEV_MAX], all;
    unsigned n;
    return gmtf_multi_dev_parse(list, dev, &n, &all);
}

int gmtf_multi_dev_create(gmtf_multi_dev **out, const gmtf_multi_dev_calls *calls,
                          const gmtf_codec_options *o, const gmtf_bwt_dev_ops *ops, const int *dev,
                          unsigned n)
{
    *out = NULL;
    if (n < 2 || n > GMTF_MULTI_DEV_MAX || !ops)
        return -EINVAL;
    gmtf_multi_dev *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->calls = *calls;
    gmtf_codec_options so = *o;
    so.gpus = NULL;
    so.threads = o->threads / n ? o->threads / n : 1;
    const char *env = getenv("GMTF_GPUS_THREADS"); /* measurements: workers a device */
    if (env && atoi(env) > 0)
        so.threads = (unsigned)atoi(env);
    int rc = 0;
    for (unsigned k = 0; k < n && rc == 0; k++) {
        m->device[k] = dev[k];
        rc = m->calls.create(&m->sub[k], &so);
        if (rc == 0)
            m->calls.set_dev(m->sub[k], ops, dev[k]);
        m->n = k + 1;
    }
    if (rc) {
        gmtf_multi_dev_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}

void gmtf_multi_dev_destroy(gmtf_multi_dev *m)
{
    if (!m)
        return;
    for (unsigned k = 0; k < m->n; k++)
        if (m->sub[k])
            m->calls.destroy(m->sub[k]);
    free(m);
}

static int dev_live(const gmtf_multi_dev *m, unsigned k)
{
    const gmtf_bwt_dev *d = &m->sub[k]->bwt_dev;
    return d->ops && !d->retired;
}

unsigned gmtf_multi_dev_live(const gmtf_multi_dev *m)
{
    unsigned live = 0;
    for (unsigned k = 0; k < m->n; k++)
        live += (unsigned)dev_live(m, k);
    return live;
}

void gmtf_multi_dev_cut(const uint64_t *off, size_t count, const double *w, unsigned n, size_t *cut)
{
    double sum = 0, acc = 0;
    for (unsigned k = 0; k < n; k++)
        sum += w[k];
    uint64_t total = off[count] - off[0];
    size_t b = 0;
    cut[0] = 0;
    for (unsigned k = 1; k < n; k++) {
        acc += w[k - 1];
        uint64_t want = (uint64_t)((double)total * (acc / sum));
        /* the first block boundary at or past the share, so a run takes
         * the block that straddles it when more than half of it is its own */
        while (b < count && off[b + 1] - off[0] <= want)
            b++;
        if (b < count && off[b] - off[0] < want &&
            want - (off[b] - off[0]) > (off[b + 1] - off[b]) / 2)
            b++;
        cut[k] = b;
    }
    cut[n] = count;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One device's run: blocks [b0, b1) of the batch, offsets rebased to 0. */
struct run {
    gmtf_multi_dev *m;
    unsigned k;
    int encode;
    const uint8_t *src;
    uint64_t *off;  /* b1 - b0 + 1, from 0: blocks (encode) or frames (decode) */
    uint64_t *doff; /* decode: blocks out, from 0; encode: frames out */
    size_t count;
    uint8_t *dst;
    uint64_t cap;
    uint32_t *crc;
    int *status;
    uint64_t bytes;
    uint64_t ns;
    int rc;
    pthread_t thread;
    int threaded;
};

static void *run_main(void *arg)
{
    struct run *r = arg;
    gmtf_codec *c = r->m->sub[r->k];
    const gmtf_multi_dev_calls *f = &r->m->calls;
    uint64_t t0 = now_ns();
    if (r->encode)
        r->rc = f->encode(c, r->src, r->off, r->count, r->dst, r->cap, r->doff, r->crc);
    else
        r->rc = f->decode(c, r->src, r->off, r->count, r->dst, r->doff, r->status);
    r->ns = now_ns() - t0;
    return NULL;
}

/* The devices a batch of bytes goes to (their indexes in m), and their
 * weights: the measured rate, or the mean of the others' (1 when none has
 * one yet); fewer devices when a share would fall below the device's
 * smallest batch. */
static unsigned pick(gmtf_multi_dev *m, int dir, uint64_t bytes, unsigned *idx, double *w)
{
    unsigned n = 0;
    double known = 0;
    unsigned nk = 0;
    for (unsigned k = 0; k < m->n; k++)
        if (dev_live(m, k)) {
            idx[n++] = k;
            if (m->rate[dir][k] > 0) {
                known += m->rate[dir][k];
                nk++;
            }
        }
    if (n == 0)
        return 0;
    uint64_t min = m->sub[idx[0]]->bwt_dev.min_bytes[dir];
    if (bytes < min)
        return 0;
    while (n > 1 && min && bytes / n < min)
        n--;
    for (unsigned j = 0; j < n; j++)
        w[j] = m->rate[dir][idx[j]] > 0 ? m->rate[dir][idx[j]] : nk ? known / nk : 1;
    return n;
}

static void note_rate(gmtf_multi_dev *m, int dir, const struct run *r)
{
    if (r->rc || r->ns == 0 || r->bytes == 0 || !dev_live(m, r->k))
        return; /* an empty run says nothing of the device's speed */
    double rate = (double)r->bytes / ((double)r->ns / 1e6);
    double *p = &m->rate[dir][r->k];
    *p = *p > 0 ? 0.5 * *p + 0.5 * rate : rate; /* the last batches, the latest most */
    m->dealt[dir][r->k] += r->bytes;
}

/* Runs runs[0..n) at once (the first on the calling thread); the first
 * error in run order, or 0. */
static int run_all(struct run *runs, unsigned n)
{
    for (unsigned j = 1; j < n; j++)
        runs[j].threaded = pthread_create(&runs[j].thread, NULL, run_main, &runs[j]) == 0;
    for (unsigned j = 1; j < n; j++)
        if (!runs[j].threaded)
            run_main(&runs[j]);
    run_main(&runs[0]);
    for (unsigned j = 1; j < n; j++)
        if (runs[j].threaded)
            pthread_join(runs[j].thread, NULL);
    for (unsigned j = 0; j < n; j++)
        if (runs[j].rc)
            return runs[j].rc;
    return 0;
}

/* Runs of [cut[j], cut[j+1]) with rebased offsets; NULL on -ENOMEM. */
static struct run *runs_make(gmtf_multi_dev *m, const unsigned *idx, unsigned n, const size_t *cut,
                             const uint64_t *off, const uint64_t *doff, int encode)
{
    struct run *runs = calloc(n, sizeof *runs);
    if (!runs)
        return NULL;
    for (unsigned j = 0; j < n; j++) {
        struct run *r = &runs[j];
        size_t b0 = cut[j], cnt = cut[j + 1] - cut[j];
        r->m = m;
        r->k = idx[j];
        r->encode = encode;
        r->count = cnt;
        r->off = malloc((cnt + 1) * sizeof *r->off);
        r->doff = malloc((cnt + 1) * sizeof *r->doff);
        if (!r->off || !r->doff) {
            for (unsigned i = 0; i <= j; i++) {
                free(runs[i].off);
                free(runs[i].doff);
            }
            free(runs);
            return NULL;
        }
        for (size_t i = 0; i <= cnt; i++) {
            r->off[i] = off[b0 + i] - off[b0];
            if (doff)
                r->doff[i] = doff[b0 + i] - doff[b0];
        }
        r->bytes = encode ? r->off[cnt] : r->doff[cnt];
    }
    return runs;
}

static void runs_free(struct run *runs, unsigned n)
{
    for (unsigned j = 0; j < n; j++) {
        free(runs[j].off);
        free(runs[j].doff);
    }
    free(runs);
}

int gmtf_multi_dev_encode(gmtf_multi_dev *m, const uint8_t *src, const uint64_t *off, size_t count,
                          uint8_t *dst, uint64_t *dst_off, uint32_t *crc)
{
    unsigned idx[GMTF_MULTI_DEV_MAX];
    double w[GMTF_MULTI_DEV_MAX];
    size_t cut[GMTF_MULTI_DEV_MAX + 1];
    if (m->sub[0]->frame_version == GMTF_FRAME_V1)
        return 1;
    unsigned n = pick(m, GMTF_BWT_DEV_FWD, off[count], idx, w);
    if (n == 0)
        return 1;
    gmtf_multi_dev_cut(off, count, w, n, cut);
    struct run *runs = runs_make(m, idx, n, cut, off, NULL, 1);
    if (!runs)
        return -ENOMEM;
    /* run j writes its frames at the sum of the runs' bounds before it */
    uint64_t base = 0;
    for (unsigned j = 0; j < n; j++) {
        runs[j].src = src + off[cut[j]];
        runs[j].dst = dst + base;
        runs[j].cap = runs[j].off[runs[j].count] + runs[j].count * GMTF_FRAME_FIXED; /* bound */
        runs[j].crc = crc ? crc + cut[j] : NULL;
        base += runs[j].cap;
    }
    int rc = run_all(runs, n);
    if (rc == 0) {
        uint64_t out = 0;
        for (unsigned j = 0; j < n; j++) {
            const struct run *r = &runs[j];
            uint64_t len = r->doff[r->count];
            if (len && out != (uint64_t)(r->dst - dst))
                memmove(dst + out, r->dst, len);
            for (size_t i = 0; i < r->count; i++)
                dst_off[cut[j] + i] = out + r->doff[i];
            out += len;
        }
        dst_off[count] = out;
    }
    for (unsigned j = 0; j < n; j++)
        note_rate(m, GMTF_BWT_DEV_FWD, &runs[j]);
    m->batches++;
    runs_free(runs, n);
    return rc;
}

int gmtf_multi_dev_decode(gmtf_multi_dev *m, const uint8_t *src, const uint64_t *foff, size_t count,
                          uint8_t *dst, const uint64_t *doff, int *status)
{
    unsigned idx[GMTF_MULTI_DEV_MAX];
    double w[GMTF_MULTI_DEV_MAX];
    size_t cut[GMTF_MULTI_DEV_MAX + 1];
    unsigned n = pick(m, GMTF_BWT_DEV_INV, doff[count] - doff[0], idx, w);
    if (n == 0)
        return 1;
    gmtf_multi_dev_cut(doff, count, w, n, cut);
    struct run *runs = runs_make(m, idx, n, cut, foff, doff, 0);
    if (!runs)
        return -ENOMEM;
    for (unsigned j = 0; j < n; j++) {
        runs[j].src = src + foff[cut[j]];
        runs[j].dst = dst + doff[cut[j]];
        runs[j].status = status ? status + cut[j] : NULL;
    }
    int rc = run_all(runs, n);
    for (unsigned j = 0; j < n; j++)
        note_rate(m, GMTF_BWT_DEV_INV, &runs[j]);
    m->batches++;
    runs_free(runs, n);
    return rc;
}

int gmtf_multi_dev_prepare(gmtf_multi_dev *m, uint64_t batch_bytes, int encode)
{
    unsigned live = gmtf_multi_dev_live(m);
    int rc = 0;
    for (unsigned k = 0; k < m->n && rc == 0; k++)
        if (dev_live(m, k))
            rc = m->calls.prepare(m->sub[k], batch_bytes / (live ? live : 1) + 1, encode);
    return rc;
}
