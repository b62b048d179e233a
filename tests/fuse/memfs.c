/* memfs: an in-memory test double of fs/gmtf_fs.h, for testing the FUSE
 * daemon's own layer (tools/gmtf_fuse_*.c) with real programs without the
 * real library: `gmtf-memfs IMAGE MNT` behaves like gmtf on a fresh image
 * whose contents vanish at unmount. Only the calls the daemon makes are
 * here; one mutex guards everything. Not a filesystem: nothing persists. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "gmtf_fs.h"

typedef struct dent {
    char *name;
    uint64_t ino, cookie;
} dent;

typedef struct xat {
    char *name;
    void *val;
    size_t size;
} xat;

typedef struct mino {
    int used;
    struct stat st;
    uint64_t gen, nlookup;
    int opens;
    char *data;
    size_t cap;
    char *link;
    uint64_t parent;
    dent *d;
    size_t nd, capd;
    uint64_t next_cookie;
    xat *x;
    size_t nx;
} mino;

struct gmtf_fs {
    pthread_mutex_t lock;
    mino *in;
    size_t nin;
    uint64_t gen;
    gmtf_image *img;
};

struct gmtf_image_mem {
    int fd;
};

static const gmtf_image_ops no_ops;

int gmtf_image_open_file(const char *path, int flags, gmtf_image **out)
{
    int fd = open(path, (flags & GMTF_IMAGE_RDONLY) ? O_RDONLY : O_RDWR);
    if (fd < 0)
        return -errno;
    struct flock fl = {.l_type = (flags & GMTF_IMAGE_RDONLY) ? F_RDLCK : F_WRLCK,
                       .l_whence = SEEK_SET};
    if (!(flags & GMTF_IMAGE_NOLOCK) && fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        int e = errno;
        close(fd);
        return (e == EAGAIN || e == EACCES) ? -EBUSY : -e;
    }
    gmtf_image *img = calloc(1, sizeof *img);
    if (!img) {
        close(fd);
        return -ENOMEM;
    }
    img->ops = &no_ops;
    img->ctx = (void *)(intptr_t)fd;
    *out = img;
    return 0;
}

void gmtf_image_close(gmtf_image *img)
{
    if (!img)
        return;
    close((int)(intptr_t)img->ctx);
    free(img);
}

static void now(struct timespec *t)
{
    clock_gettime(CLOCK_REALTIME, t);
}

static mino *get(gmtf_fs *fs, uint64_t ino)
{
    if (ino == 0 || ino >= fs->nin || !fs->in[ino].used)
        return NULL;
    return &fs->in[ino];
}

static uint64_t new_ino(gmtf_fs *fs, mode_t mode, uid_t uid, gid_t gid)
{
    uint64_t ino = 0;
    for (size_t i = 2; i < fs->nin; i++)
        if (!fs->in[i].used) {
            ino = i;
            break;
        }
    if (!ino) {
        size_t n = fs->nin ? fs->nin * 2 : 64;
        mino *p = realloc(fs->in, n * sizeof *p);
        if (!p)
            return 0;
        memset(p + fs->nin, 0, (n - fs->nin) * sizeof *p);
        ino = fs->nin > 2 ? fs->nin : 2;
        fs->in = p;
        fs->nin = n;
    }
    mino *m = &fs->in[ino];
    memset(m, 0, sizeof *m);
    m->used = 1;
    m->gen = ++fs->gen;
    m->st.st_ino = ino;
    m->st.st_mode = mode;
    m->st.st_uid = uid;
    m->st.st_gid = gid;
    m->st.st_nlink = 1;
    m->st.st_blksize = 4096;
    m->next_cookie = 2;
    now(&m->st.st_atim);
    m->st.st_mtim = m->st.st_ctim = m->st.st_atim;
    return ino;
}

static void free_ino(mino *m)
{
    free(m->data);
    free(m->link);
    for (size_t i = 0; i < m->nd; i++)
        free(m->d[i].name);
    free(m->d);
    for (size_t i = 0; i < m->nx; i++) {
        free(m->x[i].name);
        free(m->x[i].val);
    }
    free(m->x);
    memset(m, 0, sizeof *m);
}

static void maybe_free(gmtf_fs *fs, uint64_t ino)
{
    mino *m = get(fs, ino);
    if (m && ino != GMTF_ROOT_INO && m->st.st_nlink == 0 && m->opens == 0 && m->nlookup == 0)
        free_ino(m);
}

int gmtf_fs_mount(gmtf_image *img, const gmtf_fs_options *opt, gmtf_fs **out)
{
    (void)opt;
    gmtf_fs *fs = calloc(1, sizeof *fs);
    if (!fs) {
        gmtf_image_close(img);
        return -ENOMEM;
    }
    pthread_mutex_init(&fs->lock, NULL);
    fs->img = img;
    fs->nin = 64;
    fs->in = calloc(fs->nin, sizeof *fs->in);
    mino *r = &fs->in[GMTF_ROOT_INO];
    r->used = 1;
    r->st.st_ino = GMTF_ROOT_INO;
    r->st.st_mode = S_IFDIR | 0755;
    r->st.st_nlink = 2;
    r->parent = GMTF_ROOT_INO;
    r->next_cookie = 2;
    now(&r->st.st_mtim);
    r->st.st_atim = r->st.st_ctim = r->st.st_mtim;
    *out = fs;
    return 0;
}

int gmtf_fs_unmount(gmtf_fs *fs)
{
    for (size_t i = 0; i < fs->nin; i++)
        if (fs->in[i].used)
            free_ino(&fs->in[i]);
    free(fs->in);
    gmtf_image_close(fs->img);
    pthread_mutex_destroy(&fs->lock);
    free(fs);
    return 0;
}

static dent *find(mino *dir, const char *name)
{
    for (size_t i = 0; i < dir->nd; i++)
        if (strcmp(dir->d[i].name, name) == 0)
            return &dir->d[i];
    return NULL;
}

static int add_dent(mino *dir, const char *name, uint64_t ino)
{
    if (strlen(name) > GMTF_FS_NAME_MAX)
        return -ENAMETOOLONG;
    if (dir->nd == dir->capd) {
        size_t n = dir->capd ? dir->capd * 2 : 8;
        dent *p = realloc(dir->d, n * sizeof *p);
        if (!p)
            return -ENOMEM;
        dir->d = p;
        dir->capd = n;
    }
    dir->d[dir->nd++] = (dent){strdup(name), ino, dir->next_cookie++};
    now(&dir->st.st_mtim);
    dir->st.st_ctim = dir->st.st_mtim;
    return 0;
}

static void del_dent(mino *dir, dent *d)
{
    free(d->name);
    size_t i = (size_t)(d - dir->d);
    memmove(d, d + 1, (dir->nd - i - 1) * sizeof *d);
    dir->nd--;
    now(&dir->st.st_mtim);
    dir->st.st_ctim = dir->st.st_mtim;
}

static void fill(mino *m, gmtf_entry *e)
{
    e->attr = m->st;
    e->attr.st_blocks = ((off_t)m->st.st_size + 511) / 512;
    e->generation = m->gen;
}

int gmtf_fs_lookup(gmtf_fs *fs, uint64_t parent, const char *name, gmtf_entry *e)
{
    pthread_mutex_lock(&fs->lock);
    int rc = -ENOENT;
    mino *p = get(fs, parent);
    if (!p)
        rc = -ENOENT;
    else if (!S_ISDIR(p->st.st_mode))
        rc = -ENOTDIR;
    else {
        dent *d = find(p, name);
        if (d) {
            mino *m = get(fs, d->ino);
            m->nlookup++;
            fill(m, e);
            rc = 0;
        }
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

void gmtf_fs_forget(gmtf_fs *fs, uint64_t ino, uint64_t nlookup)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    if (m) {
        m->nlookup = m->nlookup > nlookup ? m->nlookup - nlookup : 0;
        maybe_free(fs, ino);
    }
    pthread_mutex_unlock(&fs->lock);
}

int gmtf_fs_getattr(gmtf_fs *fs, uint64_t ino, struct stat *st)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    gmtf_entry e;
    if (m)
        fill(m, &e);
    pthread_mutex_unlock(&fs->lock);
    if (!m)
        return -ENOENT;
    *st = e.attr;
    return 0;
}

static int resize(mino *m, uint64_t size)
{
    if (size > m->cap) {
        size_t n = m->cap ? m->cap : 4096;
        while (n < size)
            n *= 2;
        char *p = realloc(m->data, n);
        if (!p)
            return -ENOSPC;
        memset(p + m->cap, 0, n - m->cap);
        m->data = p;
        m->cap = n;
    }
    if (size < (uint64_t)m->st.st_size)
        memset(m->data + size, 0, (size_t)m->st.st_size - size);
    m->st.st_size = (off_t)size;
    return 0;
}

int gmtf_fs_setattr(gmtf_fs *fs, uint64_t ino, const struct stat *st, unsigned set,
                    struct stat *out)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    int rc = m ? 0 : -ENOENT;
    if (m && (set & GMTF_SET_SIZE)) {
        if (!S_ISREG(m->st.st_mode))
            rc = -EINVAL;
        else
            rc = resize(m, (uint64_t)st->st_size);
        if (rc == 0)
            now(&m->st.st_mtim);
    }
    if (rc == 0) {
        if (set & GMTF_SET_MODE)
            m->st.st_mode = (m->st.st_mode & S_IFMT) | (st->st_mode & 07777);
        if (set & GMTF_SET_UID)
            m->st.st_uid = st->st_uid;
        if (set & GMTF_SET_GID)
            m->st.st_gid = st->st_gid;
        if (set & GMTF_SET_ATIME)
            m->st.st_atim = st->st_atim;
        if (set & GMTF_SET_MTIME)
            m->st.st_mtim = st->st_mtim;
        if (set & GMTF_SET_ATIME_NOW)
            now(&m->st.st_atim);
        if (set & GMTF_SET_MTIME_NOW)
            now(&m->st.st_mtim);
        if (set & GMTF_SET_CTIME)
            m->st.st_ctim = st->st_ctim;
        else
            now(&m->st.st_ctim);
        if (out) {
            gmtf_entry e;
            fill(m, &e);
            *out = e.attr;
        }
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

static int make(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, uid_t uid, gid_t gid,
                const char *target, int open, gmtf_entry *e)
{
    pthread_mutex_lock(&fs->lock);
    mino *p = get(fs, parent);
    int rc = 0;
    if (!p)
        rc = -ENOENT;
    else if (!S_ISDIR(p->st.st_mode))
        rc = -ENOTDIR;
    else if (find(p, name))
        rc = -EEXIST;
    uint64_t ino = 0;
    if (rc == 0 && !(ino = new_ino(fs, mode, uid, gid)))
        rc = -ENOSPC;
    if (rc == 0) {
        p = get(fs, parent); /* the table may have moved */
        rc = add_dent(p, name, ino);
    }
    if (rc == 0) {
        mino *m = get(fs, ino);
        m->parent = parent;
        if (S_ISDIR(mode)) {
            m->st.st_nlink = 2;
            p->st.st_nlink++;
        }
        if (target) {
            m->link = strdup(target);
            m->st.st_size = (off_t)strlen(target);
        }
        m->nlookup = 1;
        m->opens = open;
        fill(m, e);
    } else if (ino) {
        free_ino(get(fs, ino));
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int gmtf_fs_mknod(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
                  uid_t uid, gid_t gid, gmtf_entry *e)
{
    int rc = make(fs, parent, name, mode, uid, gid, NULL, 0, e);
    if (rc == 0 && rdev) {
        pthread_mutex_lock(&fs->lock);
        get(fs, e->attr.st_ino)->st.st_rdev = rdev;
        e->attr.st_rdev = rdev;
        pthread_mutex_unlock(&fs->lock);
    }
    return rc;
}

int gmtf_fs_mkdir(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, uid_t uid, gid_t gid,
                  gmtf_entry *e)
{
    return make(fs, parent, name, S_IFDIR | (mode & 07777), uid, gid, NULL, 0, e);
}

int gmtf_fs_symlink(gmtf_fs *fs, uint64_t parent, const char *name, const char *target, uid_t uid,
                    gid_t gid, gmtf_entry *e)
{
    return make(fs, parent, name, S_IFLNK | 0777, uid, gid, target, 0, e);
}

int gmtf_fs_create(gmtf_fs *fs, uint64_t parent, const char *name, mode_t mode, uid_t uid,
                   gid_t gid, int flags, gmtf_entry *e)
{
    (void)flags;
    return make(fs, parent, name, S_IFREG | (mode & 07777), uid, gid, NULL, 1, e);
}

/* The library's creation policy without ACLs (memfs keeps no ACL policy:
 * the real library's is tested through the real daemon). */
int gmtf_fs_make(gmtf_fs *fs, const gmtf_make_req *r, gmtf_entry *e)
{
    mode_t mode = r->mode & S_IFMT ? r->mode : r->mode | S_IFREG;
    gid_t gid = r->gid;
    pthread_mutex_lock(&fs->lock);
    mino *dir = get(fs, r->parent);
    if (dir && (dir->st.st_mode & S_ISGID)) {
        gid = dir->st.st_gid;
        if (S_ISDIR(mode))
            mode |= S_ISGID;
    }
    pthread_mutex_unlock(&fs->lock);
    if (S_ISLNK(mode))
        return gmtf_fs_symlink(fs, r->parent, r->name, r->target, r->uid, gid, e);
    mode &= ~r->umask;
    if (S_ISREG(mode) && r->open)
        return gmtf_fs_create(fs, r->parent, r->name, mode, r->uid, gid, 0, e);
    if (S_ISDIR(mode))
        return gmtf_fs_mkdir(fs, r->parent, r->name, mode, r->uid, gid, e);
    return gmtf_fs_mknod(fs, r->parent, r->name, mode, r->rdev, r->uid, gid, e);
}

/* No ACL policy here (inheritance, access ACL and mode: fs/acl.c), so the
 * mount must not offer ACLs. */
int gmtf_fs_set_posix_acl(gmtf_fs *fs, int on)
{
    (void)fs;
    return on ? -EOPNOTSUPP : 0;
}

int gmtf_fs_link(gmtf_fs *fs, uint64_t ino, uint64_t newparent, const char *newname, gmtf_entry *e)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino), *p = get(fs, newparent);
    int rc = 0;
    if (!m || !p)
        rc = -ENOENT;
    else if (S_ISDIR(m->st.st_mode))
        rc = -EPERM;
    else if (find(p, newname))
        rc = -EEXIST;
    else
        rc = add_dent(p, newname, ino);
    if (rc == 0) {
        m->st.st_nlink++;
        m->nlookup++;
        now(&m->st.st_ctim);
        fill(m, e);
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

/* Drops the entry d of dir (the caller checked what it may remove). */
static void drop(gmtf_fs *fs, mino *dir, dent *d)
{
    uint64_t ino = d->ino;
    mino *m = get(fs, ino);
    del_dent(dir, d);
    if (S_ISDIR(m->st.st_mode)) {
        m->st.st_nlink = 0;
        dir->st.st_nlink--;
    } else {
        m->st.st_nlink--;
    }
    now(&m->st.st_ctim);
    maybe_free(fs, ino);
}

static int remove_name(gmtf_fs *fs, uint64_t parent, const char *name, int want_dir)
{
    pthread_mutex_lock(&fs->lock);
    mino *p = get(fs, parent);
    dent *d = p ? find(p, name) : NULL;
    int rc = 0;
    if (!d)
        rc = -ENOENT;
    else {
        mino *m = get(fs, d->ino);
        if (want_dir && !S_ISDIR(m->st.st_mode))
            rc = -ENOTDIR;
        else if (!want_dir && S_ISDIR(m->st.st_mode))
            rc = -EISDIR;
        else if (want_dir && m->nd)
            rc = -ENOTEMPTY;
        else
            drop(fs, p, d);
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int gmtf_fs_unlink(gmtf_fs *fs, uint64_t parent, const char *name)
{
    return remove_name(fs, parent, name, 0);
}

int gmtf_fs_rmdir(gmtf_fs *fs, uint64_t parent, const char *name)
{
    return remove_name(fs, parent, name, 1);
}

static int is_ancestor(gmtf_fs *fs, uint64_t anc, uint64_t ino)
{
    while (ino != GMTF_ROOT_INO) {
        if (ino == anc)
            return 1;
        ino = get(fs, ino)->parent;
    }
    return anc == GMTF_ROOT_INO;
}

int gmtf_fs_rename(gmtf_fs *fs, uint64_t parent, const char *name, uint64_t newparent,
                   const char *newname, unsigned flags)
{
    pthread_mutex_lock(&fs->lock);
    int rc = 0;
    mino *p = get(fs, parent), *np = get(fs, newparent);
    dent *d = p ? find(p, name) : NULL;
    dent *nd = np ? find(np, newname) : NULL;
    mino *m = d ? get(fs, d->ino) : NULL;
    mino *t = nd ? get(fs, nd->ino) : NULL;
    if (!d || !np)
        rc = -ENOENT;
    else if ((flags & GMTF_RENAME_EXCHANGE) && !nd)
        rc = -ENOENT;
    else if ((flags & GMTF_RENAME_NOREPLACE) && nd)
        rc = -EEXIST;
    else if (nd && nd->ino == d->ino)
        rc = 0;
    else if (S_ISDIR(m->st.st_mode) && d->ino != newparent && is_ancestor(fs, d->ino, newparent))
        rc = -EINVAL;
    else if (flags & GMTF_RENAME_EXCHANGE) {
        if (S_ISDIR(t->st.st_mode) && is_ancestor(fs, nd->ino, parent))
            rc = -EINVAL;
        else {
            uint64_t a = d->ino, b = nd->ino;
            d->ino = b;
            nd->ino = a;
            if (S_ISDIR(m->st.st_mode) != S_ISDIR(t->st.st_mode) && parent != newparent) {
                int dir_to_new = S_ISDIR(m->st.st_mode);
                (dir_to_new ? p : np)->st.st_nlink--;
                (dir_to_new ? np : p)->st.st_nlink++;
            }
            m->parent = newparent;
            t->parent = parent;
        }
        goto out;
    } else if (t && S_ISDIR(m->st.st_mode) && !S_ISDIR(t->st.st_mode))
        rc = -ENOTDIR;
    else if (t && !S_ISDIR(m->st.st_mode) && S_ISDIR(t->st.st_mode))
        rc = -EISDIR;
    else if (t && S_ISDIR(t->st.st_mode) && t->nd)
        rc = -ENOTEMPTY;
    if (rc == 0 && !(nd && nd->ino == d->ino)) {
        uint64_t ino = d->ino;
        char *keep = strdup(newname);
        if (nd)
            drop(fs, np, nd);
        d = find(p, name);
        del_dent(p, d);
        rc = add_dent(np, keep, ino);
        free(keep);
        if (S_ISDIR(m->st.st_mode) && parent != newparent) {
            p->st.st_nlink--;
            np->st.st_nlink++;
        }
        m->parent = newparent;
        now(&m->st.st_ctim);
    }
out:
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

long gmtf_fs_readlink(gmtf_fs *fs, uint64_t ino, char *buf, size_t cap)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    long rc = !m ? -ENOENT : !m->link ? -EINVAL : (long)strlen(m->link);
    if (rc > 0)
        memcpy(buf, m->link, (size_t)rc < cap ? (size_t)rc : cap);
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int gmtf_fs_readdir(gmtf_fs *fs, uint64_t ino, uint64_t off, gmtf_fs_filldir_fn fn, void *arg)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    int rc = !m ? -ENOENT : !S_ISDIR(m->st.st_mode) ? -ENOTDIR : 0;
    if (rc == 0) {
        struct stat st = {.st_mode = S_IFDIR};
        int stop = 0;
        if (off == 0) {
            st.st_ino = ino;
            stop = fn(arg, ".", &st, 1);
            off = 1;
        }
        if (!stop && off == 1) {
            st.st_ino = m->parent;
            stop = fn(arg, "..", &st, 2);
            off = 2;
        }
        for (size_t i = 0; !stop && i < m->nd; i++) {
            if (m->d[i].cookie < off)
                continue;
            mino *c = get(fs, m->d[i].ino);
            st.st_ino = m->d[i].ino;
            st.st_mode = c->st.st_mode & S_IFMT;
            stop = fn(arg, m->d[i].name, &st, m->d[i].cookie + 1);
        }
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int gmtf_fs_open(gmtf_fs *fs, uint64_t ino, int flags)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    int rc = m ? 0 : -ENOENT;
    if (m) {
        m->opens++;
        if ((flags & O_TRUNC) && S_ISREG(m->st.st_mode))
            resize(m, 0);
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int gmtf_fs_release(gmtf_fs *fs, uint64_t ino)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    if (m) {
        m->opens--;
        maybe_free(fs, ino);
    }
    pthread_mutex_unlock(&fs->lock);
    return m ? 0 : -ENOENT;
}

long gmtf_fs_read(gmtf_fs *fs, uint64_t ino, void *buf, size_t n, uint64_t off)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    long rc = !m ? -ENOENT : S_ISDIR(m->st.st_mode) ? -EISDIR : 0;
    if (rc == 0 && off < (uint64_t)m->st.st_size) {
        size_t k = (uint64_t)m->st.st_size - off < n ? (size_t)(m->st.st_size - (off_t)off) : n;
        memcpy(buf, m->data + off, k);
        rc = (long)k;
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

long gmtf_fs_write(gmtf_fs *fs, uint64_t ino, const void *buf, size_t n, uint64_t off)
{
    return gmtf_fs_write_flags(fs, ino, buf, n, off, 0);
}

long gmtf_fs_write_flags(gmtf_fs *fs, uint64_t ino, const void *buf, size_t n, uint64_t off,
                         unsigned flags)
{
    if (flags & ~(unsigned)GMTF_WRITE_KEEP_ATTRS)
        return -EINVAL;
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    long rc = m ? 0 : -ENOENT;
    if (rc == 0 && off + n > (uint64_t)m->st.st_size)
        rc = resize(m, off + n);
    if (rc == 0) {
        memcpy(m->data + off, buf, n);
        if (!(flags & GMTF_WRITE_KEEP_ATTRS)) {
            now(&m->st.st_mtim);
            m->st.st_ctim = m->st.st_mtim;
        }
        rc = (long)n;
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int gmtf_fs_fsync(gmtf_fs *fs, uint64_t ino, int datasync)
{
    (void)datasync;
    struct stat st;
    return gmtf_fs_getattr(fs, ino, &st);
}

int gmtf_fs_syncfs(gmtf_fs *fs)
{
    (void)fs;
    return 0;
}

int gmtf_fs_fallocate(gmtf_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    int rc = m ? 0 : -ENOENT;
    if (rc == 0 && mode == 0) {
        if (off + len > (uint64_t)m->st.st_size)
            rc = resize(m, off + len);
    } else if (rc == 0 && mode == (GMTF_FALLOC_KEEP_SIZE | GMTF_FALLOC_PUNCH_HOLE)) {
        if (off < (uint64_t)m->st.st_size) {
            uint64_t end =
                off + len < (uint64_t)m->st.st_size ? off + len : (uint64_t)m->st.st_size;
            memset(m->data + off, 0, end - off);
        }
    } else if (rc == 0) {
        rc = -EOPNOTSUPP;
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int64_t gmtf_fs_lseek(gmtf_fs *fs, uint64_t ino, int64_t off, int whence)
{
    struct stat st;
    int rc = gmtf_fs_getattr(fs, ino, &st);
    if (rc < 0)
        return rc;
    if (whence == SEEK_DATA || whence == SEEK_HOLE) {
        if (off < 0 || off >= st.st_size)
            return -ENXIO;
        return whence == SEEK_DATA ? off : st.st_size;
    }
    return whence == SEEK_END ? st.st_size : off;
}

static xat *xfind(mino *m, const char *name)
{
    for (size_t i = 0; i < m->nx; i++)
        if (strcmp(m->x[i].name, name) == 0)
            return &m->x[i];
    return NULL;
}

int gmtf_fs_setxattr(gmtf_fs *fs, uint64_t ino, const char *name, const void *value, size_t size,
                     int flags)
{
    if (strlen(name) > GMTF_FS_XATTR_NAME_MAX)
        return -ERANGE;
    if (size > GMTF_FS_XATTR_SIZE_MAX)
        return -E2BIG;
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    int rc = m ? 0 : -ENOENT;
    xat *x = m ? xfind(m, name) : NULL;
    if (rc == 0 && x && (flags & GMTF_XATTR_CREATE))
        rc = -EEXIST;
    else if (rc == 0 && !x && (flags & GMTF_XATTR_REPLACE))
        rc = -ENODATA;
    if (rc == 0 && !x) {
        xat *p = realloc(m->x, (m->nx + 1) * sizeof *p);
        if (!p)
            rc = -ENOMEM;
        else {
            m->x = p;
            x = &m->x[m->nx++];
            x->name = strdup(name);
            x->val = NULL;
        }
    }
    if (rc == 0) {
        free(x->val);
        x->val = malloc(size ? size : 1);
        memcpy(x->val, value, size);
        x->size = size;
        now(&m->st.st_ctim);
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

long gmtf_fs_getxattr(gmtf_fs *fs, uint64_t ino, const char *name, void *buf, size_t size)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    xat *x = m ? xfind(m, name) : NULL;
    long rc = !m ? -ENOENT : !x ? -ENODATA : (long)x->size;
    if (x && size) {
        if (size < x->size)
            rc = -ERANGE;
        else
            memcpy(buf, x->val, x->size);
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

long gmtf_fs_listxattr(gmtf_fs *fs, uint64_t ino, char *buf, size_t size)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    long rc = m ? 0 : -ENOENT;
    for (size_t i = 0; m && i < m->nx; i++)
        rc += (long)strlen(m->x[i].name) + 1;
    if (m && size) {
        if (size < (size_t)rc)
            rc = -ERANGE;
        else
            for (size_t i = 0, at = 0; i < m->nx; i++) {
                size_t l = strlen(m->x[i].name) + 1;
                memcpy(buf + at, m->x[i].name, l);
                at += l;
            }
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int gmtf_fs_removexattr(gmtf_fs *fs, uint64_t ino, const char *name)
{
    pthread_mutex_lock(&fs->lock);
    mino *m = get(fs, ino);
    xat *x = m ? xfind(m, name) : NULL;
    int rc = !m ? -ENOENT : !x ? -ENODATA : 0;
    if (x) {
        free(x->name);
        free(x->val);
        *x = m->x[--m->nx];
        now(&m->st.st_ctim);
    }
    pthread_mutex_unlock(&fs->lock);
    return rc;
}

int gmtf_fs_statfs(gmtf_fs *fs, struct statvfs *st)
{
    pthread_mutex_lock(&fs->lock);
    uint64_t used = 0, files = 0;
    for (size_t i = 0; i < fs->nin; i++)
        if (fs->in[i].used) {
            files++;
            used += (uint64_t)fs->in[i].st.st_size;
        }
    pthread_mutex_unlock(&fs->lock);
    memset(st, 0, sizeof *st);
    st->f_bsize = st->f_frsize = 4096;
    st->f_blocks = (1ull << 30) / 4096;
    st->f_bfree = st->f_bavail = st->f_blocks - (used + 4095) / 4096;
    st->f_files = files + 1000000;
    st->f_ffree = st->f_favail = 1000000;
    st->f_namemax = GMTF_FS_NAME_MAX;
    return 0;
}
