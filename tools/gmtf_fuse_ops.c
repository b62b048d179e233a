/* The FUSE low-level operations of gmtf: one function per request, each a
 * thin call into fs/gmtf_fs.h. The library counts lookups (track_lookups),
 * so every reply that hands the kernel an inode (entry, create) counts one,
 * and a reply the kernel never received is forgotten again. Errors from the
 * library are negative errno codes and go back as fuse_reply_err. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "gmtf_fuse.h"

static gmtf_mount *mount_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static void reply_rc(fuse_req_t req, long rc)
{
    fuse_reply_err(req, rc < 0 ? (int)-rc : 0);
}

/* A per-thread buffer for reads, gathered writes and xattr values: replies
 * copy it out before the thread takes its next request. */
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
typedef struct tl_buf {
    size_t cap;
    char data[];
} tl_buf;
static void tl_make_key(void)
{
    pthread_key_create(&tl_key, free);
}

static void *thread_buffer(size_t n)
{
    pthread_once(&tl_once, tl_make_key);
    tl_buf *b = pthread_getspecific(tl_key);
    if (b && b->cap >= n)
        return b->data;
    size_t cap = b ? b->cap : 0;
    while (cap < n)
        cap = cap ? cap * 2 : 64u << 10;
    tl_buf *nb = malloc(sizeof *nb + cap);
    if (!nb)
        return NULL;
    nb->cap = cap;
    free(b);
    pthread_setspecific(tl_key, nb);
    return nb->data;
}

static void fill_entry(const gmtf_mount *m, const gmtf_entry *e, struct fuse_entry_param *fe)
{
    memset(fe, 0, sizeof *fe);
    fe->ino = e->attr.st_ino;
    fe->generation = e->generation;
    fe->attr = e->attr;
    fe->attr_timeout = m->attr_timeout;
    fe->entry_timeout = m->entry_timeout;
}

/* Replies with a new entry; the lookup the library counted is dropped
 * again when the kernel did not get the reply (interrupted request). */
static void reply_entry(fuse_req_t req, const gmtf_entry *e)
{
    gmtf_mount *m = mount_of(req);
    struct fuse_entry_param fe;
    fill_entry(m, e, &fe);
    if (fuse_reply_entry(req, &fe) != 0)
        gmtf_fs_forget(m->fs, fe.ino, 1);
}

#define REFUSE_IF_RO(req)                                                                          \
    do {                                                                                           \
        if (mount_of(req)->read_only) {                                                            \
            fuse_reply_err(req, EROFS);                                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- session ---------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    gmtf_mount *m = userdata;
    unsigned want = FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_READDIRPLUS |
                    FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_ASYNC_READ |
                    FUSE_CAP_ASYNC_DIO;
    if (m->writeback)
        want |= FUSE_CAP_WRITEBACK_CACHE;
    /* The kernel enforces ACLs; umask is then ours to apply, because a
     * parent's default ACL replaces it (acl(5)). */
    if (m->acl)
        want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
    conn->want |= want & conn->capable;
    if (!(conn->capable & FUSE_CAP_POSIX_ACL))
        m->acl = 0;
    if (!(conn->capable & FUSE_CAP_WRITEBACK_CACHE))
        m->writeback = 0;
    /* Let the kernel clear setuid/setgid on write, truncate and chown. */
    conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
    /* Data goes through user memory for the codec anyway: a plain read of
     * the request hands its buffer straight to gmtf_fs_write, no copy. */
    conn->want &= ~(unsigned)(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
    if (m->max_write)
        conn->max_write = m->max_write;
    conn->time_gran = 1;
    __atomic_store_n(&m->init_done, 1, __ATOMIC_RELEASE);
}

static void op_destroy(void *userdata)
{
    gmtf_mount *m = userdata;
    /* The kernel is gone: make everything durable now; main() then
     * unmounts the library, which writes the final checkpoint. */
    if (!m->read_only) {
        int rc = gmtf_fs_syncfs(m->fs);
        if (rc < 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "sync at unmount failed: %s", strerror(-rc));
            gmtf_mount_log(m, msg);
        }
    }
}

/* ---- names and inodes ------------------------------------------------- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    gmtf_mount *m = mount_of(req);
    gmtf_entry e;
    int rc = gmtf_fs_lookup(m->fs, parent, name, &e);
    if (rc == -ENOENT && m->entry_timeout > 0) {
        /* Negative entry: every create goes through this kernel, so the
         * name cannot appear behind its back. */
        struct fuse_entry_param fe;
        memset(&fe, 0, sizeof fe);
        fe.entry_timeout = m->entry_timeout;
        fuse_reply_entry(req, &fe);
        return;
    }
    if (rc < 0) {
        reply_rc(req, rc);
        return;
    }
    reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    gmtf_fs_forget(mount_of(req)->fs, ino, nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    gmtf_mount *m = mount_of(req);
    for (size_t i = 0; i < count; i++)
        gmtf_fs_forget(m->fs, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    gmtf_mount *m = mount_of(req);
    struct stat st;
    int rc = gmtf_fs_getattr(m->fs, ino, &st);
    if (rc < 0)
        reply_rc(req, rc);
    else
        fuse_reply_attr(req, &st, m->attr_timeout);
}

/* chmod keeps the base entries of an access ACL equal to the mode. */
static int acl_follow_chmod(gmtf_mount *m, fuse_ino_t ino, mode_t mode)
{
    long n = gmtf_fs_getxattr(m->fs, ino, GMTF_ACL_ACCESS, NULL, 0);
    if (n == -ENODATA)
        return 0;
    if (n <= 0)
        return n < 0 ? (int)n : 0;
    void *acl = malloc((size_t)n);
    if (!acl)
        return -ENOMEM;
    long got = gmtf_fs_getxattr(m->fs, ino, GMTF_ACL_ACCESS, acl, (size_t)n);
    int rc = got < 0 ? (int)got : 0;
    if (rc == 0 && gmtf_acl_valid(acl, (size_t)got) == 0) {
        gmtf_acl_chmod(acl, (size_t)got, mode);
        rc = gmtf_fs_setxattr(m->fs, ino, GMTF_ACL_ACCESS, acl, (size_t)got, 0);
    }
    free(acl);
    return rc;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)fi;
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    static const struct {
        int fuse;
        unsigned gmtf;
    } map[] = {
        {FUSE_SET_ATTR_MODE, GMTF_SET_MODE},
        {FUSE_SET_ATTR_UID, GMTF_SET_UID},
        {FUSE_SET_ATTR_GID, GMTF_SET_GID},
        {FUSE_SET_ATTR_SIZE, GMTF_SET_SIZE},
        {FUSE_SET_ATTR_ATIME, GMTF_SET_ATIME},
        {FUSE_SET_ATTR_MTIME, GMTF_SET_MTIME},
        {FUSE_SET_ATTR_ATIME_NOW, GMTF_SET_ATIME_NOW},
        {FUSE_SET_ATTR_MTIME_NOW, GMTF_SET_MTIME_NOW},
        {FUSE_SET_ATTR_CTIME, GMTF_SET_CTIME},
    };
    unsigned set = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (to_set & map[i].fuse)
            set |= map[i].gmtf;
    struct stat out;
    int rc = gmtf_fs_setattr(m->fs, ino, attr, set, &out);
    if (rc == 0 && (set & GMTF_SET_MODE) && m->acl)
        rc = acl_follow_chmod(m, ino, attr->st_mode & 07777);
    if (rc < 0)
        reply_rc(req, rc);
    else
        fuse_reply_attr(req, &out, m->attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    gmtf_mount *m = mount_of(req);
    size_t cap = 4096;
    for (;;) {
        char *buf = thread_buffer(cap + 1);
        if (!buf) {
            fuse_reply_err(req, ENOMEM);
            return;
        }
        long n = gmtf_fs_readlink(m->fs, ino, buf, cap);
        if (n < 0) {
            reply_rc(req, n);
            return;
        }
        if ((size_t)n <= cap) {
            buf[n] = '\0';
            fuse_reply_readlink(req, buf);
            return;
        }
        cap = (size_t)n; /* longer than guessed: read it again whole */
    }
}

/* What a new node gets from its creator and its parent: owner, group
 * (setgid directories pass theirs on), mode after umask or after the
 * parent's default ACL, and the ACLs to store on it. */
typedef struct node_init {
    uid_t uid;
    gid_t gid;
    mode_t mode;
    void *access, *dflt;
    size_t access_size, dflt_size;
} node_init;

static void node_init_free(node_init *ni)
{
    free(ni->access);
    free(ni->dflt);
}

static long read_xattr_alloc(gmtf_fs *fs, uint64_t ino, const char *name, void **out)
{
    *out = NULL;
    for (int tries = 0; tries < 4; tries++) {
        long n = gmtf_fs_getxattr(fs, ino, name, NULL, 0);
        if (n <= 0)
            return n;
        void *buf = malloc((size_t)n);
        if (!buf)
            return -ENOMEM;
        long got = gmtf_fs_getxattr(fs, ino, name, buf, (size_t)n);
        if (got >= 0) {
            *out = buf;
            return got;
        }
        free(buf);
        if (got != -ERANGE) /* -ERANGE: it grew meanwhile, ask again */
            return got;
    }
    return -EAGAIN;
}

static int node_init_prepare(fuse_req_t req, fuse_ino_t parent, mode_t mode, int is_dir,
                             int is_link, node_init *ni)
{
    gmtf_mount *m = mount_of(req);
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    memset(ni, 0, sizeof *ni);
    struct stat pst;
    int rc = gmtf_fs_getattr(m->fs, parent, &pst);
    if (rc < 0)
        return rc;
    if (!S_ISDIR(pst.st_mode))
        return -ENOTDIR;
    ni->uid = ctx->uid;
    ni->gid = ctx->gid;
    if (pst.st_mode & S_ISGID) {
        ni->gid = pst.st_gid;
        if (is_dir)
            mode |= S_ISGID;
    }
    if (is_link) {
        ni->mode = mode;
        return 0;
    }
    int inherited = 0;
    if (m->acl) {
        void *dflt;
        long n = read_xattr_alloc(m->fs, parent, GMTF_ACL_DEFAULT, &dflt);
        if (n < 0 && n != -ENODATA)
            return (int)n;
        if (n > 0 && gmtf_acl_valid(dflt, (size_t)n) == 0) {
            mode_t perm = mode & 0777;
            rc = gmtf_acl_inherit(dflt, (size_t)n, &perm, &ni->access, &ni->access_size);
            if (rc < 0) {
                free(dflt);
                return rc;
            }
            mode = (mode & ~(mode_t)0777) | perm;
            inherited = 1;
            if (is_dir) {
                ni->dflt = dflt;
                ni->dflt_size = (size_t)n;
                dflt = NULL;
            }
        }
        free(dflt);
    }
    if (!inherited)
        mode &= ~ctx->umask;
    ni->mode = mode;
    return 0;
}

/* Stores the ACLs a new node inherited. A failure here leaves the node
 * with the (already reduced) mode, which is never more permissive. */
static int node_init_finish(gmtf_mount *m, uint64_t ino, const node_init *ni)
{
    int rc = 0;
    if (ni->access)
        rc = gmtf_fs_setxattr(m->fs, ino, GMTF_ACL_ACCESS, ni->access, ni->access_size, 0);
    if (rc == 0 && ni->dflt)
        rc = gmtf_fs_setxattr(m->fs, ino, GMTF_ACL_DEFAULT, ni->dflt, ni->dflt_size, 0);
    return rc;
}

/* Stores inherited ACLs and refreshes the attributes the reply carries. */
static void refresh_after_acl(gmtf_mount *m, gmtf_entry *e, const node_init *ni)
{
    struct stat st;
    if (node_init_finish(m, e->attr.st_ino, ni) == 0 &&
        gmtf_fs_getattr(m->fs, e->attr.st_ino, &st) == 0)
        e->attr = st;
}

enum node_kind { NODE_FILE, NODE_DIR, NODE_LINK };

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
                      const char *target, enum node_kind kind)
{
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    node_init ni;
    int rc = node_init_prepare(req, parent, mode, kind == NODE_DIR, kind == NODE_LINK, &ni);
    if (rc < 0) {
        reply_rc(req, rc);
        return;
    }
    gmtf_entry e;
    switch (kind) {
    case NODE_DIR:
        rc = gmtf_fs_mkdir(m->fs, parent, name, ni.mode & 07777, ni.uid, ni.gid, &e);
        break;
    case NODE_LINK: rc = gmtf_fs_symlink(m->fs, parent, name, target, ni.uid, ni.gid, &e); break;
    default: rc = gmtf_fs_mknod(m->fs, parent, name, ni.mode, rdev, ni.uid, ni.gid, &e); break;
    }
    if (rc == 0 && (ni.access || ni.dflt))
        refresh_after_acl(m, &e, &ni);
    node_init_free(&ni);
    if (rc < 0)
        reply_rc(req, rc);
    else
        reply_entry(req, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    make_node(req, parent, name, mode, rdev, NULL, NODE_FILE);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    make_node(req, parent, name, (mode & 07777) | S_IFDIR, 0, NULL, NODE_DIR);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    make_node(req, parent, name, S_IFLNK | 0777, 0, link, NODE_LINK);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    REFUSE_IF_RO(req);
    gmtf_entry e;
    int rc = gmtf_fs_link(mount_of(req)->fs, ino, newparent, newname, &e);
    if (rc < 0)
        reply_rc(req, rc);
    else
        reply_entry(req, &e);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    REFUSE_IF_RO(req);
    reply_rc(req, gmtf_fs_unlink(mount_of(req)->fs, parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    REFUSE_IF_RO(req);
    reply_rc(req, gmtf_fs_rmdir(mount_of(req)->fs, parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    REFUSE_IF_RO(req);
    if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
        fuse_reply_err(req, EINVAL); /* RENAME_WHITEOUT: overlayfs only */
        return;
    }
    unsigned gflags = 0;
    if (flags & RENAME_NOREPLACE)
        gflags |= GMTF_RENAME_NOREPLACE;
    if (flags & RENAME_EXCHANGE)
        gflags |= GMTF_RENAME_EXCHANGE;
    reply_rc(req, gmtf_fs_rename(mount_of(req)->fs, parent, name, newparent, newname, gflags));
}

/* ---- file data ---------------------------------------------------------- */

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    gmtf_mount *m = mount_of(req);
    if (m->read_only && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))) {
        fuse_reply_err(req, EROFS);
        return;
    }
    int rc = gmtf_fs_open(m->fs, ino, fi->flags);
    if (rc < 0) {
        reply_rc(req, rc);
        return;
    }
    /* Only this kernel changes the data, so its cached pages stay valid
     * from one open to the next. */
    fi->keep_cache = 1;
    if (fuse_reply_open(req, fi) != 0)
        gmtf_fs_release(m->fs, ino);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    node_init ni;
    int rc = node_init_prepare(req, parent, mode, 0, 0, &ni);
    gmtf_entry e;
    if (rc == 0)
        rc = gmtf_fs_create(m->fs, parent, name, ni.mode, ni.uid, ni.gid, fi->flags, &e);
    if (rc == 0 && (ni.access || ni.dflt))
        refresh_after_acl(m, &e, &ni);
    node_init_free(&ni);
    if (rc < 0) {
        reply_rc(req, rc);
        return;
    }
    fi->keep_cache = 1;
    struct fuse_entry_param fe;
    fill_entry(m, &e, &fe);
    if (fuse_reply_create(req, &fe, fi) != 0) {
        gmtf_fs_release(m->fs, fe.ino);
        gmtf_fs_forget(m->fs, fe.ino, 1);
    }
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)fi;
    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    char *buf = thread_buffer(size ? size : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    long n = gmtf_fs_read(mount_of(req)->fs, ino, buf, size, (uint64_t)off);
    if (n < 0)
        reply_rc(req, n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
}

/* The library stamps mtime/ctime and clears setuid/setgid on every write,
 * as a write(2) on ext4 would. Under the writeback cache a WRITE is the
 * kernel flushing pages later: the kernel already decided those
 * attributes (and sends them by SETATTR, maybe ahead of this WRITE), so
 * the library is told to leave them alone. */
static long write_data(gmtf_mount *m, fuse_ino_t ino, const void *data, size_t n, uint64_t off)
{
    return gmtf_fs_write_flags(m->fs, ino, data, n, off, m->writeback ? GMTF_WRITE_KEEP_ATTRS : 0);
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
                         struct fuse_file_info *fi)
{
    (void)fi;
    REFUSE_IF_RO(req);
    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    size_t n = fuse_buf_size(in);
    const char *data;
    if (in->count == 1 && in->idx == 0 && !(in->buf[0].flags & FUSE_BUF_IS_FD)) {
        data = (const char *)in->buf[0].mem + in->off; /* the request buffer itself */
        n = in->buf[0].size - in->off;
    } else {
        char *tmp = thread_buffer(n ? n : 1);
        if (!tmp) {
            fuse_reply_err(req, ENOMEM);
            return;
        }
        struct fuse_bufvec out = FUSE_BUFVEC_INIT(n);
        out.buf[0].mem = tmp;
        ssize_t got = fuse_buf_copy(&out, in, 0);
        if (got < 0) {
            fuse_reply_err(req, (int)-got);
            return;
        }
        data = tmp;
        n = (size_t)got;
    }
    long w = write_data(mount_of(req), ino, data, n, (uint64_t)off);
    if (w < 0)
        reply_rc(req, w);
    else
        fuse_reply_write(req, (size_t)w);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    /* close(2) does not imply durability; the flusher and fsync do. */
    fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    reply_rc(req, gmtf_fs_release(mount_of(req)->fs, ino));
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)fi;
    gmtf_mount *m = mount_of(req);
    if (m->read_only) {
        fuse_reply_err(req, 0);
        return;
    }
    reply_rc(req, gmtf_fs_fsync(m->fs, ino, datasync));
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi)
{
    (void)fi;
    REFUSE_IF_RO(req);
    if (off < 0 || len <= 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    int gmode = 0;
    if (mode & FALLOC_FL_KEEP_SIZE)
        gmode |= GMTF_FALLOC_KEEP_SIZE;
    if (mode & FALLOC_FL_PUNCH_HOLE)
        gmode |= GMTF_FALLOC_PUNCH_HOLE;
    if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) {
        fuse_reply_err(req, EOPNOTSUPP);
        return;
    }
    reply_rc(req, gmtf_fs_fallocate(mount_of(req)->fs, ino, gmode, (uint64_t)off, (uint64_t)len));
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi)
{
    (void)fi;
    int64_t r = gmtf_fs_lseek(mount_of(req)->fs, ino, off, whence);
    if (r < 0)
        reply_rc(req, (long)r);
    else
        fuse_reply_lseek(req, r);
}

/* ---- directories ---------------------------------------------------------- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    /* Listings change only through this kernel, which drops its cached
     * copy whenever it changes the directory. */
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    op_fsync(req, ino, datasync, fi);
}

/* Plain readdir: entries go straight into the reply buffer. */
typedef struct dir_fill {
    fuse_req_t req;
    char *buf;
    size_t size, pos;
} dir_fill;

static int fill_plain(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
    dir_fill *d = arg;
    size_t need =
        fuse_add_direntry(d->req, d->buf + d->pos, d->size - d->pos, name, st, (off_t)next_off);
    if (need > d->size - d->pos)
        return 1; /* full: this entry comes first next time */
    d->pos += need;
    return 0;
}

/* readdirplus: names are gathered first and looked up after the listing
 * returns, so the library is never re-entered from its own callback. */
typedef struct plus_ent {
    uint64_t ino, next_off;
    mode_t type;
    size_t name_at;
    int counted; /* a lookup was counted for it and sent */
} plus_ent;

typedef struct plus_fill {
    fuse_req_t req;
    size_t size, used;
    plus_ent *ents;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
    int err;
} plus_fill;

static int fill_plus(void *arg, const char *name, const struct stat *st, uint64_t next_off)
{
    plus_fill *p = arg;
    size_t need = fuse_add_direntry_plus(p->req, NULL, 0, name, NULL, 0);
    if (p->used + need > p->size)
        return 1;
    size_t len = strlen(name) + 1;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        plus_ent *ne = realloc(p->ents, cap * sizeof *ne);
        if (!ne) {
            p->err = -ENOMEM;
            return 1;
        }
        p->ents = ne;
        p->cap = cap;
    }
    if (p->names_len + len > p->names_cap) {
        size_t cap = p->names_cap ? p->names_cap * 2 : 4096;
        while (cap < p->names_len + len)
            cap *= 2;
        char *nn = realloc(p->names, cap);
        if (!nn) {
            p->err = -ENOMEM;
            return 1;
        }
        p->names = nn;
        p->names_cap = cap;
    }
    memcpy(p->names + p->names_len, name, len);
    p->ents[p->n++] = (plus_ent){.ino = st->st_ino,
                                 .next_off = next_off,
                                 .type = st->st_mode & S_IFMT,
                                 .name_at = p->names_len};
    p->names_len += len;
    p->used += need;
    return 0;
}

static int is_dot_or_dotdot(const char *name)
{
    return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

static void readdir_plus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off)
{
    gmtf_mount *m = mount_of(req);
    plus_fill p = {.req = req, .size = size};
    int rc = gmtf_fs_readdir(m->fs, ino, (uint64_t)off, fill_plus, &p);
    if (rc == 0)
        rc = p.err;
    char *buf = rc == 0 ? thread_buffer(size ? size : 1) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    size_t pos = 0;
    for (size_t i = 0; rc == 0 && i < p.n; i++) {
        const char *name = p.names + p.ents[i].name_at;
        struct fuse_entry_param fe;
        memset(&fe, 0, sizeof fe);
        int looked_up = 0;
        if (is_dot_or_dotdot(name)) {
            /* The kernel skips these; no lookup is counted for them. */
            fe.attr.st_ino = p.ents[i].ino;
            fe.attr.st_mode = p.ents[i].type;
        } else {
            gmtf_entry e;
            int lr = gmtf_fs_lookup(m->fs, ino, name, &e);
            if (lr == -ENOENT)
                continue; /* removed since it was listed */
            if (lr < 0) {
                if (pos == 0)
                    rc = lr;
                break;
            }
            fill_entry(m, &e, &fe);
            looked_up = 1;
        }
        size_t need = fuse_add_direntry_plus(req, buf + pos, size - pos, name, &fe,
                                             (off_t)p.ents[i].next_off);
        if (need > size - pos) {
            if (looked_up)
                gmtf_fs_forget(m->fs, fe.ino, 1);
            break;
        }
        pos += need;
        p.ents[i].counted = looked_up;
        p.ents[i].ino = fe.ino;
    }
    if (rc < 0) {
        reply_rc(req, rc);
    } else if (fuse_reply_buf(req, buf, pos) != 0) {
        /* The kernel never saw these entries (interrupted): uncount. */
        for (size_t i = 0; i < p.n; i++)
            if (p.ents[i].counted)
                gmtf_fs_forget(m->fs, p.ents[i].ino, 1);
    }
    free(p.ents);
    free(p.names);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    char *buf = thread_buffer(size ? size : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    dir_fill d = {.req = req, .buf = buf, .size = size};
    int rc = gmtf_fs_readdir(mount_of(req)->fs, ino, (uint64_t)off, fill_plain, &d);
    if (rc < 0)
        reply_rc(req, rc);
    else
        fuse_reply_buf(req, buf, d.pos);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)fi;
    readdir_plus(req, ino, size, off);
}

/* ---- whole filesystem ------------------------------------------------------ */

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs st;
    int rc = gmtf_fs_statfs(mount_of(req)->fs, &st);
    if (rc < 0)
        reply_rc(req, rc);
    else
        fuse_reply_statfs(req, &st);
}

/* ---- extended attributes ------------------------------------------------------ */

static int is_acl_name(const char *name)
{
    return strcmp(name, GMTF_ACL_ACCESS) == 0 || strcmp(name, GMTF_ACL_DEFAULT) == 0;
}

/* Setting an access ACL sets the mode's rwx bits from it; an ACL that says
 * no more than the mode is not stored at all (as ext4 does). */
static int set_access_acl(gmtf_mount *m, fuse_ino_t ino, const char *value, size_t size, int flags)
{
    if (gmtf_acl_valid(value, size) < 0)
        return -EINVAL;
    struct stat st;
    int rc = gmtf_fs_getattr(m->fs, ino, &st);
    if (rc < 0)
        return rc;
    mode_t perm;
    int equiv = gmtf_acl_to_mode(value, size, &perm);
    if (equiv) {
        if (flags & XATTR_REPLACE) {
            long n = gmtf_fs_getxattr(m->fs, ino, GMTF_ACL_ACCESS, NULL, 0);
            if (n < 0)
                return (int)n;
        }
        rc = gmtf_fs_removexattr(m->fs, ino, GMTF_ACL_ACCESS);
        if (rc < 0 && rc != -ENODATA)
            return rc;
    } else {
        rc = gmtf_fs_setxattr(m->fs, ino, GMTF_ACL_ACCESS, value, size, flags);
        if (rc < 0)
            return rc;
    }
    struct stat ns = {.st_mode = (st.st_mode & 07000) | perm};
    return gmtf_fs_setattr(m->fs, ino, &ns, GMTF_SET_MODE, NULL);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    int gflags = 0;
    if (flags & XATTR_CREATE)
        gflags |= GMTF_XATTR_CREATE;
    if (flags & XATTR_REPLACE)
        gflags |= GMTF_XATTR_REPLACE;
    int rc;
    if (is_acl_name(name)) {
        if (!m->acl)
            rc = -EOPNOTSUPP;
        else if (strcmp(name, GMTF_ACL_ACCESS) == 0)
            rc = set_access_acl(m, ino, value, size, gflags);
        else if (gmtf_acl_valid(value, size) < 0)
            rc = -EINVAL;
        else
            rc = gmtf_fs_setxattr(m->fs, ino, name, value, size, gflags);
    } else {
        rc = gmtf_fs_setxattr(m->fs, ino, name, value, size, gflags);
    }
    reply_rc(req, rc);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    gmtf_mount *m = mount_of(req);
    if (is_acl_name(name) && !m->acl) {
        fuse_reply_err(req, EOPNOTSUPP);
        return;
    }
    if (size == 0) {
        long n = gmtf_fs_getxattr(m->fs, ino, name, NULL, 0);
        if (n < 0)
            reply_rc(req, n);
        else
            fuse_reply_xattr(req, (size_t)n);
        return;
    }
    char *buf = thread_buffer(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    long n = gmtf_fs_getxattr(m->fs, ino, name, buf, size);
    if (n < 0)
        reply_rc(req, n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    gmtf_mount *m = mount_of(req);
    if (size == 0) {
        long n = gmtf_fs_listxattr(m->fs, ino, NULL, 0);
        if (n < 0)
            reply_rc(req, n);
        else
            fuse_reply_xattr(req, (size_t)n);
        return;
    }
    char *buf = thread_buffer(size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    long n = gmtf_fs_listxattr(m->fs, ino, buf, size);
    if (n < 0)
        reply_rc(req, n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    if (is_acl_name(name) && !m->acl) {
        fuse_reply_err(req, EOPNOTSUPP);
        return;
    }
    reply_rc(req, gmtf_fs_removexattr(m->fs, ino, name));
}

const struct fuse_lowlevel_ops gmtf_fuse_ops = {
    .init = op_init,
    .destroy = op_destroy,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .open = op_open,
    .read = op_read,
    .write_buf = op_write_buf,
    .flush = op_flush,
    .release = op_release,
    .fsync = op_fsync,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .setxattr = op_setxattr,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .removexattr = op_removexattr,
    .create = op_create,
    .fallocate = op_fallocate,
    .lseek = op_lseek,
};
