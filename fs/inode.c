/* The inode table: inodes by number, free numbers for reuse. An inode's
 * contents (block map, directory entries, xattrs) are managed by the files
 * that own them; inode_drop (record.c) frees them all.
 *
 * Numbers come from the image and may be sparse (up to 2^40), so the table
 * is sized by how many inodes there are, never by the largest number: pages
 * of IPAGE consecutive numbers, found through a hash of their page number,
 * and a list of the pages sorted when an ordered walk needs it. An inode
 * alone in its page costs one page (8 * IPAGE bytes) beside itself. */
#include <sys/stat.h>
#include <time.h>

#include "fs_internal.h"

#define INO_LIMIT (1ull << 40) /* numbers 1 .. INO_LIMIT (docs/format.md) */

struct ipage {
    uint64_t key; /* number / IPAGE */
    struct inode *v[IPAGE];
};

static size_t page_slot(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

static struct ipage *page_find(const gmtf_fs *fs, uint64_t key)
{
    if (!fs->ipage_cap)
        return NULL;
    for (size_t i = page_slot(key, fs->ipage_cap);; i = (i + 1) & (fs->ipage_cap - 1)) {
        struct ipage *p = fs->ipage_tab[i];
        if (!p || p->key == key)
            return p;
    }
}

static int page_tab_grow(gmtf_fs *fs)
{
    size_t cap = fs->ipage_cap ? fs->ipage_cap * 2 : 64;
    struct ipage **t = calloc(cap, sizeof *t);
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < fs->nipages; i++) {
        size_t s = page_slot(fs->ipage_ord[i]->key, cap);
        while (t[s])
            s = (s + 1) & (cap - 1);
        t[s] = fs->ipage_ord[i];
    }
    free(fs->ipage_tab);
    fs->ipage_tab = t;
    fs->ipage_cap = cap;
    return 0;
}

static struct ipage *page_get(gmtf_fs *fs, uint64_t key)
{
    struct ipage *p = page_find(fs, key);
    if (p)
        return p;
    if ((fs->nipages + 1) * 2 > fs->ipage_cap && page_tab_grow(fs))
        return NULL;
    if (fs->nipages == fs->ipage_ord_cap) {
        size_t cap = fs->ipage_ord_cap ? fs->ipage_ord_cap * 2 : 64;
        struct ipage **o = realloc(fs->ipage_ord, cap * sizeof *o);
        if (!o)
            return NULL;
        fs->ipage_ord = o;
        fs->ipage_ord_cap = cap;
    }
    if (!(p = calloc(1, sizeof *p)))
        return NULL;
    p->key = key;
    size_t s = page_slot(key, fs->ipage_cap);
    while (fs->ipage_tab[s])
        s = (s + 1) & (fs->ipage_cap - 1);
    fs->ipage_tab[s] = p;
    if (fs->nipages && fs->ipage_ord[fs->nipages - 1]->key > key)
        fs->ipage_unsorted = 1; /* numbers mostly come in order: sorted when walked */
    fs->ipage_ord[fs->nipages++] = p;
    return p;
}

struct inode *inode_get(gmtf_fs *fs, uint64_t ino)
{
    if (ino == 0 || ino > INO_LIMIT)
        return NULL;
    struct ipage *p = page_find(fs, ino / IPAGE);
    return p ? p->v[ino % IPAGE] : NULL;
}

struct inode *inode_create_mem(gmtf_fs *fs, uint64_t ino, uint32_t mode)
{
    if (ino == 0 || ino > INO_LIMIT)
        return NULL;
    struct ipage *p = page_get(fs, ino / IPAGE);
    if (!p || p->v[ino % IPAGE])
        return NULL;
    struct inode *in = calloc(1, sizeof *in);
    if (!in)
        return NULL;
    in->ino = ino;
    in->mode = mode;
    if (S_ISDIR(mode))
        in->u.dir.next = 3; /* offsets 1 and 2 are "." and ".." */
    p->v[ino % IPAGE] = in;
    fs->ninodes++;
    return in;
}

void inode_table_remove(gmtf_fs *fs, struct inode *in)
{
    struct ipage *p = page_find(fs, in->ino / IPAGE);
    if (p && p->v[in->ino % IPAGE] == in) {
        p->v[in->ino % IPAGE] = NULL;
        fs->ninodes--;
    }
    if (!fs->loading) {
        if (fs->nino_free == fs->ino_free_cap) {
            size_t cap = fs->ino_free_cap ? fs->ino_free_cap * 2 : 256;
            uint64_t *v = realloc(fs->ino_free, cap * sizeof *v);
            if (v) {
                fs->ino_free = v;
                fs->ino_free_cap = cap;
            }
        }
        if (fs->nino_free < fs->ino_free_cap)
            fs->ino_free[fs->nino_free++] = in->ino;
    }
    free(in);
}

int inode_alloc_ino(gmtf_fs *fs, uint64_t *ino)
{
    while (fs->nino_free) {
        uint64_t i = fs->ino_free[--fs->nino_free];
        if (!inode_get(fs, i)) {
            *ino = i;
            return 0;
        }
    }
    /* The lowest free number above the root, from a cursor that only moves
     * up (numbers freed later go to the free list): each number in use is
     * stepped over once per mount. */
    uint64_t i = fs->ino_cursor > 2 ? fs->ino_cursor : 2;
    while (i <= INO_LIMIT && inode_get(fs, i))
        i++;
    if (i > INO_LIMIT)
        return -ENOSPC;
    fs->ino_cursor = i + 1;
    *ino = i;
    return 0;
}

/* Inode generations: (number, generation) never repeats (gmtf_fs.h), so
 * that a handle to a deleted inode (FUSE, NFS: number and generation) is
 * stale, never another file. Numbers are reused (inode_alloc_ino), so:
 * - in a mount, each new inode takes the next generation (next_gen is one
 *   above the largest loaded or made);
 * - across mounts, a checkpoint records the next generation in the
 *   superblock (ino_gen): the largest one still in the records is not enough
 *   once the inode that had it is deleted (create, unlink, unmount, mount,
 *   create gave the same number and generation again);
 * - across a crash, what the mount before gave out after its last durable
 *   state is lost with it, so the first inode a mount makes takes at least
 *   the wall clock in nanoseconds, and each after it one more: making an
 *   inode takes more than a nanosecond, so no generation given out runs
 *   ahead of the clock, and a later mount starts above all of them (unless
 *   the clock was set back past them).
 * mkfs filling an image counts on from the root's (reproducible images; a
 * crash there leaves an image that nothing mounts). docs/format.md,
 * "Inode numbers and generations". */
uint64_t inode_gen_floor(const gmtf_fs *fs)
{
    return fs->next_gen > fs->sb.ino_gen ? fs->next_gen : fs->sb.ino_gen;
}

uint64_t inode_alloc_gen(gmtf_fs *fs)
{
    fs->next_gen = inode_gen_floor(fs);
    if (!fs->gen_clocked && !fs->mkfs_fill) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        uint64_t now = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
        if (now > fs->next_gen)
            fs->next_gen = now;
        fs->gen_clocked = 1;
    }
    return fs->next_gen;
}

static int page_cmp(const void *a, const void *b)
{
    const struct ipage *x = *(struct ipage *const *)a, *y = *(struct ipage *const *)b;
    return x->key < y->key ? -1 : x->key > y->key;
}

struct inode *inode_next(gmtf_fs *fs, uint64_t *ino)
{
    if (*ino >= INO_LIMIT)
        return NULL;
    if (fs->ipage_unsorted) {
        qsort(fs->ipage_ord, fs->nipages, sizeof *fs->ipage_ord, page_cmp);
        fs->ipage_unsorted = 0;
    }
    uint64_t want = *ino + 1, key = want / IPAGE;
    /* The page of want: usually the one the last call was in, or the next. */
    size_t i = fs->ipage_hint;
    if (!(i < fs->nipages && fs->ipage_ord[i]->key <= key &&
          (i + 1 == fs->nipages || fs->ipage_ord[i + 1]->key > key))) {
        size_t lo = 0, hi = fs->nipages;
        while (lo < hi) { /* first page with key >= want's */
            size_t mid = (lo + hi) / 2;
            if (fs->ipage_ord[mid]->key < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        i = lo;
    }
    for (; i < fs->nipages; i++) {
        struct ipage *p = fs->ipage_ord[i];
        unsigned s = p->key == key ? (unsigned)(want % IPAGE) : p->key > key ? 0 : IPAGE;
        for (; s < IPAGE; s++)
            if (p->v[s]) {
                fs->ipage_hint = i;
                *ino = p->v[s]->ino;
                return p->v[s];
            }
    }
    return NULL;
}

struct inode *inode_scan(const gmtf_fs *fs, uint64_t *pos)
{
    for (uint64_t i = *pos; i / IPAGE < fs->nipages; i++) {
        struct inode *in = fs->ipage_ord[i / IPAGE]->v[i % IPAGE];
        if (in) {
            *pos = i + 1;
            return in;
        }
    }
    *pos = (uint64_t)fs->nipages * IPAGE;
    return NULL;
}

void inode_table_free(gmtf_fs *fs)
{
    for (size_t i = 0; i < fs->nipages; i++)
        free(fs->ipage_ord[i]);
    free(fs->ipage_ord);
    free(fs->ipage_tab);
    fs->ipage_ord = fs->ipage_tab = NULL;
    fs->nipages = fs->ipage_ord_cap = fs->ipage_cap = fs->ipage_hint = 0;
    fs->ipage_unsorted = 0;
    fs->ninodes = 0;
    fs->ino_cursor = 0;
    free(fs->ino_free);
    fs->ino_free = NULL;
    fs->nino_free = fs->ino_free_cap = 0;
}
