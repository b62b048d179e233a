/* The image I/O layer: every byte of an image is read and written through a
 * gmtf_image_ops table. Two implementations: a file or block device (with
 * an OFD lock), and memory (tests). Tests wrap either to record writes and
 * inject faults. Free space in the middle of a file image is given back to
 * the host by punching holes (alloc.c decides what is free). */
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/major.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fs_internal.h"

typedef struct file_img {
    int fd;
    int backing_fd; /* a loop device's backing file, held for its lock; -1 */
} file_img;

static int file_pread(void *ctx, void *buf, size_t n, uint64_t off)
{
    file_img *f = ctx;
    uint8_t *p = buf;
    while (n) {
        ssize_t r = pread(f->fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -EIO; /* past the end: the image is truncated */
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int file_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    file_img *f = ctx;
    const uint8_t *p = buf;
    while (n) {
        ssize_t r = pwrite(f->fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -EIO;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int file_flush(void *ctx)
{
    file_img *f = ctx;
    return fdatasync(f->fd) ? -errno : 0;
}

static int file_size(void *ctx, uint64_t *size)
{
    file_img *f = ctx;
    struct stat st;
    if (fstat(f->fd, &st))
        return -errno;
    if (S_ISBLK(st.st_mode)) {
        uint64_t b = 0;
        if (ioctl(f->fd, BLKGETSIZE64, &b))
            return -errno;
        *size = b;
    } else {
        *size = (uint64_t)st.st_size;
    }
    return 0;
}

static int file_truncate(void *ctx, uint64_t size)
{
    file_img *f = ctx;
    struct stat st;
    if (fstat(f->fd, &st))
        return -errno;
    if (!S_ISREG(st.st_mode))
        return 0;
    return ftruncate(f->fd, (off_t)size) ? -errno : 0;
}

static int file_host_free(void *ctx, uint64_t *bytes)
{
    file_img *f = ctx;
    struct statvfs sv;
    if (fstatvfs(f->fd, &sv))
        return -errno;
    *bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
    return 0;
}

static int file_punch(void *ctx, uint64_t off, uint64_t len)
{
    file_img *f = ctx;
    struct stat st;
    if (fstat(f->fd, &st))
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EOPNOTSUPP; /* a device keeps its blocks */
    if (fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
        return errno == ENOSYS ? -EOPNOTSUPP : -errno;
    return 0;
}

static int file_reserve(void *ctx, uint64_t off, uint64_t len)
{
    file_img *f = ctx;
    struct stat st;
    if (fstat(f->fd, &st))
        return -errno;
    if (!S_ISREG(st.st_mode))
        return 0; /* a device has all its blocks */
    while (fallocate(f->fd, 0, (off_t)off, (off_t)len)) {
        if (errno == EINTR)
            continue;
        return errno == ENOSYS ? -EOPNOTSUPP : -errno;
    }
    return 0;
}

static int file_allocated(void *ctx, uint64_t *bytes)
{
    file_img *f = ctx;
    struct stat st;
    if (fstat(f->fd, &st))
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EOPNOTSUPP;
    *bytes = (uint64_t)st.st_blocks * 512;
    return 0;
}

static void file_close(void *ctx)
{
    file_img *f = ctx;
    close(f->fd);
    if (f->backing_fd >= 0)
        close(f->backing_fd);
    free(f);
}

static const gmtf_image_ops file_ops = {
    .pread = file_pread,
    .pwrite = file_pwrite,
    .flush = file_flush,
    .size = file_size,
    .truncate = file_truncate,
    .host_free = file_host_free,
    .close = file_close,
    .punch = file_punch,
    .reserve = file_reserve,
    .allocated = file_allocated,
};

static int image_lock(int fd, int ro)
{
    /* OFD locks belong to the open file, not the process: a second open in
     * the same process (a test, a second mount) is refused too. */
    struct flock fl = {.l_type = ro ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_OFD_SETLK, &fl))
        return (errno == EAGAIN || errno == EACCES) ? -EBUSY : -errno;
    return 0;
}

/* A loop device over a file is that file: the same lock is taken on the
 * backing file, so a mount of the file and one of the device (or of two
 * devices over it) exclude each other. Returns the backing file's
 * descriptor (locked), -1 when fd is no loop device or it has no file to
 * lock, or a negative code (-EBUSY) below -1. */
static int lock_loop_backing(int fd, const struct stat *st, int ro)
{
    if (!S_ISBLK(st->st_mode) || major(st->st_rdev) != LOOP_MAJOR)
        return -1;
    char sys[96], path[4096];
    snprintf(sys, sizeof sys, "/sys/dev/block/%u:%u/loop/backing_file", major(st->st_rdev),
             minor(st->st_rdev));
    int sfd = open(sys, O_RDONLY | O_CLOEXEC);
    if (sfd < 0)
        return -1; /* not attached */
    ssize_t n = read(sfd, path, sizeof path - 1);
    close(sfd);
    if (n <= 0)
        return -1;
    path[n] = 0;
    if (path[n - 1] == '\n')
        path[n - 1] = 0;
    int bfd = open(path, (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    struct loop_info64 li;
    struct stat bst;
    if (bfd < 0)
        return -1; /* deleted, or out of reach: the device's own lock only */
    if (ioctl(fd, LOOP_GET_STATUS64, &li) || fstat(bfd, &bst) || bst.st_ino != li.lo_inode ||
        bst.st_dev != li.lo_device) {
        close(bfd); /* renamed meanwhile: not the file the device reads */
        return -1;
    }
    int rc = image_lock(bfd, ro);
    if (rc) {
        close(bfd);
        return rc < -1 ? rc : -EBUSY;
    }
    return bfd;
}

int gmtf_image_open_file(const char *path, int flags, gmtf_image **out)
{
    int ro = flags & GMTF_IMAGE_RDONLY;
    int oflags = (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC;
    if (flags & GMTF_IMAGE_CREATE)
        oflags |= O_CREAT;
    int fd = open(path, oflags, 0644);
    if (fd < 0)
        return -errno;
    int rc = flags & GMTF_IMAGE_NOLOCK ? 0 : image_lock(fd, ro);
    if (rc) {
        close(fd);
        return rc;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return -e;
    }
    int bfd = flags & GMTF_IMAGE_NOLOCK ? -1 : lock_loop_backing(fd, &st, ro);
    if (bfd < -1) {
        close(fd);
        return bfd;
    }
    gmtf_image *img = calloc(1, sizeof *img);
    file_img *f = calloc(1, sizeof *f);
    if (!img || !f) {
        free(img);
        free(f);
        close(fd);
        if (bfd >= 0)
            close(bfd);
        return -ENOMEM;
    }
    f->fd = fd;
    f->backing_fd = bfd;
    img->ops = &file_ops;
    img->ctx = f;
    img->is_blockdev = S_ISBLK(st.st_mode);
    *out = img;
    return 0;
}

typedef struct mem_img {
    uint8_t *p;
    size_t len, cap;
} mem_img;

static int mem_pread(void *ctx, void *buf, size_t n, uint64_t off)
{
    mem_img *m = ctx;
    if (off > m->len || n > m->len - off)
        return -EIO;
    memcpy(buf, m->p + off, n);
    return 0;
}

static int mem_resize(mem_img *m, size_t len)
{
    if (len > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < len)
            cap *= 2;
        uint8_t *p = realloc(m->p, cap);
        if (!p)
            return -ENOMEM;
        m->p = p;
        m->cap = cap;
    }
    if (len > m->len)
        memset(m->p + m->len, 0, len - m->len);
    m->len = len;
    return 0;
}

static int mem_pwrite(void *ctx, const void *buf, size_t n, uint64_t off)
{
    mem_img *m = ctx;
    if (off + n > m->len) {
        int rc = mem_resize(m, off + n);
        if (rc)
            return rc;
    }
    memcpy(m->p + off, buf, n);
    return 0;
}

static int mem_flush(void *ctx)
{
    (void)ctx;
    return 0;
}

static int mem_size(void *ctx, uint64_t *size)
{
    *size = ((mem_img *)ctx)->len;
    return 0;
}

static int mem_truncate(void *ctx, uint64_t size)
{
    return mem_resize(ctx, size);
}

/* Zeros, as a punched host file reads; the length stays. */
static int mem_punch(void *ctx, uint64_t off, uint64_t len)
{
    mem_img *m = ctx;
    if (off < m->len)
        memset(m->p + off, 0, len < m->len - off ? len : m->len - off);
    return 0;
}

static int mem_reserve(void *ctx, uint64_t off, uint64_t len)
{
    mem_img *m = ctx;
    return off + len > m->len ? mem_resize(m, off + len) : 0;
}

static void mem_close(void *ctx)
{
    mem_img *m = ctx;
    free(m->p);
    free(m);
}

static const gmtf_image_ops mem_ops = {
    .pread = mem_pread,
    .pwrite = mem_pwrite,
    .flush = mem_flush,
    .size = mem_size,
    .truncate = mem_truncate,
    .close = mem_close,
    .punch = mem_punch,
    .reserve = mem_reserve,
};

int gmtf_image_open_mem(const void *data, size_t len, gmtf_image **out)
{
    gmtf_image *img = calloc(1, sizeof *img);
    mem_img *m = calloc(1, sizeof *m);
    if (!img || !m || mem_resize(m, len)) {
        free(img);
        if (m)
            free(m->p);
        free(m);
        return -ENOMEM;
    }
    if (len)
        memcpy(m->p, data, len);
    img->ops = &mem_ops;
    img->ctx = m;
    *out = img;
    return 0;
}

const uint8_t *gmtf_image_mem_data(gmtf_image *img, size_t *len)
{
    if (img->ops != &mem_ops)
        return NULL;
    mem_img *m = img->ctx;
    *len = m->len;
    return m->p;
}

/* ---- the filesystem's access to its image ---------------------------------- */

int img_read(gmtf_fs *fs, void *buf, size_t n, uint64_t off)
{
    return fs->img->ops->pread(fs->img->ctx, buf, n, off);
}

int img_write(gmtf_fs *fs, const void *buf, size_t n, uint64_t off)
{
    if (fs->ro)
        return -EROFS;
    return fs->img->ops->pwrite(fs->img->ctx, buf, n, off);
}

int img_flush(gmtf_fs *fs)
{
    if (fs->ro)
        return -EROFS;
    if (fs->opt.no_flush)
        return 0;
    return fs->img->ops->flush(fs->img->ctx);
}

int img_size(gmtf_fs *fs, uint64_t *size)
{
    return fs->img->ops->size(fs->img->ctx, size);
}

int img_truncate(gmtf_fs *fs, uint64_t size)
{
    if (fs->ro)
        return -EROFS;
    return fs->img->ops->truncate(fs->img->ctx, size);
}

int img_host_free(gmtf_fs *fs, uint64_t *bytes)
{
    if (!fs->img->ops->host_free)
        return -EOPNOTSUPP;
    return fs->img->ops->host_free(fs->img->ctx, bytes);
}

int img_reserve(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (fs->ro)
        return -EROFS;
    if (!fs->img->ops->reserve)
        return -EOPNOTSUPP;
    return fs->img->ops->reserve(fs->img->ctx, off, len);
}

int img_allocated(gmtf_fs *fs, uint64_t *bytes)
{
    if (!fs->img->ops->allocated)
        return -EOPNOTSUPP;
    return fs->img->ops->allocated(fs->img->ctx, bytes);
}

int img_punchable(const gmtf_fs *fs)
{
    return !fs->img->is_blockdev && fs->img->ops->punch;
}

int img_punch(gmtf_fs *fs, uint64_t off, uint64_t len)
{
    if (fs->ro)
        return -EROFS;
    if (!img_punchable(fs))
        return -EOPNOTSUPP;
    return fs->img->ops->punch(fs->img->ctx, off, len);
}

void gmtf_image_close(gmtf_image *img)
{
    if (!img)
        return;
    if (img->ops->close)
        img->ops->close(img->ctx);
    free(img);
}
