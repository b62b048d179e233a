/* Directory entries: one hash table over (parent, name) for lookups, and
 * per directory an array sorted by cookie (the stable readdir offset). */

#include "fs_internal.h"

static int dent_tab_grow(gmtf_fs *fs)
{
    size_t cap = fs->dent_cap ? fs->dent_cap * 2 : 4096;
    struct dent **t = calloc(cap, sizeof *t);
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < fs->dent_cap; i++) {
        struct dent *d = fs->dent_tab[i];
        while (d) {
            struct dent *next = d->hnext;
            d->hnext = t[d->hash & (cap - 1)];
            t[d->hash & (cap - 1)] = d;
            d = next;
        }
    }
    free(fs->dent_tab);
    fs->dent_tab = t;
    fs->dent_cap = cap;
    return 0;
}

struct dent *dent_find(gmtf_fs *fs, uint64_t parent, const char *name, size_t n)
{
    if (!fs->dent_cap)
        return NULL;
    uint32_t h = name_hash(parent, name, n);
    for (struct dent *d = fs->dent_tab[h & (fs->dent_cap - 1)]; d; d = d->hnext)
        if (d->hash == h && d->parent == parent && d->namelen == n && !memcmp(d->name, name, n))
            return d;
    return NULL;
}

int dent_insert(gmtf_fs *fs, struct inode *dir, uint64_t ino, uint64_t cookie, const char *name,
                size_t n)
{
    if (n == 0 || n > GMTF_FS_NAME_MAX || memchr(name, '/', n) || memchr(name, 0, n))
        return -EINVAL;
    if (dent_find(fs, dir->ino, name, n))
        return -EEXIST;
    if (fs->dent_count >= fs->dent_cap && dent_tab_grow(fs))
        return -ENOMEM;
    /* Entries stay sorted by cookie: readdir resumes by binary search. */
    if (dir->u.dir.n && dir->u.dir.v[dir->u.dir.n - 1]->cookie >= cookie)
        return -EINVAL;
    if (dir->u.dir.n == dir->u.dir.cap) {
        /* Compact deleted slots before growing. */
        if (dir->u.dir.live < dir->u.dir.n / 2) {
            uint32_t k = 0;
            for (uint32_t i = 0; i < dir->u.dir.n; i++)
                if (dir->u.dir.v[i])
                    dir->u.dir.v[k++] = dir->u.dir.v[i];
            dir->u.dir.n = k;
        } else {
            uint32_t cap = dir->u.dir.cap ? dir->u.dir.cap * 2 : 8;
            struct dent **v = realloc(dir->u.dir.v, cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            dir->u.dir.v = v;
            dir->u.dir.cap = cap;
        }
    }
    struct dent *d = malloc(sizeof *d + n + 1);
    if (!d && fs->ndent_spare)
        d = fs->dent_spare[--fs->ndent_spare]; /* sized for any name */
    if (!d)
        return -ENOMEM;
    d->parent = dir->ino;
    d->ino = ino;
    d->cookie = cookie;
    d->namelen = (uint16_t)n;
    memcpy(d->name, name, n);
    d->name[n] = 0;
    d->hash = name_hash(dir->ino, name, n);
    d->hnext = fs->dent_tab[d->hash & (fs->dent_cap - 1)];
    fs->dent_tab[d->hash & (fs->dent_cap - 1)] = d;
    fs->dent_count++;
    dir->u.dir.v[dir->u.dir.n++] = d;
    dir->u.dir.live++;
    if (cookie >= dir->u.dir.next)
        dir->u.dir.next = cookie + 1;
    return 0;
}

int dent_reserve(gmtf_fs *fs, struct inode *dir, unsigned k)
{
    while (fs->dent_count + k > fs->dent_cap)
        if (dent_tab_grow(fs))
            return -ENOMEM;
    if (dir->u.dir.cap - dir->u.dir.n < k) {
        uint32_t cap = dir->u.dir.cap ? dir->u.dir.cap * 2 : 8;
        if (cap < dir->u.dir.n + k)
            cap = dir->u.dir.n + k;
        struct dent **v = realloc(dir->u.dir.v, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        dir->u.dir.v = v;
        dir->u.dir.cap = cap;
    }
    while (fs->ndent_spare < k && fs->ndent_spare < 2) {
        struct dent *d = malloc(sizeof *d + GMTF_FS_NAME_MAX + 1);
        if (!d)
            return -ENOMEM;
        fs->dent_spare[fs->ndent_spare++] = d;
    }
    return 0;
}

void dent_unreserve(gmtf_fs *fs)
{
    while (fs->ndent_spare)
        free(fs->dent_spare[--fs->ndent_spare]);
}

/* First slot at or after which the next live entry has cookie >= c. */
uint32_t dir_seek(const struct inode *dir, uint64_t c)
{
    uint32_t lo = 0, hi = dir->u.dir.n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2, m = mid;
        while (m < hi && !dir->u.dir.v[m])
            m++;
        if (m == hi || dir->u.dir.v[m]->cookie >= c)
            hi = mid;
        else
            lo = m + 1;
    }
    return lo;
}

int dent_remove(gmtf_fs *fs, struct inode *dir, struct dent *d)
{
    struct dent **pp = &fs->dent_tab[d->hash & (fs->dent_cap - 1)];
    while (*pp && *pp != d)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = d->hnext;
    fs->dent_count--;
    uint32_t i = dir_seek(dir, d->cookie);
    while (i < dir->u.dir.n && !dir->u.dir.v[i])
        i++;
    if (i < dir->u.dir.n && dir->u.dir.v[i] == d) {
        dir->u.dir.v[i] = NULL;
        dir->u.dir.live--;
    }
    while (dir->u.dir.n && !dir->u.dir.v[dir->u.dir.n - 1])
        dir->u.dir.n--;
    free(d);
    return 0;
}
