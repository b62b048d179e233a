/* Space allocation. The free map is not stored on disk: at mount it is the
 * complement of everything the metadata references (frames, snapshot,
 * journal). Space freed while mounted waits on a pending list until the
 * record that freed it is durable, so a crash never finds live data
 * overwritten. */
#include "fs_internal.h"

void ev_free(extvec *e)
{
    free(e->v);
    memset(e, 0, sizeof *e);
}

static size_t ev_lower(const extvec *e, uint64_t off)
{
    size_t lo = 0, hi = e->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e->v[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int ev_add(extvec *e, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    size_t i = ev_lower(e, off);
    int left = i > 0 && e->v[i - 1].off + e->v[i - 1].len == off;
    int right = i < e->n && off + len == e->v[i].off;
    if (left && right) {
        e->v[i - 1].len += len + e->v[i].len;
        memmove(e->v + i, e->v + i + 1, (e->n - i - 1) * sizeof *e->v);
        e->n--;
        return 0;
    }
    if (left) {
        e->v[i - 1].len += len;
        return 0;
    }
    if (right) {
        e->v[i].off = off;
        e->v[i].len += len;
        return 0;
    }
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        struct ext *v = realloc(e->v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        e->v = v;
        e->cap = cap;
    }
    memmove(e->v + i + 1, e->v + i, (e->n - i) * sizeof *e->v);
    e->v[i].off = off;
    e->v[i].len = len;
    e->n++;
    return 0;
}

static uint64_t capacity_of(gmtf_fs *fs)
{
    return fs->sb.capacity ? fs->sb.capacity : UINT64_MAX / 2;
}

int alloc_space(gmtf_fs *fs, uint64_t len, uint64_t *off)
{
    if (len == 0) {
        *off = 0;
        return 0;
    }
    /* First fit from the start keeps the image compact, so its end can be
     * given back to the host. */
    for (size_t i = 0; i < fs->free.n; i++) {
        struct ext *x = &fs->free.v[i];
        if (x->len < len)
            continue;
        *off = x->off;
        x->off += len;
        x->len -= len;
        if (x->len == 0) {
            memmove(x, x + 1, (fs->free.n - i - 1) * sizeof *x);
            fs->free.n--;
        }
        fs->used += len;
        return 0;
    }
    uint64_t start = fs->end;
    /* The tail free extent (if it touches the end) is extended in place. */
    if (fs->free.n && fs->free.v[fs->free.n - 1].off + fs->free.v[fs->free.n - 1].len == fs->end)
        start = fs->free.v[fs->free.n - 1].off;
    if (start + len > capacity_of(fs) || start + len < start)
        return -ENOSPC;
    if (start != fs->end)
        fs->free.n--;
    *off = start;
    fs->end = start + len;
    fs->used += len;
    return 0;
}

void alloc_release_now(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (!len)
        return;
    fs->used -= len < fs->used ? len : fs->used;
    if (ev_add(&fs->free, off, len))
        fs_log(fs, "out of memory: %llu bytes at %llu leak until remount",
               (unsigned long long)len, (unsigned long long)off);
}

void alloc_release(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (!len)
        return;
    if (fs->replaying) /* the free map is rebuilt after replay */
        return;
    if (ev_add(&fs->pending, off, len))
        fs_log(fs, "out of memory: %llu bytes at %llu leak until remount",
               (unsigned long long)len, (unsigned long long)off);
}

void alloc_commit_pending(gmtf_fs *fs)
{
    for (size_t i = 0; i < fs->pending.n; i++)
        alloc_release_now(fs, fs->pending.v[i].off, fs->pending.v[i].len);
    fs->pending.n = 0;
}

static int ext_cmp(const void *a, const void *b)
{
    const struct ext *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

int alloc_rebuild(gmtf_fs *fs)
{
    size_t n = 0, cap = fs->live_frames + 2;
    struct ext *v = malloc(cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    for (uint32_t id = 1; id < fs->nframes; id++)
        if (fs->frames[id].clen && n < cap)
            v[n++] = (struct ext){fs->frames[id].off, fs->frames[id].clen};
    if (fs->sb.snap_len && n < cap)
        v[n++] = (struct ext){fs->sb.snap_off, fs->sb.snap_len};
    if (fs->sb.jrnl_len && n < cap)
        v[n++] = (struct ext){fs->sb.jrnl_off, fs->sb.jrnl_len};
    qsort(v, n, sizeof *v, ext_cmp);
    fs->free.n = 0;
    fs->pending.n = 0;
    fs->held.n = 0;
    uint64_t pos = DATA_START, used = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].off < pos) {
            fs_log(fs, "space at %llu (%llu bytes) is referenced twice",
                   (unsigned long long)v[i].off, (unsigned long long)v[i].len);
            rc = -EUCLEAN;
        } else if (v[i].off > pos && ev_add(&fs->free, pos, v[i].off - pos)) {
            rc = -ENOMEM;
        }
        used += v[i].len;
        if (v[i].off + v[i].len > pos)
            pos = v[i].off + v[i].len;
    }
    fs->end = pos;
    fs->used = used;
    free(v);
    return rc;
}

int alloc_trim_end(gmtf_fs *fs)
{
    if (fs->ro)
        return 0;
    while (fs->free.n) {
        struct ext *x = &fs->free.v[fs->free.n - 1];
        if (x->off + x->len != fs->end)
            break;
        fs->end = x->off;
        fs->free.n--;
    }
    if (fs->img->is_blockdev)
        return 0;
    uint64_t size;
    int rc = fs->img->ops->size(fs->img->ctx, &size);
    if (rc)
        return rc;
    if (size > fs->end)
        return fs->img->ops->truncate(fs->img->ctx, fs->end);
    return 0;
}

uint64_t alloc_free_bytes(gmtf_fs *fs)
{
    uint64_t f = 0;
    for (size_t i = 0; i < fs->free.n; i++)
        f += fs->free.v[i].len;
    return f;
}
