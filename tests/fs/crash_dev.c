/* The crash/fault test disk: recording, faults, crash states (crash_dev.h). */
#include "crash_dev.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "crash_dev: out of memory (%zu bytes)\n", n);
        abort();
    }
    return q;
}

static void dev_reserve(cdev *d, size_t len)
{
    if (len <= d->cap)
        return;
    size_t cap = d->cap ? d->cap : 65536;
    while (cap < len)
        cap *= 2;
    d->p = xrealloc(d->p, cap);
    d->cap = cap;
}

static void dev_resize(cdev *d, size_t len)
{
    dev_reserve(d, len);
    if (len > d->len)
        memset(d->p + d->len, 0, len - d->len);
    d->len = len;
}

static void log_op(cdev *d, int kind, uint64_t off, uint64_t len, const void *data, int barrier)
{
    if (!d->recording)
        return;
    if (d->n == d->logcap) {
        d->logcap = d->logcap ? d->logcap * 2 : 1024;
        d->log = xrealloc(d->log, d->logcap * sizeof *d->log);
    }
    cd_op *o = &d->log[d->n++];
    *o = (cd_op){.kind = (uint8_t)kind, .barrier = (uint8_t)barrier, .off = off, .len = len};
    if (data) {
        o->data = xrealloc(NULL, len);
        memcpy(o->data, data, len);
    }
}

/* Counts the op; returns the injected error when it is the one to fail. */
static int fault_hit(cdev *d, int kind)
{
    if (d->fault_paused)
        return 0;
    uint64_t k = d->count[kind]++;
    if (d->fault_kind != kind)
        return 0;
    if (d->fault_active) {
        d->fault_hits++;
        return d->fault_err;
    }
    if (k != d->fault_at)
        return 0;
    d->fault_hits++;
    if (d->fault_mode == CD_FAULT_STICKY)
        d->fault_active = 1;
    else
        d->fault_kind = -1;
    return d->fault_err;
}

static int c_pread(void *ctx, void *buf, size_t n, uint64_t off)
{
    cdev *d = ctx;
    int rc = fault_hit(d, CD_READ);
    if (rc)
        return rc;
    if (off > d->len || n > d->len - off)
        return -EIO;
    memcpy(buf, d->p + off, n);
    return 0;
}

static void apply_write(cdev *d, const void *buf, size_t n, uint64_t off)
{
    if (off + n > d->len)
        dev_resize(d, off + n);
    memcpy(d->p + off, buf, n);
}

static int c_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    cdev *d = ctx;
    if (d->dead)
        return 0;
    if (d->no_write) {
        d->writes_seen++;
        return -EROFS;
    }
    int mode = d->fault_mode;
    int rc = fault_hit(d, CD_WRITE);
    if (rc) {
        if (mode == CD_FAULT_SHORT && n > 1) {
            /* the first sectors land, the rest does not */
            size_t part = n / 2;
            uint64_t end = (off + part) / CDEV_SECTOR * CDEV_SECTOR;
            part = end > off ? (size_t)(end - off) : n / 2;
            apply_write(d, buf, part, off);
            log_op(d, CD_WRITE, off, part, buf, 0);
        }
        return rc;
    }
    apply_write(d, buf, n, off);
    log_op(d, CD_WRITE, off, n, buf, 0);
    return 0;
}

static int c_flush(void *ctx)
{
    cdev *d = ctx;
    if (d->dead)
        return 0;
    if (d->no_write) {
        d->writes_seen++;
        return -EROFS;
    }
    int rc = fault_hit(d, CD_FLUSH);
    if (rc)
        return rc; /* nothing became durable */
    log_op(d, CD_FLUSH, 0, 0, NULL, 0);
    return 0;
}

static int c_size(void *ctx, uint64_t *size)
{
    *size = ((cdev *)ctx)->len;
    return 0;
}

static int c_truncate(void *ctx, uint64_t size)
{
    cdev *d = ctx;
    if (d->dead)
        return 0;
    if (d->no_write) {
        d->writes_seen++;
        return -EROFS;
    }
    int rc = fault_hit(d, CD_TRUNC);
    if (rc)
        return rc;
    dev_resize(d, size);
    log_op(d, CD_TRUNC, size, 0, NULL, 0);
    return 0;
}

static int c_punch(void *ctx, uint64_t off, uint64_t len)
{
    cdev *d = ctx;
    if (d->dead)
        return 0;
    if (d->no_write) {
        d->writes_seen++;
        return -EROFS;
    }
    int rc = fault_hit(d, CD_PUNCH);
    if (rc)
        return rc;
    if (off < d->len) {
        uint64_t n = len < d->len - off ? len : d->len - off;
        memset(d->p + off, 0, n);
        log_op(d, CD_PUNCH, off, n, NULL, 0);
    }
    return 0;
}

/* Host allocation: nothing to allocate in memory, but the image grows. */
static int c_reserve(void *ctx, uint64_t off, uint64_t len)
{
    cdev *d = ctx;
    if (d->dead)
        return 0;
    if (d->no_write) {
        d->writes_seen++;
        return -EROFS;
    }
    int rc = fault_hit(d, CD_RESERVE);
    if (rc)
        return rc;
    if (off + len > d->len) {
        dev_resize(d, off + len);
        log_op(d, CD_TRUNC, off + len, 0, NULL, 0);
    }
    return 0;
}

static void c_close(void *ctx)
{
    (void)ctx; /* the test owns the disk */
}

static const gmtf_image_ops cdev_ops = {.pread = c_pread,
                                        .pwrite = c_pwrite,
                                        .flush = c_flush,
                                        .size = c_size,
                                        .truncate = c_truncate,
                                        .close = c_close,
                                        .punch = c_punch,
                                        .reserve = c_reserve};

cdev *cdev_new(const uint8_t *data, size_t len)
{
    cdev *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    d->fault_kind = -1;
    dev_resize(d, len);
    if (len)
        memcpy(d->p, data, len);
    return d;
}

void cdev_clear_log(cdev *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->log[i].data);
    d->n = 0;
}

void cdev_free(cdev *d)
{
    if (!d)
        return;
    cdev_clear_log(d);
    free(d->log);
    free(d->p);
    free(d);
}

gmtf_image *cdev_attach(cdev *d)
{
    gmtf_image *img = calloc(1, sizeof *img);
    if (!img)
        abort();
    img->ops = &cdev_ops;
    img->ctx = d;
    return img;
}

cdev *cdev_clone(const cdev *d)
{
    return cdev_new(d->p, d->len);
}

void cdev_power_cut(cdev *d)
{
    log_op(d, CD_FLUSH, 0, 0, NULL, 1);
    d->dead = 1;
}

void cdev_power_on(cdev *d)
{
    d->dead = 0;
}

void cdev_inject(cdev *d, uint64_t off, const void *data, size_t len)
{
    log_op(d, CD_FLUSH, 0, 0, NULL, 2); /* what came before is decided */
    apply_write(d, data, len, off);
    log_op(d, CD_WRITE, off, len, data, 1);
    log_op(d, CD_FLUSH, 0, 0, NULL, 2);
}

void cdev_fault_arm(cdev *d, int kind, uint64_t at, int err, int mode)
{
    d->fault_kind = kind;
    d->fault_at = d->count[kind] + at;
    d->fault_err = err;
    d->fault_mode = mode;
    d->fault_active = 0;
    d->fault_hits = 0;
}

int cdev_fault_pause(cdev *d, int paused)
{
    int was = d->fault_paused;
    d->fault_paused = paused;
    return was;
}

void cdev_fault_clear(cdev *d)
{
    d->fault_kind = -1;
    d->fault_active = 0;
}

size_t cd_env_count(const char *name, size_t def)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    return *end ? def : (size_t)v;
}

/* ---- hashing and a set of hashes ---------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t cd_hash(const uint8_t *p, size_t n)
{
    uint64_t h[4] = {n, 0x9e3779b97f4a7c15ull, 0x632be59bd9b4e019ull, 0x85ebca77c2b2ae63ull};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * k, 8);
            h[k] = (h[k] ^ w) * 0x100000001b3ull;
            h[k] ^= h[k] >> 29;
        }
    uint64_t t = 0;
    for (; i < n; i++)
        t = (t ^ p[i]) * 0x100000001b3ull;
    return mix64(h[0] ^ mix64(h[1] ^ mix64(h[2] ^ mix64(h[3] ^ t))));
}

typedef struct hset {
    uint64_t *v;
    size_t n, cap;
} hset;

/* 1 if h was new (and is now in). */
static int hset_add(hset *s, uint64_t h)
{
    if (h == 0)
        h = 1;
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        uint64_t *v = calloc(cap, sizeof *v);
        if (!v)
            abort();
        for (size_t i = 0; i < s->cap; i++)
            if (s->v[i]) {
                size_t j = s->v[i] & (cap - 1);
                while (v[j])
                    j = (j + 1) & (cap - 1);
                v[j] = s->v[i];
            }
        free(s->v);
        s->v = v;
        s->cap = cap;
    }
    size_t j = h & (s->cap - 1);
    while (s->v[j]) {
        if (s->v[j] == h)
            return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->v[j] = h;
    s->n++;
    return 1;
}

/* ---- building states ------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return mix64(*s);
}

typedef struct img_buf {
    uint8_t *p;
    size_t len, cap;
} img_buf;

static void ib_resize(img_buf *b, size_t len)
{
    if (len > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < len)
            cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (len > b->len)
        memset(b->p + b->len, 0, len - b->len);
    b->len = len;
}

/* Applies the sectors of op o that mask selects (NULL: all). */
static void ib_apply(img_buf *b, const cd_op *o, const uint8_t *mask)
{
    switch (o->kind) {
    case CD_TRUNC: ib_resize(b, o->off); return;
    case CD_FLUSH: return;
    case CD_WRITE:
    case CD_PUNCH: break;
    default: return;
    }
    if (!o->len)
        return;
    uint64_t s0 = o->off / CDEV_SECTOR, s1 = (o->off + o->len - 1) / CDEV_SECTOR;
    for (uint64_t s = s0; s <= s1; s++) {
        if (mask && !mask[s - s0])
            continue;
        uint64_t a = s * CDEV_SECTOR > o->off ? s * CDEV_SECTOR : o->off;
        uint64_t e =
            (s + 1) * CDEV_SECTOR < o->off + o->len ? (s + 1) * CDEV_SECTOR : o->off + o->len;
        if (o->kind == CD_PUNCH) {
            if (a < b->len)
                memset(b->p + a, 0, (e < b->len ? e : b->len) - a);
            continue;
        }
        if (e > b->len)
            ib_resize(b, e);
        memcpy(b->p + a, o->data + (a - o->off), e - a);
    }
}

static uint64_t op_sectors(const cd_op *o)
{
    if ((o->kind != CD_WRITE && o->kind != CD_PUNCH) || !o->len)
        return 0;
    return (o->off + o->len - 1) / CDEV_SECTOR - o->off / CDEV_SECTOR + 1;
}

uint8_t *cd_state_prefix(const cdev *d, const uint8_t *base, size_t base_len, size_t k, size_t *len)
{
    img_buf b = {0};
    ib_resize(&b, base_len);
    if (base_len)
        memcpy(b.p, base, base_len);
    for (size_t i = 0; i < k && i < d->n; i++)
        ib_apply(&b, &d->log[i], NULL);
    *len = b.len;
    return b.p;
}

typedef struct window {
    size_t start, end; /* ops [start, end); end is the flush closing it (or n) */
    size_t cap;        /* distinct states it can give, at most (estimate) */
    size_t quota;      /* distinct states wanted from it */
    size_t got, attempts;
    int exhausted; /* attempts found only duplicates: it has no more */
    uint64_t rng;
} window;

/* Water-filling: each window gets min(cap, q), q as small as reaches target.
 * A target under the number of windows (a sanitizer pass's small count)
 * samples them: one state from every kth window, spread over the log. */
static void set_quotas(window *w, size_t nw, size_t target)
{
    size_t total = 0, open = 0;
    for (size_t i = 0; i < nw; i++) {
        total += w[i].cap;
        open += w[i].cap > 0;
    }
    if (target && target < open) {
        size_t k = (open + target - 1) / target, j = 0;
        for (size_t i = 0; i < nw; i++) {
            w[i].quota = w[i].cap > 0 && j % k == 0;
            j += w[i].cap > 0;
        }
        return;
    }
    if (total <= target) {
        for (size_t i = 0; i < nw; i++)
            w[i].quota = w[i].cap;
        return;
    }
    size_t lo = 1, hi = target;
    while (lo < hi) {
        size_t q = (lo + hi) / 2, s = 0;
        for (size_t i = 0; i < nw && s < target; i++)
            s += w[i].cap < q ? w[i].cap : q;
        if (s >= target)
            hi = q;
        else
            lo = q + 1;
    }
    for (size_t i = 0; i < nw; i++)
        w[i].quota = w[i].cap < lo ? w[i].cap : lo;
}

/* One random state of window w over pre (in out). Returns the index of the
 * last op included (or SIZE_MAX), describes it in desc. */
static size_t make_state(const cdev *d, const window *w, const img_buf *pre, uint64_t *rng,
                         int attempt, img_buf *out, char *desc, size_t dcap, int *torn)
{
    ib_resize(out, 0);
    ib_resize(out, pre->len);
    if (pre->len)
        memcpy(out->p, pre->p, pre->len);
    *torn = 0;
    size_t nops = w->end - w->start, last = SIZE_MAX;
    int pos = snprintf(desc, dcap, "ops [%zu,%zu) ", w->start, w->end);
    if (attempt == 0 || nops == 0) {
        snprintf(desc + pos, dcap - (size_t)pos, "none");
        return last;
    }
    unsigned mode = (unsigned)(rng_next(rng) % 10);
    size_t j = (size_t)(rng_next(rng) % (nops + 1));
    unsigned pin = 1 + (unsigned)(rng_next(rng) % 3); /* inclusion odds pin/4 */
    pos += snprintf(desc + pos, dcap - (size_t)pos, "%s:",
                    mode == 0   ? "all"
                    : mode <= 3 ? "in-order"
                                : "subset");
    uint8_t *mask = NULL;
    size_t mcap = 0;
    for (size_t i = w->start; i < w->end; i++) {
        const cd_op *o = &d->log[i];
        int inc, tear = 0;
        if (mode == 0)
            inc = 1;
        else if (mode <= 3) {
            inc = i - w->start <= j;
            tear = i - w->start == j ? 1 : 0; /* the op the crash cut */
            if (i - w->start == j && rng_next(rng) % 4 == 0)
                inc = 0, tear = 0;
        } else {
            inc = rng_next(rng) % 4 < pin;
            tear = inc && rng_next(rng) % 3 == 0 ? 1 + (int)(rng_next(rng) % 2) : 0;
        }
        if (!inc)
            continue;
        uint64_t ns = op_sectors(o);
        if (tear && ns > 1) {
            if (ns > mcap) {
                mcap = ns;
                mask = xrealloc(mask, mcap);
            }
            if (tear == 1) { /* a prefix of its sectors */
                uint64_t k = 1 + rng_next(rng) % (ns - 1);
                for (uint64_t s = 0; s < ns; s++)
                    mask[s] = s < k;
                pos += snprintf(desc + pos, dcap > (size_t)pos ? dcap - (size_t)pos : 0,
                                " %zu/p%llu", i, (unsigned long long)k);
            } else { /* any sectors, as a disk reorders them */
                for (uint64_t s = 0; s < ns; s++)
                    mask[s] = (uint8_t)(rng_next(rng) & 1);
                pos +=
                    snprintf(desc + pos, dcap > (size_t)pos ? dcap - (size_t)pos : 0, " %zu/r", i);
            }
            ib_apply(out, o, mask);
            *torn = 1;
        } else {
            ib_apply(out, o, NULL);
            if (pos < (int)dcap - 16)
                pos += snprintf(desc + pos, dcap - (size_t)pos, " %zu", i);
        }
        last = i;
        if (pos >= (int)dcap)
            pos = (int)dcap - 1;
    }
    free(mask);
    return last;
}

void cd_explore(const cdev *d, const uint8_t *base, size_t base_len, const cd_explore_opts *o,
                cd_check_fn fn, void *arg, cd_explore_stats *st)
{
    memset(st, 0, sizeof *st);
    size_t nw = 1;
    for (size_t i = 0; i < d->n; i++)
        nw += d->log[i].kind == CD_FLUSH;
    window *w = calloc(nw, sizeof *w);
    if (!w)
        abort();
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= d->n; i++)
        if (i == d->n || d->log[i].kind == CD_FLUSH) {
            w[k].start = start;
            w[k].end = i;
            uint64_t sectors = 0;
            /* only injected writes, or nothing before an injection */
            int injected = i > start || (i < d->n && d->log[i].barrier == 2);
            for (size_t j = start; j < i; j++) {
                sectors += op_sectors(&d->log[j]) + (d->log[j].kind == CD_TRUNC);
                injected &= d->log[j].kind == CD_WRITE && d->log[j].barrier;
            }
            w[k].cap = sectors >= 20 ? (size_t)1 << 20 : (size_t)1 << sectors;
            if (i < o->from_op || injected) /* not asked for, or not the library's */
                w[k].cap = 0;
            k++;
            start = i + 1;
        }
    st->windows = nw;
    set_quotas(w, nw, o->target);
    for (size_t i = 0; i < nw; i++)
        w[i].rng = o->seed * 0x9e3779b97f4a7c15ull + i * 0xd1b54a32d192ed03ull + 1;
    hset seen = {0};
    img_buf pre = {0}, cur = {0};
    char desc[512];
    /* Passes over the log: a window that has fewer distinct states than
     * its share gives the rest to the windows that still have some. */
    for (int pass = 0; pass < 8; pass++) {
        ib_resize(&pre, 0);
        ib_resize(&pre, base_len);
        if (base_len)
            memcpy(pre.p, base, base_len);
        for (size_t wi = 0; wi < nw; wi++) {
            window *x = &w[wi];
            size_t want = x->quota > x->got ? x->quota - x->got : 0, tries = 0;
            while (want && !x->exhausted && x->got < x->quota) {
                if (tries++ >= 4 * want + 16) {
                    x->exhausted = 1;
                    break;
                }
                int torn;
                size_t last = make_state(d, x, &pre, &x->rng, (int)x->attempts++, &cur, desc,
                                         sizeof desc, &torn);
                st->made++;
                if (!hset_add(&seen, cd_hash(cur.p, cur.len)))
                    continue;
                x->got++;
                size_t num = st->distinct++;
                st->torn += torn;
                if (o->only >= 0 && (size_t)o->only != num)
                    continue;
                size_t crash_pos = x->start;
                if (last != SIZE_MAX && last > crash_pos)
                    crash_pos = last;
                char full[600];
                snprintf(full, sizeof full, "state %zu (window %zu, %s)", num, wi, desc);
                if (o->verbose)
                    fprintf(stderr, "# %s\n", full);
                if (fn(arg, cur.p, cur.len, crash_pos, full))
                    st->failed++;
            }
            for (size_t i = x->start; i < x->end; i++)
                ib_apply(&pre, &d->log[i], NULL);
        }
        if (st->distinct >= o->target)
            break;
        size_t open = 0;
        for (size_t i = 0; i < nw; i++)
            open += !w[i].exhausted && w[i].cap > w[i].quota;
        if (!open)
            break;
        /* the missing states, spread: at most deficit more in all */
        size_t deficit = o->target - st->distinct, add = (deficit + open - 1) / open, given = 0;
        for (size_t i = 0; i < nw && given < deficit; i++)
            if (!w[i].exhausted && w[i].cap > w[i].quota) {
                size_t q = w[i].cap - w[i].quota < add ? w[i].cap : w[i].quota + add;
                given += q - w[i].quota;
                w[i].quota = q;
            }
    }
    free(seen.v);
    free(pre.p);
    free(cur.p);
    free(w);
}

void cd_print_log(const cdev *d, size_t from, size_t to)
{
    for (size_t i = from; i < to && i < d->n; i++) {
        const cd_op *x = &d->log[i];
        printf("# op %zu: %s %llu +%llu%s\n", i,
               x->kind == CD_WRITE   ? "write"
               : x->kind == CD_FLUSH ? "flush"
               : x->kind == CD_TRUNC ? "truncate"
                                     : "punch",
               (unsigned long long)x->off, (unsigned long long)x->len,
               x->barrier ? " (power cut)" : "");
    }
    fflush(stdout);
}
