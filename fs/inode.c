/* The inode table: inodes by number, free numbers for reuse. An inode's
 * contents (block map, directory entries, xattrs) are managed by the files
 * that own them; inode_drop (record.c) frees them all. */
#include <sys/stat.h>

#include "fs_internal.h"

struct inode *inode_get(gmtf_fs *fs, uint64_t ino)
{
    if (ino == 0 || ino >= fs->itab_cap)
        return NULL;
    return fs->itab[ino];
}

struct inode *inode_create_mem(gmtf_fs *fs, uint64_t ino, uint32_t mode)
{
    if (ino == 0 || ino > (1ull << 40))
        return NULL;
    if (ino >= fs->itab_cap) {
        uint64_t cap = fs->itab_cap ? fs->itab_cap : 1024;
        while (cap <= ino)
            cap *= 2;
        struct inode **t = realloc(fs->itab, cap * sizeof *t);
        if (!t)
            return NULL;
        memset(t + fs->itab_cap, 0, (cap - fs->itab_cap) * sizeof *t);
        fs->itab = t;
        fs->itab_cap = cap;
    }
    if (fs->itab[ino])
        return NULL;
    struct inode *in = calloc(1, sizeof *in);
    if (!in)
        return NULL;
    in->ino = ino;
    in->mode = mode;
    if (S_ISDIR(mode))
        in->u.dir.next = 3; /* offsets 1 and 2 are "." and ".." */
    fs->itab[ino] = in;
    return in;
}

void inode_table_remove(gmtf_fs *fs, struct inode *in)
{
    fs->itab[in->ino] = NULL;
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
        if (i < fs->itab_cap && !fs->itab[i]) {
            *ino = i;
            return 0;
        }
    }
    /* No free list yet (after mount): the first hole above the root. */
    for (uint64_t i = 2; i < fs->itab_cap; i++)
        if (!fs->itab[i]) {
            *ino = i;
            /* Remember every other hole so the scan runs once. */
            for (uint64_t j = fs->itab_cap; j-- > i + 1;)
                if (!fs->itab[j] && fs->nino_free < (1u << 20)) {
                    if (fs->nino_free == fs->ino_free_cap) {
                        size_t cap = fs->ino_free_cap ? fs->ino_free_cap * 2 : 256;
                        uint64_t *v = realloc(fs->ino_free, cap * sizeof *v);
                        if (!v)
                            break;
                        fs->ino_free = v;
                        fs->ino_free_cap = cap;
                    }
                    fs->ino_free[fs->nino_free++] = j;
                }
            return 0;
        }
    *ino = fs->itab_cap > 2 ? fs->itab_cap : 2;
    return 0;
}
