/* Directory listing: opendir, readdir, readdirplus, releasedir,
 * fsyncdir. The kernel caches listings (cache_readdir): only it changes a
 * directory, and it drops its copy when it does. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmtf_fuse.h"

void gmtf_fuse_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    /* Listings change only through this kernel, which drops its cached
     * copy whenever it changes the directory. */
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
}

void gmtf_fuse_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

void gmtf_fuse_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)fi;
    gmtf_fuse_reply_fsync(req, ino, datasync);
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
    char *buf = rc == 0 ? gmtf_fuse_buffer(size ? size : 1) : NULL;
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
            gmtf_fuse_fill_entry(m, &e, &fe);
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

void gmtf_fuse_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    char *buf = gmtf_fuse_buffer(size ? size : 1);
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

void gmtf_fuse_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)fi;
    readdir_plus(req, ino, size, off);
}
