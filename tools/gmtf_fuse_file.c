/* File data: open, create, read, write, flush, release, fsync, fallocate,
 * lseek. Reads and gathered writes use the per-thread buffer; a plain
 * write hands the request's own buffer to the library. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmtf_fuse.h"

void gmtf_fuse_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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

void gmtf_fuse_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    REFUSE_IF_RO(req);
    gmtf_mount *m = mount_of(req);
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    gmtf_make_req r = {.parent = parent,
                       .name = name,
                       .mode = S_IFREG | (mode & 07777),
                       .uid = ctx->uid,
                       .gid = ctx->gid,
                       .umask = ctx->umask,
                       .open = 1};
    gmtf_entry e;
    int rc = gmtf_fs_make(m->fs, &r, &e);
    if (rc < 0) {
        reply_rc(req, rc);
        return;
    }
    fi->keep_cache = 1;
    struct fuse_entry_param fe;
    gmtf_fuse_fill_entry(m, &e, &fe);
    if (fuse_reply_create(req, &fe, fi) != 0) {
        gmtf_fs_release(m->fs, fe.ino);
        gmtf_fs_forget(m->fs, fe.ino, 1);
    }
}

void gmtf_fuse_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)fi;
    if (off < 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    char *buf = gmtf_fuse_buffer(size ? size : 1);
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

void gmtf_fuse_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
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
        char *tmp = gmtf_fuse_buffer(n ? n : 1);
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

void gmtf_fuse_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    /* close(2) does not imply durability; the flusher and fsync do. */
    fuse_reply_err(req, 0);
}

void gmtf_fuse_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    reply_rc(req, gmtf_fs_release(mount_of(req)->fs, ino));
}

void gmtf_fuse_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)fi;
    gmtf_fuse_reply_fsync(req, ino, datasync);
}

void gmtf_fuse_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
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

void gmtf_fuse_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                     struct fuse_file_info *fi)
{
    (void)fi;
    int64_t r = gmtf_fs_lseek(mount_of(req)->fs, ino, off, whence);
    if (r < 0)
        reply_rc(req, (long)r);
    else
        fuse_reply_lseek(req, r);
}
