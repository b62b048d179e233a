/* What every part of the daemon uses: the per-thread reply buffer, entry
 * replies, the fsync reply, and the daemon's log line. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "gmtf_fuse.h"

void gmtf_mount_log(void *arg, const char *msg)
{
    const gmtf_mount *m = arg;
    if (m->daemonized)
        syslog(LOG_ERR, "%s: %s", m->image, msg);
    else
        fprintf(stderr, "gmtf: %s: %s\n", m->image, msg);
}

/* The per-thread buffer: freed with its thread. */
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

void *gmtf_fuse_buffer(size_t n)
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

void gmtf_fuse_fill_entry(const gmtf_mount *m, const gmtf_entry *e, struct fuse_entry_param *fe)
{
    memset(fe, 0, sizeof *fe);
    fe->ino = e->attr.st_ino;
    fe->generation = e->generation;
    fe->attr = e->attr;
    fe->attr_timeout = m->attr_timeout;
    fe->entry_timeout = m->entry_timeout;
}

void gmtf_fuse_reply_entry(fuse_req_t req, const gmtf_entry *e)
{
    gmtf_mount *m = mount_of(req);
    struct fuse_entry_param fe;
    gmtf_fuse_fill_entry(m, e, &fe);
    if (fuse_reply_entry(req, &fe) != 0)
        gmtf_fs_forget(m->fs, fe.ino, 1);
}

void gmtf_fuse_reply_fsync(fuse_req_t req, fuse_ino_t ino, int datasync)
{
    gmtf_mount *m = mount_of(req);
    if (m->read_only) {
        fuse_reply_err(req, 0);
        return;
    }
    reply_rc(req, gmtf_fs_fsync(m->fs, ino, datasync));
}
