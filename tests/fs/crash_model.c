/* The oracle of the crash and fault tests (crash_model.h). */
#include "crash_model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs_test_util.h" /* tag_sectors */

#define NAME_CAP 64 /* names kept for messages; hashes use the whole name */

enum { ACK_FSYNC = 1, ACK_FDATASYNC, ACK_ALL };

typedef struct dop { /* a change of a file's bytes */
    uint64_t seq;
    char kind; /* 'W' write, 'T' size (truncate/extend), 'P' punch, 'X' whole content,
                  'M' a write that failed: its bytes may be there, or not */
    uint64_t off, len;
    uint8_t *data; /* W, X */
} dop;

typedef struct attrv { /* attributes after an operation */
    uint64_t seq;
    uint32_t mode, uid, gid, nlink;
    uint64_t rdev, size, xh;
    int64_t mt_s, ct_s;
    uint32_t mt_ns, ct_ns;
} attrv;

typedef struct node {
    uint64_t ino, gen;
    uint32_t type;
    char *target;
    dop *dops;
    size_t ndops, cdops;
    attrv *vers;
    size_t nvers, cvers;
    int nopen, named, alive;
    uint8_t *cur; /* content now */
    uint64_t cur_size, cur_cap;
    /* content at seq cache_seq (data checks replay it often) */
    int64_t cache_seq;
    uint8_t *cache;
    uint64_t cache_size, cache_cap;
} node;

typedef struct ent {
    uint64_t parent, ino, gen;
    uint32_t type;
    char name[NAME_CAP];
    struct stat st;
} ent;

typedef struct nsver {
    uint64_t seq, hash;
    ent *e;
    size_t n;
} nsver;

typedef struct ack {
    uint64_t seq;
    size_t logpos;
    int kind, node;
} ack;

struct cm_model {
    cdev *dev;
    gmtf_fs_options opt;
    gmtf_fs *fs;
    node *nodes;
    size_t nn, cn;
    nsver *ns;
    size_t nns, cns;
    ack *acks;
    size_t nacks, cacks;
    uint64_t seq;
    ent *cur;
    size_t ncur;
    char name[64];
    char pathbuf[1024];
    int trace;    /* GMTF_CRASH_TRACE: every operation on stderr */
    int paranoid; /* GMTF_CRASH_PARANOID: the disk checked after every sync */
};

#define TRACE(m, ...)                                                                              \
    do {                                                                                           \
        if ((m)->trace) {                                                                          \
            fprintf(stderr, "# [%s] op %llu (log %zu): ", (m)->name, (unsigned long long)(m)->seq, \
                    (m)->dev->n);                                                                  \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        abort();
    return p;
}

#define GROW(v, n, c)                                                                              \
    do {                                                                                           \
        if ((n) == (c)) {                                                                          \
            (c) = (c) ? (c)*2 : 16;                                                                \
            (v) = xrealloc((v), (c) * sizeof *(v));                                                \
        }                                                                                          \
    } while (0)

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t cm_rand(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ull;
    return mix64(*s);
}

void cm_fill(uint8_t *p, size_t n, uint64_t seed, int random)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 7, x = 0;
    if (random) {
        for (size_t i = 0; i < n; i++) {
            if (i % 8 == 0)
                x = cm_rand(&s);
            p[i] = (uint8_t)(x >> (8 * (i % 8)));
        }
        return;
    }
    /* compressible: a sector (512 bytes) of words and lines, as text is,
     * then the same sector over and over, each with its offset and the
     * seed at its start, so that no two sectors of the data are equal (a
     * sector in the wrong place shows) and the coder has little to do
     * (random words everywhere made decoding 80% of the crash states' time) */
    if (n > 512) {
        cm_fill(p, 512, seed, 0);
        tag_sectors(p, n, seed, 16);
        return;
    }
    static const char *const w[16] = {"journal", "record", "frame", "inode", "extent", "commit",
                                      "block",   "crash",  "state", "sync",  "write",  "the",
                                      "of",      "a",      "and",   "to"};
    size_t k = 0;
    while (k < n) {
        x = cm_rand(&s);
        const char *t = w[x % 16 < 11 ? x % 16 : 11 + (x >> 8) % 5];
        for (; *t && k < n; t++)
            p[k++] = (uint8_t)*t;
        if (k < n)
            p[k++] = (x >> 16) % 9 == 0 ? '\n' : ' ';
    }
}

/* ---- logging of the filesystem under check ------------------------------------- */

typedef struct msgbuf {
    char *p;
    size_t cap, len;
    int lines;
} msgbuf;

static void collect(void *arg, const char *msg)
{
    msgbuf *b = arg;
    if (!b || !b->p || b->lines >= 8 || b->len + 4 >= b->cap)
        return;
    int n = snprintf(b->p + b->len, b->cap - b->len, "    | %s\n", msg);
    if (n > 0)
        b->len += (size_t)n < b->cap - b->len ? (size_t)n : b->cap - b->len - 1;
    b->lines++;
}

static void quiet(void *arg, const char *msg)
{
    (void)arg;
    (void)msg;
}

/* ---- walking a filesystem --------------------------------------------------------- */

typedef struct names {
    char (*v)[256];
    size_t n, cap;
} names;

static int fill_name(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
    (void)st;
    (void)next_off;
    names *nm = arg;
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    GROW(nm->v, nm->n, nm->cap);
    snprintf(nm->v[nm->n++], 256, "%s", name);
    return 0;
}

static uint64_t str_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static uint64_t ent_hash(uint64_t parent, uint64_t ino, uint64_t gen, const char *name)
{
    return mix64(parent * 0x9e3779b97f4a7c15ull ^ mix64(ino ^ mix64(gen + 77)) ^
                 mix64(str_hash(name)));
}

/* Every entry below the root (breadth first). Returns 0 or the first error. */
static int walk_fs(gmtf_fs *fs, ent **out, size_t *nout, uint64_t *hash)
{
    ent *e = NULL;
    size_t n = 0, cap = 0;
    uint64_t *dirs = xmalloc(sizeof *dirs * 16), h = 0;
    size_t nd = 1, dcap = 16, di = 0;
    dirs[0] = GMTF_ROOT_INO;
    int rc = 0;
    names nm = {0};
    while (di < nd && !rc) {
        uint64_t dir = dirs[di++];
        nm.n = 0;
        rc = gmtf_fs_readdir(fs, dir, 0, fill_name, &nm);
        for (size_t i = 0; !rc && i < nm.n; i++) {
            gmtf_entry en;
            rc = gmtf_fs_lookup(fs, dir, nm.v[i], &en);
            if (rc)
                break;
            GROW(e, n, cap);
            ent *x = &e[n++];
            memset(x, 0, sizeof *x);
            x->parent = dir;
            x->ino = en.attr.st_ino;
            x->gen = en.generation;
            x->type = en.attr.st_mode & S_IFMT;
            x->st = en.attr;
            snprintf(x->name, NAME_CAP, "%s", nm.v[i]);
            h += ent_hash(dir, x->ino, x->gen, nm.v[i]);
            if (S_ISDIR(en.attr.st_mode)) {
                int seen = 0;
                for (size_t k = 0; k < nd; k++)
                    seen |= dirs[k] == x->ino;
                if (seen) {
                    rc = -ELOOP;
                    break;
                }
                if (nd == dcap) {
                    dcap *= 2;
                    dirs = xrealloc(dirs, dcap * sizeof *dirs);
                }
                dirs[nd++] = x->ino;
            }
        }
    }
    free(nm.v);
    free(dirs);
    *out = e;
    *nout = n;
    *hash = mix64(h + n);
    return rc;
}

static uint64_t xattr_hash(gmtf_fs *fs, uint64_t ino)
{
    char list[8192];
    long n = gmtf_fs_listxattr(fs, ino, list, sizeof list);
    if (n <= 0)
        return n == 0 ? 0 : (uint64_t)n;
    /* order-independent: a sum over (name, value) */
    uint64_t h = 0;
    static uint8_t val[GMTF_FS_XATTR_SIZE_MAX];
    for (long i = 0; i < n;) {
        const char *name = list + i;
        long vl = gmtf_fs_getxattr(fs, ino, name, val, sizeof val);
        uint64_t vh = vl >= 0 ? cd_hash(val, (size_t)vl) : (uint64_t)vl;
        h += mix64(str_hash(name) ^ mix64(vh));
        i += (long)strlen(name) + 1;
    }
    return h ? h : 1;
}

static void attr_from(attrv *a, const struct stat *st, uint64_t xh)
{
    memset(a, 0, sizeof *a);
    a->mode = st->st_mode;
    a->uid = st->st_uid;
    a->gid = st->st_gid;
    a->xh = xh;
    if (S_ISDIR(st->st_mode))
        return; /* a directory's size, links and times follow its entries */
    a->nlink = (uint32_t)st->st_nlink;
    a->rdev = st->st_rdev;
    a->size = (uint64_t)st->st_size;
    a->mt_s = st->st_mtim.tv_sec;
    a->mt_ns = (uint32_t)st->st_mtim.tv_nsec;
    a->ct_s = st->st_ctim.tv_sec;
    a->ct_ns = (uint32_t)st->st_ctim.tv_nsec;
}

static int attr_eq(const attrv *a, const attrv *b)
{
    return a->mode == b->mode && a->uid == b->uid && a->gid == b->gid && a->nlink == b->nlink &&
           a->rdev == b->rdev && a->size == b->size && a->xh == b->xh && a->mt_s == b->mt_s &&
           a->mt_ns == b->mt_ns && a->ct_s == b->ct_s && a->ct_ns == b->ct_ns;
}

static void attr_print(const char *what, const attrv *a)
{
    fprintf(stderr,
            "      %s: mode %o uid %u gid %u nlink %u size %llu mtime %lld.%09u ctime "
            "%lld.%09u xattrs %016llx (after op %llu)\n",
            what, a->mode, a->uid, a->gid, a->nlink, (unsigned long long)a->size,
            (long long)a->mt_s, a->mt_ns, (long long)a->ct_s, a->ct_ns, (unsigned long long)a->xh,
            (unsigned long long)a->seq);
}

/* ---- nodes ---------------------------------------------------------------------------- */

static int node_find(cm_model *m, uint64_t ino, uint64_t gen)
{
    for (size_t i = m->nn; i-- > 0;)
        if (m->nodes[i].ino == ino && m->nodes[i].gen == gen)
            return (int)i;
    return -1;
}

static int node_add(cm_model *m, uint64_t ino, uint64_t gen, uint32_t type)
{
    GROW(m->nodes, m->nn, m->cn);
    node *n = &m->nodes[m->nn];
    memset(n, 0, sizeof *n);
    n->ino = ino;
    n->gen = gen;
    n->type = type;
    n->alive = 1;
    n->cache_seq = -2;
    return (int)m->nn++;
}

static void cur_set_size(node *n, uint64_t size)
{
    if (size > n->cur_cap) {
        uint64_t cap = n->cur_cap ? n->cur_cap : 4096;
        while (cap < size)
            cap *= 2;
        n->cur = xrealloc(n->cur, cap);
        n->cur_cap = cap;
    }
    if (size > n->cur_size)
        memset(n->cur + n->cur_size, 0, size - n->cur_size);
    n->cur_size = size;
}

static void apply_dop(uint8_t **buf, uint64_t *size, uint64_t *cap, const dop *d)
{
    node tmp = {.cur = *buf, .cur_size = *size, .cur_cap = *cap};
    switch (d->kind) {
    case 'W':
        if (d->off + d->len > tmp.cur_size)
            cur_set_size(&tmp, d->off + d->len);
        if (d->len)
            memcpy(tmp.cur + d->off, d->data, d->len);
        break;
    case 'X':
        tmp.cur_size = 0;
        cur_set_size(&tmp, d->len);
        if (d->len)
            memcpy(tmp.cur, d->data, d->len);
        break;
    case 'T':
        if (d->off < tmp.cur_size)
            tmp.cur_size = d->off;
        else
            cur_set_size(&tmp, d->off);
        break;
    case 'P':
        if (d->off < tmp.cur_size) {
            uint64_t e = d->off + d->len < tmp.cur_size ? d->off + d->len : tmp.cur_size;
            memset(tmp.cur + d->off, 0, e - d->off);
        }
        break;
    }
    *buf = tmp.cur;
    *size = tmp.cur_size;
    *cap = tmp.cur_cap;
}

static void node_dop(cm_model *m, int ni, char kind, uint64_t off, uint64_t len, const void *data)
{
    node *n = &m->nodes[ni];
    GROW(n->dops, n->ndops, n->cdops);
    dop *d = &n->dops[n->ndops++];
    *d = (dop){.seq = m->seq, .kind = kind, .off = off, .len = len};
    if (data) {
        d->data = xmalloc(len);
        if (len)
            memcpy(d->data, data, len);
    }
    apply_dop(&n->cur, &n->cur_size, &n->cur_cap, d);
}

/* Content of node at seq a (all ops with seq <= a), cached. */
static const uint8_t *node_content_at(node *n, int64_t a, uint64_t *size)
{
    if (n->cache_seq != a) {
        n->cache_size = 0;
        for (size_t i = 0; i < n->ndops && (int64_t)n->dops[i].seq <= a; i++)
            apply_dop(&n->cache, &n->cache_size, &n->cache_cap, &n->dops[i]);
        n->cache_seq = a;
    }
    *size = n->cache_size;
    return n->cache;
}

/* Index of the last version with seq <= a (0 if none). */
static size_t ver_floor(const attrv *v, size_t n, int64_t a)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if ((int64_t)v[i].seq <= a)
            k = i;
    return k;
}

/* ---- observing the live filesystem ------------------------------------------------ */

static void observe(cm_model *m)
{
    ent *e;
    size_t n;
    uint64_t h;
    int rc = walk_fs(m->fs, &e, &n, &h);
    if (rc) {
        fprintf(stderr, "crash model: walking the live filesystem: %s\n", strerror(-rc));
        abort();
    }
    free(m->cur);
    m->cur = e;
    m->ncur = n;
    if (!m->nns || m->ns[m->nns - 1].hash != h) {
        GROW(m->ns, m->nns, m->cns);
        nsver *v = &m->ns[m->nns++];
        v->seq = m->seq;
        v->hash = h;
        v->n = n;
        v->e = xmalloc(n * sizeof *e);
        if (n)
            memcpy(v->e, e, n * sizeof *e);
    }
    for (size_t i = 0; i < m->nn; i++)
        m->nodes[i].named = 0;
    m->nodes[CM_ROOT].named = 1;
    for (size_t i = 0; i < n; i++) {
        int ni = node_find(m, e[i].ino, e[i].gen);
        if (ni < 0)
            ni = node_add(m, e[i].ino, e[i].gen, e[i].type);
        m->nodes[ni].named = 1;
    }
    for (size_t i = 0; i < m->nn; i++) {
        node *nd = &m->nodes[i];
        nd->alive = nd->named || nd->nopen > 0;
        if (!nd->alive)
            continue;
        struct stat st;
        if (gmtf_fs_getattr(m->fs, nd->ino, &st)) {
            nd->alive = 0;
            continue;
        }
        attrv a;
        attr_from(&a, &st, xattr_hash(m->fs, nd->ino));
        a.seq = m->seq;
        if (!nd->nvers || !attr_eq(&nd->vers[nd->nvers - 1], &a)) {
            GROW(nd->vers, nd->nvers, nd->cvers);
            nd->vers[nd->nvers++] = a;
        }
    }
}

/* ---- the model ------------------------------------------------------------------------ */

cm_model *cm_new(cdev *d, const gmtf_fs_options *opt)
{
    cm_model *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->dev = d;
    if (opt)
        m->opt = *opt;
    else
        m->opt = (gmtf_fs_options){.threads = 1,
                                   .journal_bytes = 16u << 10,
                                   .dirty_bytes = 256u << 10,
                                   .cache_bytes = 4u << 20,
                                   .log = quiet};
    node_add(m, GMTF_ROOT_INO, 0, S_IFDIR);
    snprintf(m->name, sizeof m->name, "crash");
    m->trace = getenv("GMTF_CRASH_TRACE") != NULL;
    m->paranoid = getenv("GMTF_CRASH_PARANOID") != NULL;
    return m;
}

void cm_set_name(cm_model *m, const char *name)
{
    snprintf(m->name, sizeof m->name, "%s", name);
}

void cm_free(cm_model *m)
{
    if (!m)
        return;
    if (m->fs)
        gmtf_fs_unmount(m->fs);
    for (size_t i = 0; i < m->nn; i++) {
        node *n = &m->nodes[i];
        for (size_t k = 0; k < n->ndops; k++)
            free(n->dops[k].data);
        free(n->dops);
        free(n->vers);
        free(n->cur);
        free(n->cache);
        free(n->target);
    }
    for (size_t i = 0; i < m->nns; i++)
        free(m->ns[i].e);
    free(m->ns);
    free(m->nodes);
    free(m->acks);
    free(m->cur);
    free(m);
}

gmtf_fs *cm_fs(cm_model *m)
{
    return m->fs;
}

cdev *cm_dev(cm_model *m)
{
    return m->dev;
}

uint64_t cm_ino(cm_model *m, int node)
{
    return m->nodes[node].ino;
}

int cm_node_is_dir(cm_model *m, int ni)
{
    return S_ISDIR(m->nodes[ni].type);
}

int cm_node_is_file(cm_model *m, int ni)
{
    return S_ISREG(m->nodes[ni].type);
}

uint64_t cm_size(cm_model *m, int ni)
{
    return m->nodes[ni].cur_size;
}

uint8_t *cm_content(cm_model *m, int ni, uint64_t *size)
{
    node *n = &m->nodes[ni];
    uint8_t *p = xmalloc(n->cur_size);
    if (n->cur_size)
        memcpy(p, n->cur, n->cur_size);
    *size = n->cur_size;
    return p;
}

const char *cm_name(cm_model *m, int ni)
{
    if (ni == CM_ROOT)
        return "/";
    const char *parts[64];
    int np = 0;
    uint64_t ino = m->nodes[ni].ino;
    while (np < 64 && ino != GMTF_ROOT_INO) {
        size_t i = 0;
        while (i < m->ncur && m->cur[i].ino != ino)
            i++;
        if (i == m->ncur) {
            parts[np++] = "?";
            break;
        }
        parts[np++] = m->cur[i].name;
        ino = m->cur[i].parent;
    }
    size_t len = 0;
    m->pathbuf[0] = 0;
    while (np-- > 0) {
        size_t k = strlen(parts[np]);
        if (len + k + 2 > sizeof m->pathbuf)
            break;
        m->pathbuf[len++] = '/';
        memcpy(m->pathbuf + len, parts[np], k + 1);
        len += k;
    }
    return m->pathbuf;
}

int cm_lookup(cm_model *m, int dir, const char *name)
{
    gmtf_entry e;
    if (gmtf_fs_lookup(m->fs, m->nodes[dir].ino, name, &e))
        return -1;
    return node_find(m, e.attr.st_ino, e.generation);
}

size_t cm_entries(cm_model *m, int *dirs, char nm[][64], int *nodes, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < m->ncur && k < cap; i++) {
        int d = -1;
        for (size_t j = 0; j < m->nn && d < 0; j++)
            if (m->nodes[j].ino == m->cur[i].parent && m->nodes[j].named &&
                S_ISDIR(m->nodes[j].type))
                d = (int)j;
        if (d < 0)
            continue;
        dirs[k] = d;
        snprintf(nm[k], 64, "%s", m->cur[i].name);
        nodes[k++] = node_find(m, m->cur[i].ino, m->cur[i].gen);
    }
    return k;
}

static void add_ack(cm_model *m, int kind, int ni, size_t logpos)
{
    GROW(m->acks, m->nacks, m->cacks);
    m->acks[m->nacks++] = (ack){.seq = m->seq, .logpos = logpos, .kind = kind, .node = ni};
    if (m->paranoid && m->fs) { /* a crash right now (debugging: finds the first bad sync) */
        char desc[80];
        snprintf(desc, sizeof desc, "paranoid check after op %llu", (unsigned long long)m->seq);
        int was = cdev_fault_pause(m->dev, 1);
        observe(m);
        if (cm_check_state(m, m->dev->p, m->dev->len, m->dev->n, desc, CM_CHECK_NO_RW))
            abort();
        cdev_fault_pause(m->dev, was);
    }
}

int cm_mount(cm_model *m)
{
    if (m->fs)
        return -EBUSY;
    gmtf_fs *fs;
    int rc = gmtf_fs_mount(cdev_attach(m->dev), &m->opt, &fs);
    if (rc)
        return rc;
    m->fs = fs;
    m->seq++;
    for (size_t i = 0; i < m->nn; i++)
        m->nodes[i].nopen = 0;
    observe(m);
    return 0;
}

int cm_unmount(cm_model *m)
{
    int rc = gmtf_fs_unmount(m->fs);
    TRACE(m, "unmount: %d", rc);
    m->fs = NULL;
    m->seq++;
    for (size_t i = 0; i < m->nn; i++)
        m->nodes[i].nopen = 0;
    if (!rc)
        add_ack(m, ACK_ALL, -1, m->dev->n);
    return rc;
}

/* The model takes what the live filesystem holds now as every file's
 * content (after a crash, or a failed operation). */
static void resync_all(cm_model *m)
{
    for (size_t i = 0; i < m->nn; i++) {
        node *n = &m->nodes[i];
        if (!n->named || !S_ISREG(n->type))
            continue;
        struct stat st;
        if (gmtf_fs_getattr(m->fs, n->ino, &st))
            continue;
        uint64_t size = (uint64_t)st.st_size;
        uint8_t *b = xmalloc(size);
        long r = size ? gmtf_fs_read(m->fs, n->ino, b, size, 0) : 0;
        if (r != (long)size) {
            fprintf(stderr, "crash model: reading %s after a crash: %ld\n", cm_name(m, (int)i), r);
            abort();
        }
        node_dop(m, (int)i, 'X', 0, size, b);
        free(b);
    }
}

/* The filesystem is gone (a crash, or an unmount that failed): a mount
 * of what the disk holds, checked against the model, becomes the model. */
static int mount_what_is_left(cm_model *m)
{
    size_t barrier = m->dev->n;
    cdev_power_cut(m->dev); /* what was issued is decided */
    cdev_power_on(m->dev);
    for (size_t i = 0; i < m->nn; i++)
        m->nodes[i].nopen = 0;
    gmtf_fs *fs;
    int rc = gmtf_fs_mount(cdev_attach(m->dev), &m->opt, &fs);
    if (rc)
        return rc;
    m->fs = fs;
    int was = cdev_fault_pause(m->dev, 1);
    if (cm_verify(m, fs, barrier, "the state a crash left, mounted")) {
        cdev_fault_pause(m->dev, was);
        return -EUCLEAN;
    }
    m->seq++;
    observe(m); /* which files have names now (an unlink may be undone) */
    resync_all(m);
    observe(m);
    cdev_fault_pause(m->dev, was);
    /* What the disk held at the crash is durable: the barrier decided it. */
    add_ack(m, ACK_ALL, -1, barrier + 1);
    return 0;
}

int cm_crash_and_mount(cm_model *m)
{
    TRACE(m, "crash");
    cdev_power_cut(m->dev);
    gmtf_fs_unmount(m->fs); /* frees memory; its writes go nowhere */
    m->fs = NULL;
    cdev_power_on(m->dev);
    return mount_what_is_left(m);
}

int cm_mount_after_failure(cm_model *m)
{
    if (m->fs) {
        gmtf_fs_unmount(m->fs);
        m->fs = NULL;
    }
    return mount_what_is_left(m);
}

/* A new inode's (number, generation) is one no inode had before, in this
 * mount or an earlier one, crashed or not (gmtf_fs.h): nodes are matched by
 * both, so a pair given out again would make the new inode the old one's
 * continuation (seed 491696: a file taken for the directory a crash lost). */
static void new_pair(cm_model *m, int rc, const gmtf_entry *e)
{
    if (rc || node_find(m, e->attr.st_ino, e->generation) < 0)
        return;
    fprintf(stderr, "crash model: [%s] the filesystem gave out inode %llu generation %llu again\n",
            m->name, (unsigned long long)e->attr.st_ino, (unsigned long long)e->generation);
    abort();
}

static int after_create(cm_model *m, int rc, const gmtf_entry *e, int *node)
{
    observe(m);
    if (rc)
        return rc;
    int ni = node_find(m, e->attr.st_ino, e->generation);
    if (ni < 0) {
        fprintf(stderr, "crash model: created inode %llu not found in the namespace\n",
                (unsigned long long)e->attr.st_ino);
        abort();
    }
    if (node)
        *node = ni;
    return 0;
}

int cm_create(cm_model *m, int dir, const char *name, mode_t mode, int *node)
{
    gmtf_entry e;
    m->seq++;
    int rc = gmtf_fs_create(m->fs, m->nodes[dir].ino, name, mode, 0, 0, 0, &e);
    TRACE(m, "create %llu/%s: %d (ino %llu)", (unsigned long long)m->nodes[dir].ino, name, rc,
          rc ? 0ull : (unsigned long long)e.attr.st_ino);
    if (!rc) {
        /* counted open before observing, so it stays alive */
        new_pair(m, rc, &e);
        int ni = node_add(m, e.attr.st_ino, e.generation, S_IFREG);
        m->nodes[ni].nopen++;
    }
    return after_create(m, rc, &e, node);
}

int cm_mkdir(cm_model *m, int dir, const char *name, mode_t mode, int *node)
{
    gmtf_entry e;
    m->seq++;
    int rc = gmtf_fs_mkdir(m->fs, m->nodes[dir].ino, name, mode, 0, 0, &e);
    new_pair(m, rc, &e);
    return after_create(m, rc, &e, node);
}

int cm_symlink(cm_model *m, int dir, const char *name, const char *target, int *node)
{
    gmtf_entry e;
    m->seq++;
    int rc = gmtf_fs_symlink(m->fs, m->nodes[dir].ino, name, target, 0, 0, &e);
    new_pair(m, rc, &e);
    int ni = -1;
    rc = after_create(m, rc, &e, &ni);
    if (!rc) {
        free(m->nodes[ni].target);
        m->nodes[ni].target = strdup(target);
        if (node)
            *node = ni;
    }
    return rc;
}

int cm_mknod(cm_model *m, int dir, const char *name, mode_t mode, int *node)
{
    gmtf_entry e;
    m->seq++;
    int rc = gmtf_fs_mknod(m->fs, m->nodes[dir].ino, name, mode, 0, 0, 0, &e);
    new_pair(m, rc, &e);
    return after_create(m, rc, &e, node);
}

int cm_link(cm_model *m, int ni, int dir, const char *name)
{
    gmtf_entry e;
    m->seq++;
    int rc = gmtf_fs_link(m->fs, m->nodes[ni].ino, m->nodes[dir].ino, name, &e);
    TRACE(m, "link ino %llu as %llu/%s: %d", (unsigned long long)m->nodes[ni].ino,
          (unsigned long long)m->nodes[dir].ino, name, rc);
    observe(m);
    return rc;
}

int cm_unlink(cm_model *m, int dir, const char *name)
{
    m->seq++;
    int rc = gmtf_fs_unlink(m->fs, m->nodes[dir].ino, name);
    TRACE(m, "unlink %llu/%s: %d", (unsigned long long)m->nodes[dir].ino, name, rc);
    observe(m);
    return rc;
}

int cm_rmdir(cm_model *m, int dir, const char *name)
{
    m->seq++;
    int rc = gmtf_fs_rmdir(m->fs, m->nodes[dir].ino, name);
    observe(m);
    return rc;
}

int cm_rename(cm_model *m, int dir, const char *name, int newdir, const char *newname,
              unsigned flags)
{
    m->seq++;
    int rc = gmtf_fs_rename(m->fs, m->nodes[dir].ino, name, m->nodes[newdir].ino, newname, flags);
    TRACE(m, "rename %llu/%s -> %llu/%s flags %u: %d", (unsigned long long)m->nodes[dir].ino, name,
          (unsigned long long)m->nodes[newdir].ino, newname, flags, rc);
    observe(m);
    return rc;
}

long cm_write(cm_model *m, int ni, uint64_t off, const void *data, size_t len)
{
    m->seq++;
    long rc = gmtf_fs_write(m->fs, m->nodes[ni].ino, data, len, off);
    TRACE(m, "write ino %llu off %llu len %zu: %ld", (unsigned long long)m->nodes[ni].ino,
          (unsigned long long)off, len, rc);
    if (rc == (long)len)
        node_dop(m, ni, 'W', off, len, data);
    else if (rc < 0) /* it may have landed in part: cm_resync_node decides */
        node_dop(m, ni, 'M', off, len, data);
    observe(m);
    return rc;
}

int cm_truncate(cm_model *m, int ni, uint64_t size)
{
    struct stat st = {.st_size = (off_t)size};
    m->seq++;
    int rc = gmtf_fs_setattr(m->fs, m->nodes[ni].ino, &st, GMTF_SET_SIZE, NULL);
    TRACE(m, "truncate ino %llu to %llu: %d", (unsigned long long)m->nodes[ni].ino,
          (unsigned long long)size, rc);
    if (!rc)
        node_dop(m, ni, 'T', size, 0, NULL);
    observe(m);
    return rc;
}

int cm_punch(cm_model *m, int ni, uint64_t off, uint64_t len)
{
    m->seq++;
    int rc = gmtf_fs_fallocate(m->fs, m->nodes[ni].ino,
                               GMTF_FALLOC_PUNCH_HOLE | GMTF_FALLOC_KEEP_SIZE, off, len);
    TRACE(m, "punch ino %llu off %llu len %llu: %d", (unsigned long long)m->nodes[ni].ino,
          (unsigned long long)off, (unsigned long long)len, rc);
    if (!rc) {
        node_dop(m, ni, 'P', off, len, NULL);
    } else if (rc != -EINVAL && off < m->nodes[ni].cur_size) {
        /* it may have zeroed part of the range: cm_resync_node decides */
        uint64_t n = len < m->nodes[ni].cur_size - off ? len : m->nodes[ni].cur_size - off;
        uint8_t *z = calloc(n ? n : 1, 1);
        if (!z)
            abort();
        node_dop(m, ni, 'M', off, n, z);
        free(z);
    }
    observe(m);
    return rc;
}

int cm_extend(cm_model *m, int ni, uint64_t off, uint64_t len)
{
    m->seq++;
    int rc = gmtf_fs_fallocate(m->fs, m->nodes[ni].ino, 0, off, len);
    TRACE(m, "extend ino %llu to %llu: %d", (unsigned long long)m->nodes[ni].ino,
          (unsigned long long)(off + len), rc);
    if (!rc && off + len > m->nodes[ni].cur_size)
        node_dop(m, ni, 'T', off + len, 0, NULL);
    observe(m);
    return rc;
}

int cm_chmod(cm_model *m, int ni, mode_t mode)
{
    struct stat st = {.st_mode = mode};
    m->seq++;
    int rc = gmtf_fs_setattr(m->fs, m->nodes[ni].ino, &st, GMTF_SET_MODE, NULL);
    observe(m);
    return rc;
}

int cm_setxattr(cm_model *m, int ni, const char *name, const void *v, size_t len)
{
    m->seq++;
    int rc = gmtf_fs_setxattr(m->fs, m->nodes[ni].ino, name, v, len, 0);
    observe(m);
    return rc;
}

int cm_removexattr(cm_model *m, int ni, const char *name)
{
    m->seq++;
    int rc = gmtf_fs_removexattr(m->fs, m->nodes[ni].ino, name);
    observe(m);
    return rc;
}

int cm_open(cm_model *m, int ni, int trunc)
{
    m->seq++;
    int rc = gmtf_fs_open(m->fs, m->nodes[ni].ino, trunc ? O_TRUNC : 0);
    TRACE(m, "open ino %llu%s: %d", (unsigned long long)m->nodes[ni].ino, trunc ? " O_TRUNC" : "",
          rc);
    if (!rc) {
        m->nodes[ni].nopen++;
        if (trunc && m->nodes[ni].cur_size)
            node_dop(m, ni, 'T', 0, 0, NULL);
    }
    observe(m);
    return rc;
}

int cm_release(cm_model *m, int ni)
{
    m->seq++;
    int rc = gmtf_fs_release(m->fs, m->nodes[ni].ino);
    TRACE(m, "release ino %llu: %d", (unsigned long long)m->nodes[ni].ino, rc);
    if (!rc && m->nodes[ni].nopen)
        m->nodes[ni].nopen--;
    observe(m);
    return rc;
}

int cm_fsync(cm_model *m, int ni, int datasync)
{
    m->seq++;
    int rc = gmtf_fs_fsync(m->fs, m->nodes[ni].ino, datasync);
    TRACE(m, "%s ino %llu: %d", datasync ? "fdatasync" : "fsync",
          (unsigned long long)m->nodes[ni].ino, rc);
    if (!rc)
        add_ack(m, datasync ? ACK_FDATASYNC : ACK_FSYNC, ni, m->dev->n);
    observe(m);
    return rc;
}

int cm_syncfs(cm_model *m)
{
    m->seq++;
    int rc = gmtf_fs_syncfs(m->fs);
    TRACE(m, "syncfs: %d", rc);
    if (!rc)
        add_ack(m, ACK_ALL, -1, m->dev->n);
    observe(m);
    return rc;
}

/* ---- checking a filesystem against the model -------------------------------------- */

typedef struct floors {
    int64_t ns, all;
    int64_t *data, *attr; /* per node */
} floors;

static void floors_get(cm_model *m, size_t crash_pos, floors *f)
{
    f->ns = f->all = -1;
    f->data = xmalloc(m->nn * sizeof *f->data);
    f->attr = xmalloc(m->nn * sizeof *f->attr);
    for (size_t i = 0; i < m->nn; i++)
        f->data[i] = f->attr[i] = -1;
    for (size_t i = 0; i < m->nacks; i++) {
        const ack *a = &m->acks[i];
        if (a->logpos > crash_pos)
            continue;
        int64_t s = (int64_t)a->seq;
        if (s > f->ns)
            f->ns = s;
        if (a->kind == ACK_ALL) {
            if (s > f->all)
                f->all = s;
        } else if (a->node >= 0) {
            if (s > f->data[a->node])
                f->data[a->node] = s;
            if (a->kind == ACK_FSYNC && s > f->attr[a->node])
                f->attr[a->node] = s;
        }
    }
}

static void report(cm_model *m, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(cm_model *m, const char *label, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  [%s] %s: ", m->name, label);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void ns_diff(const ent *a, size_t na, const ent *b, size_t nb)
{
    int shown = 0;
    for (size_t i = 0; i < na && shown < 6; i++) {
        size_t k = 0;
        while (k < nb && !(b[k].parent == a[i].parent && b[k].ino == a[i].ino &&
                           b[k].gen == a[i].gen && !strcmp(b[k].name, a[i].name)))
            k++;
        if (k == nb) {
            fprintf(stderr, "      found only here: dir %llu '%s' -> ino %llu gen %llu\n",
                    (unsigned long long)a[i].parent, a[i].name, (unsigned long long)a[i].ino,
                    (unsigned long long)a[i].gen);
            shown++;
        }
    }
    for (size_t i = 0; i < nb && shown < 12; i++) {
        size_t k = 0;
        while (k < na && !(a[k].parent == b[i].parent && a[k].ino == b[i].ino &&
                           a[k].gen == b[i].gen && !strcmp(a[k].name, b[i].name)))
            k++;
        if (k == na) {
            fprintf(stderr, "      expected, missing: dir %llu '%s' -> ino %llu gen %llu\n",
                    (unsigned long long)b[i].parent, b[i].name, (unsigned long long)b[i].ino,
                    (unsigned long long)b[i].gen);
            shown++;
        }
    }
}

/* Each byte of c[0, size) against node's history from seq a on. */
static int check_bytes(cm_model *m, node *n, const uint8_t *c, uint64_t size, int64_t a,
                       const char *label, const char *path)
{
    uint64_t asize;
    const uint8_t *v = node_content_at(n, a, &asize);
    uint64_t zmin = asize;
    size_t first_later = 0;
    while (first_later < n->ndops && (int64_t)n->dops[first_later].seq <= a)
        first_later++;
    for (size_t i = first_later; i < n->ndops; i++)
        if (n->dops[i].kind == 'T' && n->dops[i].off < zmin)
            zmin = n->dops[i].off;
    size_t kv = ver_floor(n->vers, n->nvers, a);
    for (size_t i = kv; i < n->nvers; i++)
        if (n->vers[i].size < zmin)
            zmin = n->vers[i].size;
    /* fast path: the bytes at seq a */
    uint64_t same = size < asize ? size : asize;
    if (size == asize && (!size || !memcmp(c, v, size)))
        return 0;
    uint8_t *ok = calloc(size ? size : 1, 1);
    if (!ok)
        abort();
    for (uint64_t o = 0; o < size; o += 4096) {
        uint64_t e = o + 4096 < size ? o + 4096 : size;
        if (e <= same && !memcmp(c + o, v + o, e - o)) {
            memset(ok + o, 1, e - o);
            continue;
        }
        for (uint64_t x = o; x < e; x++)
            ok[x] = (x < same && c[x] == v[x]) || (c[x] == 0 && x >= zmin);
    }
    for (size_t i = first_later; i < n->ndops; i++) {
        const dop *d = &n->dops[i];
        if (d->kind == 'W' || d->kind == 'X' || d->kind == 'M') {
            uint64_t e = d->off + d->len < size ? d->off + d->len : size;
            for (uint64_t x = d->off; x < e; x++)
                ok[x] |= d->data[x - d->off] == c[x];
        } else if (d->kind == 'P') {
            uint64_t e = d->off + d->len < size ? d->off + d->len : size;
            for (uint64_t x = d->off; x < e; x++)
                ok[x] |= c[x] == 0;
        }
    }
    uint64_t nbad = 0, firstbad = 0;
    for (uint64_t x = 0; x < size; x++)
        if (!ok[x] && !nbad++)
            firstbad = x;
    free(ok);
    if (!nbad)
        return 0;
    int written = 0;
    for (size_t i = 0; i < n->ndops; i++) {
        const dop *d = &n->dops[i];
        written |= (d->kind == 'W' || d->kind == 'X' || d->kind == 'M') && firstbad >= d->off &&
                   firstbad < d->off + d->len && d->data[firstbad - d->off] == c[firstbad];
    }
    report(m, label,
           "%s (ino %llu): %llu bytes wrong of %llu; first at offset %llu: 0x%02x, %s 0x%02x "
           "(synced at op %lld, size then %llu)%s",
           path, (unsigned long long)n->ino, (unsigned long long)nbad, (unsigned long long)size,
           (unsigned long long)firstbad, c[firstbad],
           firstbad < asize ? "synced byte" : "past the synced size, byte",
           firstbad < asize ? v[firstbad] : 0, (long long)a, (unsigned long long)asize,
           written ? " (a byte written there before the sync)" : " (never written there)");
    if (getenv("GMTF_CRASH_TRACE")) /* the file's history */
        for (size_t i = 0; i < n->ndops; i++)
            fprintf(stderr, "      gen %llu op %llu: %c %llu +%llu%s\n", (unsigned long long)n->gen,
                    (unsigned long long)n->dops[i].seq, n->dops[i].kind,
                    (unsigned long long)n->dops[i].off, (unsigned long long)n->dops[i].len,
                    firstbad >= n->dops[i].off && firstbad < n->dops[i].off + n->dops[i].len
                        ? " (covers it)"
                        : "");
    return 1;
}

static int check_node(cm_model *m, gmtf_fs *fs, int ni, const ent *e, const floors *f,
                      const char *label)
{
    node *n = &m->nodes[ni];
    char path[300];
    snprintf(path, sizeof path, "'%s' in dir %llu", e->name, (unsigned long long)e->parent);
    if (e->type != n->type) {
        report(m, label, "%s: type %o, the model has %o", path, e->type, n->type);
        return 1;
    }
    attrv a;
    attr_from(&a, &e->st, xattr_hash(fs, e->ino));
    int64_t fa = f->attr[ni] > f->all ? f->attr[ni] : f->all;
    int64_t fd = f->data[ni] > fa ? f->data[ni] : fa;
    size_t ka = fa >= 0 ? ver_floor(n->vers, n->nvers, fa) : 0;
    size_t kd = fd >= 0 ? ver_floor(n->vers, n->nvers, fd) : 0;
    int match = 0, size_ok = 0;
    for (size_t k = 0; k < n->nvers; k++) {
        if (k >= ka && attr_eq(&n->vers[k], &a))
            match = 1;
        if (k >= kd && n->vers[k].size == a.size)
            size_ok = 1;
    }
    if (!match || !size_ok) {
        report(m, label, "%s (ino %llu): attributes %s", path, (unsigned long long)n->ino,
               !size_ok ? "hold a size it never had since its last sync"
                        : "are none it had since its last sync");
        attr_print("found   ", &a);
        if (n->nvers)
            attr_print("at sync ", &n->vers[ka]);
        if (n->nvers)
            attr_print("latest  ", &n->vers[n->nvers - 1]);
        return 1;
    }
    if (S_ISLNK(n->type)) {
        char t[4096];
        long r = gmtf_fs_readlink(fs, e->ino, t, sizeof t - 1);
        if (r < 0 || !n->target || (size_t)r != strlen(n->target) || memcmp(t, n->target, r)) {
            report(m, label, "%s: symlink target wrong (%ld)", path, r);
            return 1;
        }
    }
    if (!S_ISREG(n->type))
        return 0;
    uint64_t size = (uint64_t)e->st.st_size;
    uint8_t *c = xmalloc(size);
    long r = size ? gmtf_fs_read(fs, e->ino, c, size, 0) : 0;
    int bad = 0;
    if (r != (long)size) {
        report(m, label, "%s (ino %llu): read of %llu bytes gave %ld", path,
               (unsigned long long)n->ino, (unsigned long long)size, r);
        bad = 1;
    } else {
        bad = check_bytes(m, n, c, size, fd, label, path);
    }
    free(c);
    return bad;
}

int cm_verify(cm_model *m, gmtf_fs *fs, size_t crash_pos, const char *label)
{
    floors f;
    floors_get(m, crash_pos, &f);
    ent *e;
    size_t n;
    uint64_t h;
    int bad = 0;
    int rc = walk_fs(fs, &e, &n, &h);
    if (rc) {
        report(m, label, "walking the tree: %s", strerror(-rc));
        bad = 1;
        goto out;
    }
    size_t k0 = 0;
    for (size_t i = 0; i < m->nns; i++)
        if ((int64_t)m->ns[i].seq <= f.ns)
            k0 = i;
    size_t k = k0;
    while (k < m->nns && m->ns[k].hash != h)
        k++;
    if (k == m->nns) {
        report(m, label,
               "the namespace (%zu entries) is none the filesystem showed since the last "
               "sync (op %lld; %zu namespaces since)",
               n, (long long)f.ns, m->nns - k0);
        fprintf(stderr, "    against the namespace at the last sync:\n");
        ns_diff(e, n, m->ns[k0].e, m->ns[k0].n);
        if (k0 + 1 < m->nns) {
            fprintf(stderr, "    against the latest namespace:\n");
            ns_diff(e, n, m->ns[m->nns - 1].e, m->ns[m->nns - 1].n);
        }
        bad = 1;
        goto out;
    }
    for (size_t i = 0; i < n && bad < 3; i++) {
        int ni = node_find(m, e[i].ino, e[i].gen);
        if (ni < 0) {
            report(m, label, "'%s' names inode %llu gen %llu, never seen", e[i].name,
                   (unsigned long long)e[i].ino, (unsigned long long)e[i].gen);
            bad++;
            continue;
        }
        int dup = 0;
        for (size_t j = 0; j < i; j++)
            dup |= e[j].ino == e[i].ino;
        if (!dup)
            bad += check_node(m, fs, ni, &e[i], &f, label);
    }
out:
    free(e);
    free(f.data);
    free(f.attr);
    return bad ? 1 : 0;
}

uint64_t cm_fs_hash(cm_model *m, gmtf_fs *fs)
{
    (void)m;
    ent *e;
    size_t n;
    uint64_t h;
    if (walk_fs(fs, &e, &n, &h)) {
        free(e);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        h += mix64(e[i].ino * 31 + e[i].st.st_nlink * 7 + (uint64_t)e[i].st.st_size +
                   ((uint64_t)e[i].type << 40));
    free(e);
    return h;
}

uint64_t cm_live_hash(cm_model *m)
{
    return cm_fs_hash(m, m->fs);
}

int cm_verify_live(cm_model *m)
{
    return cm_verify(m, m->fs, SIZE_MAX, "live filesystem");
}

int cm_resync_node(cm_model *m, int ni)
{
    node *n = &m->nodes[ni];
    int was = cdev_fault_pause(m->dev, 1);
    struct stat st;
    int rc = gmtf_fs_getattr(m->fs, n->ino, &st);
    uint64_t size = rc ? 0 : (uint64_t)st.st_size;
    uint8_t *b = xmalloc(size);
    long r = rc || !size ? 0 : gmtf_fs_read(m->fs, n->ino, b, size, 0);
    cdev_fault_pause(m->dev, was);
    if (rc || r != (long)size) {
        free(b);
        return rc ? rc : r < 0 ? (int)r : -EIO;
    }
    /* each byte as before, or as the failed operation (the last 'M') left it */
    const dop *mw = n->ndops && n->dops[n->ndops - 1].kind == 'M' ? &n->dops[n->ndops - 1] : NULL;
    uint64_t bad = 0, first = 0;
    for (uint64_t o = 0; o < size; o++) {
        int ok = (o < n->cur_size && b[o] == n->cur[o]) || (o >= n->cur_size && b[o] == 0) ||
                 (mw && o >= mw->off && o < mw->off + mw->len && b[o] == mw->data[o - mw->off]);
        if (!ok && !bad++)
            first = o;
    }
    int sized = size == n->cur_size || (mw && size == mw->off + mw->len);
    if (bad || !sized) {
        report(m, "after a failed operation",
               "%s (ino %llu): %llu bytes neither old nor new, first at %llu; size %llu (was "
               "%llu)",
               cm_name(m, ni), (unsigned long long)n->ino, (unsigned long long)bad,
               (unsigned long long)first, (unsigned long long)size,
               (unsigned long long)n->cur_size);
        free(b);
        return -EUCLEAN;
    }
    m->seq++;
    node_dop(m, ni, 'X', 0, size, b);
    free(b);
    observe(m);
    return 0;
}

/* ---- whole-state check ------------------------------------------------------------- */

int cm_fsck_rep(cdev *d, int repair, int verify, gmtf_fs_check_report *rep, char *msg,
                size_t msgcap)
{
    msgbuf mb = {.p = msg, .cap = msgcap};
    if (msg && msgcap)
        msg[0] = 0;
    gmtf_fs_check_options co = {
        .repair = repair, .verify_data = verify, .threads = 1, .log = collect, .log_arg = &mb};
    gmtf_image *img = cdev_attach(d);
    int rc = gmtf_fs_check(img, &co, rep);
    gmtf_image_close(img);
    return rc;
}

int cm_fsck_dev(cdev *d, int repair, int verify, unsigned *errors, unsigned *warnings, char *msg,
                size_t msgcap)
{
    gmtf_fs_check_report rep;
    int rc = cm_fsck_rep(d, repair, verify, &rep, msg, msgcap);
    *errors = rc ? 0 : rep.errors;
    *warnings = rc ? 0 : rep.warnings;
    return rc;
}

uint64_t cm_content_hash(gmtf_fs *fs)
{
    ent *e;
    size_t n;
    uint64_t h;
    if (walk_fs(fs, &e, &n, &h)) {
        free(e);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const struct stat *st = &e[i].st;
        uint64_t x = mix64(e[i].ino ^ mix64(st->st_mode ^ mix64(st->st_uid ^ mix64(st->st_gid))));
        x ^= mix64((uint64_t)st->st_nlink * 977 + (uint64_t)st->st_size * 31) +
             xattr_hash(fs, e[i].ino);
        if (S_ISLNK(st->st_mode)) {
            char t[4096];
            long r = gmtf_fs_readlink(fs, e[i].ino, t, sizeof t);
            x ^= r > 0 ? cd_hash((const uint8_t *)t, (size_t)r) : 7;
        } else if (S_ISREG(st->st_mode)) {
            uint8_t *b = xmalloc((size_t)st->st_size);
            long r = st->st_size ? gmtf_fs_read(fs, e[i].ino, b, (size_t)st->st_size, 0) : 0;
            x ^= r == (long)st->st_size ? cd_hash(b, (size_t)r) : (uint64_t)r;
            free(b);
        }
        h += mix64(x);
    }
    free(e);
    return h;
}

int cm_fsck(const uint8_t *p, size_t len, int verify, unsigned *errors, unsigned *warnings,
            char *msg, size_t msgcap)
{
    cdev *d = cdev_new(p, len);
    d->no_write = 1;
    int rc = cm_fsck_dev(d, 0, verify, errors, warnings, msg, msgcap);
    if (!rc && d->writes_seen)
        rc = -EROFS; /* fsck -n wrote */
    cdev_free(d);
    return rc;
}

static gmtf_fs *mount_check(cm_model *m, cdev *d, int ro, msgbuf *mb, int *rc)
{
    gmtf_fs_options o = {.read_only = ro,
                         .threads = 1,
                         .journal_bytes = 64u << 10,
                         .cache_bytes = 4u << 20,
                         .log = collect,
                         .log_arg = mb};
    (void)m;
    gmtf_fs *fs;
    *rc = gmtf_fs_mount(cdev_attach(d), &o, &fs);
    return *rc ? NULL : fs;
}

static void dump_state(cm_model *m, const uint8_t *img, size_t len, const char *desc)
{
    const char *dir = getenv("GMTF_CRASH_DUMP");
    if (!dir || !*dir)
        return;
    size_t num = 0;
    sscanf(desc, "state %zu", &num);
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%zu.img", dir, m->name, num);
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite(img, 1, len, f);
    fclose(f);
    fprintf(stderr, "    bytes written to %s\n", path);
}

int cm_check_state(cm_model *m, const uint8_t *img, size_t len, size_t crash_pos, const char *desc,
                   unsigned flags)
{
    char msg[2048];
    unsigned errs, warns;
    int verify = (flags & CM_CHECK_VERIFY) != 0; /* the oracle reads every byte anyway */
    int bad = 0, rc;
    int rc_fsck = cm_fsck(img, len, verify, &errs, &warns, msg, sizeof msg);
    if (rc_fsck || errs) {
        fprintf(stderr, "  [%s] %s: fsck -n: rc %d, %u errors\n%s", m->name, desc, rc_fsck, errs,
                msg);
        bad = 1;
    }
    msgbuf mb = {.p = msg, .cap = sizeof msg};
    msg[0] = 0;
    cdev *d = cdev_new(img, len);
    d->no_write = 1;
    gmtf_fs *fs = mount_check(m, d, 1, &mb, &rc);
    if (!fs) {
        fprintf(stderr, "  [%s] %s: read-only mount: %s\n%s", m->name, desc, strerror(-rc), msg);
        bad = 1;
    } else {
        char label[700];
        snprintf(label, sizeof label, "%s, read-only", desc);
        bad |= cm_verify(m, fs, crash_pos, label);
        gmtf_fs_unmount(fs);
        if (d->writes_seen) {
            fprintf(stderr, "  [%s] %s: a read-only mount wrote %zu times\n", m->name, desc,
                    d->writes_seen);
            bad = 1;
        }
    }
    d->no_write = 0;
    if (!(flags & CM_CHECK_NO_RW) && !bad) {
        char label[700];
        mb.len = 0;
        mb.lines = 0;
        msg[0] = 0;
        fs = mount_check(m, d, 0, &mb, &rc);
        if (!fs) {
            fprintf(stderr, "  [%s] %s: read-write mount: %s\n%s", m->name, desc, strerror(-rc),
                    msg);
            bad = 1;
        } else { /* what it recovered is checked after its unmount and fsck -y */
            rc = gmtf_fs_unmount(fs);
            if (rc) {
                fprintf(stderr, "  [%s] %s: unmount: %s\n", m->name, desc, strerror(-rc));
                bad = 1;
            }
        }
        if (!bad) {
            rc = cm_fsck_dev(d, 1, 0, &errs, &warns, msg, sizeof msg);
            unsigned e2 = 0;
            int rc2 = rc ? rc : cm_fsck(d->p, d->len, 0, &e2, &warns, msg, sizeof msg);
            if (rc || rc2 || errs || e2) {
                fprintf(stderr,
                        "  [%s] %s: after a read-write mount: fsck -y rc %d, %u errors; then "
                        "fsck -n rc %d, %u errors\n%s",
                        m->name, desc, rc, errs, rc2, e2, msg);
                bad = 1;
            }
        }
        if (!bad) {
            snprintf(label, sizeof label, "%s, after rw mount and fsck -y", desc);
            d->no_write = 1;
            fs = mount_check(m, d, 1, &mb, &rc);
            if (!fs) {
                fprintf(stderr, "  [%s] %s: mount: %s\n", m->name, label, strerror(-rc));
                bad = 1;
            } else {
                bad |= cm_verify(m, fs, crash_pos, label);
                gmtf_fs_unmount(fs);
            }
        }
    }
    cdev_free(d);
    if (bad)
        dump_state(m, img, len, desc);
    return bad;
}
