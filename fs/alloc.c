/* Space allocation. The free map is not stored on disk: at mount it is the
 * complement of everything the metadata references (frames, snapshot,
 * journal). Space freed while mounted waits on a pending list until the
 * record that freed it is durable, so a crash never finds live data
 * overwritten. Free space goes back to the host at checkpoints: the tail
 * by truncation, large free extents inside by punching holes. */
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

/* Removes [off, off+len) from e (parts of extents may stay). */
static int ev_remove(extvec *e, uint64_t off, uint64_t len)
{
    uint64_t end = off + len;
    size_t i = ev_lower(e, off);
    if (i > 0 && e->v[i - 1].off + e->v[i - 1].len > off)
        i--; /* the extent before reaches into the range */
    while (i < e->n && e->v[i].off < end) {
        struct ext *x = &e->v[i];
        uint64_t xend = x->off + x->len;
        if (x->off < off && xend > end) { /* the range splits x in two */
            if (e->n == e->cap) {
                size_t cap = e->cap * 2;
                struct ext *v = realloc(e->v, cap * sizeof *v);
                if (!v)
                    return -ENOMEM;
                e->v = v;
                e->cap = cap;
                x = &e->v[i];
            }
            memmove(x + 2, x + 1, (e->n - i - 1) * sizeof *x);
            e->n++;
            x[1] = (struct ext){end, xend - end};
            x->len = off - x->off;
            return 0;
        }
        if (x->off < off) { /* keep the head */
            x->len = off - x->off;
            i++;
        } else if (xend > end) { /* keep the tail */
            x->len = xend - end;
            x->off = end;
            return 0;
        } else { /* inside: drop */
            memmove(x, x + 1, (e->n - i - 1) * sizeof *x);
            e->n--;
        }
    }
    return 0;
}

/* Space handed out again is no longer a hole on the host once written;
 * whole host pages, so that holes stay page-aligned. */
static void unpunch(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (!fs->punched.n)
        return;
    uint64_t a = off / PUNCH_ALIGN * PUNCH_ALIGN, end = off + len;
    if (end < UINT64_MAX - PUNCH_ALIGN)
        end = (end + PUNCH_ALIGN - 1) / PUNCH_ALIGN * PUNCH_ALIGN;
    if (ev_remove(&fs->punched, a, end - a)) {
        /* Out of memory: forget every hole, so none is taken for free space
         * it no longer is (they are punched again, harmlessly). */
        fs->punched.n = 0;
    }
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
    /* Data never takes what the next checkpoint needs (fs->room leaves it
     * out); when space is tight, that space is taken on the host now. */
    if (!fs->loading) {
        if (fs->room < len)
            alloc_room(fs);
        uint64_t need = alloc_ckpt_need(fs);
        if (fs->room >= len && fs->room < 8 * need && fs->spare.len < need) {
            int rc = alloc_spare_ensure(fs);
            if (rc)
                return rc;
        }
        if (fs->room < len)
            return -ENOSPC;
        fs->room -= len;
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
        unpunch(fs, *off, len);
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
    unpunch(fs, start, len);
    return 0;
}

static int alloc_meta_free(gmtf_fs *fs, uint64_t len, uint64_t *off);

int alloc_meta(gmtf_fs *fs, uint64_t len, uint64_t *off)
{
    len = alloc_meta_len(fs, len);
    if (len == 0 || fs->data_start < DATA_START)
        return alloc_space(fs, len, off);
    if (fs->spare.len >= len) { /* kept for this: allocated on the host too */
        *off = fs->spare.off;
        fs->spare.off += len;
        fs->spare.len -= len;
        return 0;
    }
    return alloc_meta_free(fs, len, off);
}

uint64_t alloc_meta_len(const gmtf_fs *fs, uint64_t len)
{
    if (fs->data_start < DATA_START)
        return len; /* a version 1 image: byte-granular, as it was written */
    return (len + META_ALIGN - 1) / META_ALIGN * META_ALIGN;
}

/* Page-aligned space from the free map (or past the end). */
static int alloc_meta_free(gmtf_fs *fs, uint64_t len, uint64_t *off)
{
    /* First fit of an aligned start inside a free extent. */
    for (size_t i = 0; i < fs->free.n; i++) {
        const struct ext *x = &fs->free.v[i];
        uint64_t a = (x->off + META_ALIGN - 1) / META_ALIGN * META_ALIGN;
        if (a >= x->off + x->len || x->off + x->len - a < len)
            continue;
        if (ev_remove(&fs->free, a, len))
            return -ENOMEM;
        *off = a;
        fs->used += len;
        unpunch(fs, a, len);
        return 0;
    }
    /* Past the end: the tail free extent (if it touches the end) and any
     * gap up to the alignment stay free. */
    uint64_t start = fs->end;
    if (fs->free.n && fs->free.v[fs->free.n - 1].off + fs->free.v[fs->free.n - 1].len == fs->end)
        start = fs->free.v[fs->free.n - 1].off;
    uint64_t a = (start + META_ALIGN - 1) / META_ALIGN * META_ALIGN;
    if (a + len > capacity_of(fs) || a + len < a)
        return -ENOSPC;
    if (a > fs->end && ev_add(&fs->free, fs->end, a - fs->end))
        return -ENOMEM;
    if (a < fs->end && ev_remove(&fs->free, a, fs->end - a))
        return -ENOMEM;
    *off = a;
    fs->end = a + len;
    fs->used += len;
    unpunch(fs, a, len);
    return 0;
}

int alloc_claim(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (off + len > fs->end) {
        if (off + len > capacity_of(fs))
            return -ENOSPC;
        if (ev_add(&fs->free, fs->end, off + len - fs->end))
            return -ENOMEM;
        fs->end = off + len;
    }
    return ev_remove(&fs->free, off, len);
}

void alloc_release_now(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (off >= fs->end) /* never this image's space (an old region past the end) */
        return;
    if (len > fs->end - off)
        len = fs->end - off;
    if (!len)
        return;
    fs->used -= len < fs->used ? len : fs->used;
    if (off < fs->data_start) { /* an upgraded image's old metadata: slots now */
        uint64_t cut = fs->data_start - off;
        if (cut >= len)
            return;
        off += cut;
        len -= cut;
    }
    if (ev_add(&fs->free, off, len))
        fs_log(fs, "out of memory: %llu bytes at %llu leak until remount", (unsigned long long)len,
               (unsigned long long)off);
}

void alloc_retire(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (len && ev_add(&fs->retired_cur, off, len))
        fs_log(fs, "out of memory: %llu bytes at %llu leak until remount", (unsigned long long)len,
               (unsigned long long)off);
}

void alloc_release(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (!len)
        return;
    fs->released++; /* flush.c: whether an async flush may wait */
    if (ev_add(&fs->pending, off, len))
        fs_log(fs, "out of memory: %llu bytes at %llu leak until remount", (unsigned long long)len,
               (unsigned long long)off);
}

void alloc_commit_pending(gmtf_fs *fs)
{
    for (size_t i = 0; i < fs->pending.n; i++)
        alloc_release_now(fs, fs->pending.v[i].off, fs->pending.v[i].len);
    fs->pending.n = 0;
}

/* Keeps the parts of v[0..n) below size; returns the new count. */
static size_t ext_clip(struct ext *v, size_t n, uint64_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].off < size) {
            v[k] = v[i];
            if (v[k].len > size - v[k].off)
                v[k].len = size - v[k].off;
            k++;
        }
    return k;
}

/* The snapshot and journal copies sb names, as far as they lie inside the
 * image: what an image claims past its end is not its space (neither
 * referenced at the rebuild nor retired later). */
static size_t sb_regions(const gmtf_fs *fs, const sb_info *sb, struct ext out[4])
{
    size_t n = 0;
    uint64_t sl = sb->version >= FMT_VERSION ? alloc_meta_len(fs, sb->snap_len) : sb->snap_len;
    uint64_t jl = sb->version >= FMT_VERSION ? alloc_meta_len(fs, sb->jrnl_len) : sb->jrnl_len;
    if (sl)
        out[n++] = (struct ext){sb->snap_off, sl};
    if (sl && sb->snap2_off)
        out[n++] = (struct ext){sb->snap2_off, sl};
    if (jl)
        out[n++] = (struct ext){sb->jrnl_off, jl};
    if (jl && sb->jrnl2_off)
        out[n++] = (struct ext){sb->jrnl2_off, jl};
    /* A loaded slot's claims count up to the size the image had at load:
     * once this mount has written past that end, a copy a damaged slot put
     * there would overlap new frames (mutator seed 234: the repair's
     * checkpoint retired a snapshot copy "at" the old end, over a frame it
     * had just written there). */
    uint64_t size;
    if (img_size((gmtf_fs *)fs, &size))
        size = UINT64_MAX;
    if (fs->sb_load_size && fs->sb_load_size < size)
        size = fs->sb_load_size;
    return ext_clip(out, n, size);
}

int alloc_retire_list(gmtf_fs *fs, extvec *out)
{
    memset(out, 0, sizeof *out);
    struct ext r[4];
    size_t n = sb_regions(fs, &fs->sb, r);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = ev_add(out, r[i].off, r[i].len);
    for (size_t i = 0; i < fs->retired_cur.n && !rc; i++)
        rc = ev_add(out, fs->retired_cur.v[i].off, fs->retired_cur.v[i].len);
    for (size_t i = 0; i < fs->pending.n && !rc; i++)
        rc = ev_add(out, fs->pending.v[i].off, fs->pending.v[i].len);
    if (rc)
        ev_free(out);
    return rc;
}

void alloc_generation_done(gmtf_fs *fs, extvec *retire)
{
    for (size_t i = 0; i < fs->retired_prev.n; i++)
        alloc_release_now(fs, fs->retired_prev.v[i].off, fs->retired_prev.v[i].len);
    ev_free(&fs->retired_prev);
    fs->retired_prev = *retire;
    memset(retire, 0, sizeof *retire);
    fs->retired_cur.n = 0;
    fs->pending.n = 0;
}

static int ext_cmp(const void *a, const void *b)
{
    const struct ext *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

int alloc_rebuild(gmtf_fs *fs)
{
    size_t n = 0, cap = fs->live_frames + 4 + fs->retired_cur.n + fs->retired_prev.n;
    struct ext *v = malloc(cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    for (uint32_t id = 1; id < fs->nframes && n < cap; id++)
        if (fs->frames[id].clen && !(fs->frames[id].flags & FRAME_OUTSIDE))
            v[n++] = (struct ext){fs->frames[id].off, fs->frames[id].clen};
    n += sb_regions(fs, &fs->sb, v + n);
    for (size_t i = 0; i < fs->retired_cur.n; i++)
        v[n++] = fs->retired_cur.v[i];
    for (size_t i = 0; i < fs->retired_prev.n; i++)
        v[n++] = fs->retired_prev.v[i];
    /* What lies past the end of the image (cut short, or hostile) is not
     * there: the end is never moved to where an image claims space. */
    uint64_t size;
    fs->sb_load_size = 0; /* sb_regions: the slot's claims as far as the image goes now */
    if (!img_size(fs, &size)) {
        fs->sb_load_size = size;
        n = ext_clip(v, n, size);
        /* The retired lists too: released two checkpoints later, a range
         * past today's end would come back as free space inside what the
         * end has grown to by then (a hostile RETIRE record past the end:
         * the repair's new journal was given out again and the trim cut
         * it off; mutator seed 5346 of 10,000). */
        fs->retired_cur.n = ext_clip(fs->retired_cur.v, fs->retired_cur.n, size);
        fs->retired_prev.n = ext_clip(fs->retired_prev.v, fs->retired_prev.n, size);
    }
    qsort(v, n, sizeof *v, ext_cmp);
    fs->free.n = 0;
    fs->pending.n = 0;
    fs->punched.n = 0; /* unknown after mount: punched again (once) */
    uint64_t pos = fs->data_start, used = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].off < fs->data_start) { /* retired old metadata of an upgraded image */
            uint64_t end = v[i].off + v[i].len;
            v[i].off = fs->data_start;
            v[i].len = end > v[i].off ? end - v[i].off : 0;
        }
        if (v[i].off < pos && v[i].len) {
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
    fs->spare = (struct ext){0, 0};
    free(v);
    alloc_room(fs);
    return rc;
}

uint64_t alloc_ckpt_need(const gmtf_fs *fs)
{
    uint64_t s = fs->sb.snap_len + fs->sb.snap_len / 4 + 4096;
    return 2 * alloc_meta_len(fs, s) + 2 * alloc_meta_len(fs, JOURNAL_MIN);
}

uint64_t alloc_retired_bytes(const gmtf_fs *fs)
{
    uint64_t n = 0;
    for (size_t i = 0; i < fs->retired_cur.n; i++)
        n += fs->retired_cur.v[i].len;
    for (size_t i = 0; i < fs->retired_prev.n; i++)
        n += fs->retired_prev.v[i].len;
    return n;
}

uint64_t alloc_room(gmtf_fs *fs)
{
    uint64_t inside = alloc_free_bytes(fs), grow = 0, host, alloc;
    if (fs->sb.capacity) {
        grow = fs->sb.capacity > fs->end ? fs->sb.capacity - fs->end : 0;
    } else if (!img_host_free(fs, &host)) {
        grow = host;
        /* Free space inside the image counts as far as the host has it:
         * below the file's length (past it, growing takes host space), and
         * not in holes punched out of it (in the host's free space). */
        uint64_t size;
        if (!img_size(fs, &size)) {
            inside = 0;
            for (size_t i = 0; i < fs->free.n; i++) {
                const struct ext *x = &fs->free.v[i];
                if (x->off < size)
                    inside += (x->off + x->len < size ? x->len : size - x->off);
            }
        }
        if (!img_allocated(fs, &alloc)) {
            uint64_t live = fs->used + fs->data_start;
            alloc = alloc > live ? alloc - live : 0;
            inside = alloc < inside ? alloc : inside;
        }
    } else {
        grow = UINT64_MAX / 4; /* no host to ask (memory image): unbounded */
    }
    uint64_t room = inside + grow, need = alloc_ckpt_need(fs);
    if (fs->spare.len < need) /* the next checkpoint comes out of this */
        room = room > need - fs->spare.len ? room - (need - fs->spare.len) : 0;
    fs->room = room;
    return room;
}

int alloc_spare_ensure(gmtf_fs *fs)
{
    uint64_t need = alloc_ckpt_need(fs);
    if (fs->ro || fs->spare.len >= need || fs->data_start < DATA_START)
        return 0;
    uint64_t room = alloc_room(fs);
    if (fs->spare.len == 0 && room >= 8 * need)
        return 0; /* plenty: a checkpoint finds its space anyway */
    /* Tight: keep the next checkpoint's space, allocated on the host. */
    if (fs->spare.len)
        alloc_release_now(fs, fs->spare.off, fs->spare.len);
    fs->spare.len = 0;
    uint64_t off;
    int rc = alloc_meta_free(fs, need, &off);
    if (!rc) {
        rc = img_reserve(fs, off, need);
        if (rc == -EOPNOTSUPP)
            rc = 0; /* a host without fallocate: the free map keeps it at least */
        if (rc)
            alloc_release_now(fs, off, need);
    }
    if (rc) {
        fs_log(fs, "no room for the next checkpoint (%llu bytes; room %llu, end %llu): %s",
               (unsigned long long)need, (unsigned long long)room, (unsigned long long)fs->end,
               strerror(-rc));
        alloc_room(fs);
        return rc == -ENOMEM ? rc : -ENOSPC;
    }
    fs->spare = (struct ext){off, need};
    alloc_room(fs);
    return 0;
}

/* Punches the page-aligned part of every free extent of PUNCH_MIN or more
 * that is not punched yet. Free space is what the allocator may overwrite
 * at any time, so reading it as zeros instead harms no durable state. */
static void punch_free(gmtf_fs *fs)
{
    if (fs->punch_off || !img_punchable(fs))
        return;
    for (size_t i = 0; i < fs->free.n; i++) {
        const struct ext *x = &fs->free.v[i];
        if (x->len < PUNCH_MIN)
            continue;
        uint64_t a = (x->off + PUNCH_ALIGN - 1) / PUNCH_ALIGN * PUNCH_ALIGN;
        uint64_t b = (x->off + x->len) / PUNCH_ALIGN * PUNCH_ALIGN;
        /* Only the gaps between holes already made. */
        size_t j = ev_lower(&fs->punched, a);
        if (j > 0 && fs->punched.v[j - 1].off + fs->punched.v[j - 1].len > a)
            j--;
        uint64_t pos = a;
        int rc = 0;
        for (; pos < b && !rc; j++) {
            uint64_t hs = j < fs->punched.n ? fs->punched.v[j].off : b;
            uint64_t he = j < fs->punched.n ? hs + fs->punched.v[j].len : b;
            if (hs > b)
                hs = he = b;
            if (hs > pos)
                rc = img_punch(fs, pos, hs - pos);
            if (he > pos)
                pos = he;
        }
        if (rc == -EOPNOTSUPP) {
            fs->punch_off = 1; /* the host file system cannot: not an error */
            return;
        }
        if (rc) {
            fs_log(fs, "punching free space at %llu (%llu bytes) out of the image: %s",
                   (unsigned long long)a, (unsigned long long)(b - a), strerror(-rc));
            fs->punch_off = 1;
            return;
        }
        if (ev_remove(&fs->punched, a, b - a) || ev_add(&fs->punched, a, b - a)) {
            fs->punched.n = 0; /* out of memory: all punched again next time */
            return;
        }
    }
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
    if (fs->end < UINT64_MAX)
        unpunch(fs, fs->end, UINT64_MAX - fs->end); /* gone with the truncation */
    if (fs->img->is_blockdev)
        return 0;
    uint64_t size;
    int rc = img_size(fs, &size);
    if (rc)
        return rc;
    if (size > fs->end && (rc = img_truncate(fs, fs->end)))
        fs_log(fs, "giving the image's free end back (truncating it to %llu bytes): %s",
               (unsigned long long)fs->end, strerror(-rc)); /* the next checkpoint retries */
    if (!rc)
        punch_free(fs);
    return rc;
}

uint64_t alloc_free_bytes(gmtf_fs *fs)
{
    uint64_t f = 0;
    for (size_t i = 0; i < fs->free.n; i++)
        f += fs->free.v[i].len;
    return f;
}

uint64_t alloc_punched_bytes(gmtf_fs *fs)
{
    uint64_t f = 0;
    for (size_t i = 0; i < fs->punched.n; i++)
        f += fs->punched.v[i].len;
    return f;
}
