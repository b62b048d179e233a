/* Making, mounting and unmounting a filesystem, and what it reports about
 * itself (statfs, info). Mount: the newest valid superblock slot, its
 * snapshot (snapshot.c), its journal (journal.c), then the free map
 * (alloc.c); read-write, a checkpoint follows and the flusher starts
 * (sync.c). Unmount: compaction and a final compact checkpoint. */
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs_internal.h"

static void meta_free_all(gmtf_fs *fs)
{
    while (fs->dlist) {
        struct dblock *d = fs->dlist;
        fs->dlist = d->gnext;
        free(d->pages);
        free(d->buf);
        free(d);
    }
    free(fs->dirty_tab);
    fs->dirty_tab = NULL;
    fs->dirty_cap = 0;
    fs->dirty_bytes = 0;
    for (size_t i = 0; i < fs->dent_cap; i++)
        while (fs->dent_tab[i]) {
            struct dent *d = fs->dent_tab[i];
            fs->dent_tab[i] = d->hnext;
            free(d);
        }
    free(fs->dent_tab);
    fs->dent_tab = NULL;
    fs->dent_cap = fs->dent_count = 0;
    uint64_t pos = 0;
    for (struct inode *in; (in = inode_scan(fs, &pos));) {
        if (S_ISREG(in->mode))
            free(in->u.ext.v);
        else if (S_ISDIR(in->mode))
            free(in->u.dir.v);
        else if (S_ISLNK(in->mode))
            free(in->u.target);
        free(in->xattr);
        free(in);
    }
    inode_table_free(fs);
    free(fs->adirty);
    fs->adirty = NULL;
    fs->nadirty = fs->adirty_cap = 0;
    frame_table_free(fs);
    ev_free(&fs->free);
    ev_free(&fs->pending);
    ev_free(&fs->held);
    ev_free(&fs->punched);
    wb_free(&fs->jbuf);
    pthread_mutex_lock(&fs->cache_lock);
    cache_free_all(fs);
    pthread_mutex_unlock(&fs->cache_lock);
    free(fs->dedup);
    fs->dedup = NULL;
    fs->dedup_cap = 0;
    fs->next_gen = 1;
    fs->corrupt_records = 0;
    fs->replayed = 0;
}

int fs_new(gmtf_image *img, const gmtf_fs_options *opt, uint32_t bs, gmtf_fs **out)
{
    gmtf_fs *fs = calloc(1, sizeof *fs);
    if (!fs)
        return -ENOMEM;
    if (opt)
        fs->opt = *opt;
    if (!fs->opt.cache_bytes)
        fs->opt.cache_bytes = 64u << 20;
    if (!fs->opt.dirty_bytes)
        fs->opt.dirty_bytes = 128u << 20;
    if (!fs->opt.journal_bytes)
        fs->opt.journal_bytes = 8u << 20;
    if (fs->opt.journal_bytes < JOURNAL_FLOOR)
        fs->opt.journal_bytes = JOURNAL_FLOOR;
    if (!fs->opt.readahead_blocks)
        fs->opt.readahead_blocks = 4;
    fs->img = img;
    fs->ro = fs->opt.read_only;
    fs->bs = bs;
    fs->cache_limit = fs->opt.cache_bytes;
    fs->dirty_limit = fs->opt.dirty_bytes;
    fs->next_gen = 1;
    pthread_rwlock_init(&fs->lock, NULL);
    pthread_mutex_init(&fs->codec_lock, NULL);
    pthread_mutex_init(&fs->dpool_mtx, NULL);
    pthread_cond_init(&fs->dpool_cond, NULL);
    pthread_mutex_init(&fs->cache_lock, NULL);
    pthread_mutex_init(&fs->fl_mtx, NULL);
    pthread_cond_init(&fs->fl_cond, NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* Workspaces follow max_block: size it to this image's blocks (the
     * codec is made again once the superblock tells the block size). */
    gmtf_codec_options co = {
        .threads = fs->opt.threads ? fs->opt.threads : (unsigned)(ncpu > 0 ? ncpu : 1),
        .mtf = fs->opt.mtf,
        .max_block = bs > SNAP_CHUNK ? bs : SNAP_CHUNK,
    };
    fs->pool_max = co.threads < 16 ? co.threads : 16;
    int rc = gmtf_codec_create(&fs->codec, &co);
    if (rc) {
        fs_log(fs, "codec: %s", gmtf_strerror(rc));
        free(fs);
        return rc == -ENOMEM ? rc : -EINVAL;
    }
    *out = fs;
    return 0;
}

void fs_destroy(gmtf_fs *fs, int close_img)
{
    meta_free_all(fs);
    gmtf_codec_destroy(fs->codec);
    for (unsigned i = 0; i < fs->ndpool; i++)
        gmtf_codec_destroy(fs->dpool[i]);
    pthread_mutex_destroy(&fs->dpool_mtx);
    pthread_cond_destroy(&fs->dpool_cond);
    pthread_rwlock_destroy(&fs->lock);
    pthread_mutex_destroy(&fs->codec_lock);
    pthread_mutex_destroy(&fs->cache_lock);
    pthread_mutex_destroy(&fs->fl_mtx);
    pthread_cond_destroy(&fs->fl_cond);
    if (close_img)
        gmtf_image_close(fs->img);
    free(fs);
}

static void post_load(gmtf_fs *fs)
{
    /* Unlinked files that were open at the crash: gone now. */
    fs->loading = 1;
    uint64_t ino = 0;
    for (struct inode *in; (in = inode_next(fs, &ino));)
        if (in->nlink == 0)
            inode_drop(fs, in);
    /* Frames no block points at (written just before a crash, or only used
     * by such files) are free space. */
    for (uint32_t id = 1; id < fs->nframes; id++)
        if (fs->frames[id].clen && !fs->frames[id].refs) {
            fs->frames[id].refs = 1;
            frame_unref(fs, id);
        }
    fs->loading = 0;
    for (uint32_t id = fs->nframes; id-- > 1;)
        if (!fs->frames[id].clen && fs->nframe_free < (1u << 20)) {
            if (fs->nframe_free == fs->frame_free_cap) {
                size_t cap = fs->frame_free_cap ? fs->frame_free_cap * 2 : 256;
                uint32_t *v = realloc(fs->frame_free, cap * sizeof *v);
                if (!v)
                    break;
                fs->frame_free = v;
                fs->frame_free_cap = cap;
            }
            fs->frame_free[fs->nframe_free++] = id;
        }
}

int fs_load(gmtf_fs *fs)
{
    sb_info sb[2];
    int res[2];
    int rc = sb_read_slots(fs, sb, res);
    if (rc)
        return rc;
    int ok[2] = {res[0] == 0, res[1] == 0};
    int order[2] = {0, 1};
    if (!ok[0] || (ok[1] && sb[1].gen > sb[0].gen)) {
        order[0] = 1;
        order[1] = 0;
    }
    rc = -EUCLEAN;
    for (int k = 0; k < 2 && rc; k++) {
        int i = order[k];
        if (!ok[i])
            continue;
        meta_free_all(fs);
        fs->sb = sb[i];
        fs->bs = sb[i].block_size;
        rc = snapshot_load(fs);
        fs->replayed = 0; /* count the journal's records, not the snapshot's */
        if (rc == 0)
            rc = journal_replay(fs);
        if (rc == 0 && !inode_get(fs, GMTF_ROOT_INO)) {
            fs_log(fs, "superblock %d: no root directory", i);
            rc = -EUCLEAN;
        }
        if (rc && k == 0 && ok[order[1]])
            fs_log(fs, "superblock slot %d (generation %llu) unusable, trying the other", i,
                   (unsigned long long)sb[i].gen);
    }
    if (rc)
        return rc;
    frame_load_end(fs);
    post_load(fs);
    rc = alloc_rebuild(fs);
    if (rc == -EUCLEAN && fs->ro)
        rc = 0; /* read what can be read; fsck reports the overlap */
    return rc;
}

int gmtf_fs_mkfs(gmtf_image *img, const gmtf_mkfs_options *opt)
{
    gmtf_mkfs_options o = {0};
    if (opt)
        o = *opt;
    if (!o.block_size)
        o.block_size = GMTF_FS_BLOCK_DEFAULT;
    uint32_t bs = o.block_size;
    if (bs < GMTF_FS_BLOCK_MIN || bs > GMTF_FS_BLOCK_MAX || (bs & (bs - 1)))
        return -EINVAL;
    if (o.label && strlen(o.label) > GMTF_FS_LABEL_MAX)
        return -ENAMETOOLONG;
    gmtf_fs_options fo = {.threads = 1, .flush_interval_ms = 0};
    gmtf_fs *fs;
    int rc = fs_new(img, &fo, bs, &fs);
    if (rc)
        return rc;
    uint64_t size = 0;
    rc = img_size(fs, &size);
    if (!rc && img->is_blockdev) {
        if (!o.capacity || o.capacity > size)
            o.capacity = size;
    } else if (!rc) {
        rc = img_truncate(fs, 0);
    }
    if (!rc && o.capacity && o.capacity < DATA_START + (1u << 20))
        rc = -ENOSPC;
    if (rc) {
        fs_destroy(fs, 0);
        return rc;
    }
    sb_info *sb = &fs->sb;
    sb->block_size = bs;
    sb->capacity = o.capacity;
    sb->ctime = (uint64_t)time(NULL);
    if (o.label)
        snprintf(sb->label, sizeof sb->label, "%s", o.label);
    if (o.uuid)
        memcpy(sb->uuid, o.uuid, 16);
    else if (getrandom(sb->uuid, 16, 0) != 16)
        for (int i = 0; i < 16; i++) /* no entropy source: still distinct per run */
            sb->uuid[i] = (uint8_t)(fs_hash64(&sb->ctime, 8, (uint64_t)getpid() + i) >> 8);
    sb->uuid[6] = (uint8_t)((sb->uuid[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
    sb->uuid[8] = (uint8_t)((sb->uuid[8] & 0x3f) | 0x80);
    fs->end = DATA_START;
    uint8_t *zero = calloc(1, DATA_START);
    rc = zero ? img_write(fs, zero, DATA_START, 0) : -ENOMEM;
    free(zero);
    if (!rc) {
        fs->loading = 1; /* build the root without journaling it */
        rc = rec_inode_new(fs, GMTF_ROOT_INO, 1, S_IFDIR | 0755, (uint32_t)getuid(),
                           (uint32_t)getgid(), 0, GMTF_ROOT_INO, 0);
        fs->loading = 0;
    }
    if (!rc)
        rc = fs_checkpoint(fs, JOURNAL_MIN);
    if (!rc) /* fill the second slot too: both valid from the start */
        rc = fs_checkpoint(fs, JOURNAL_MIN);
    fs_destroy(fs, 0);
    return rc;
}

int gmtf_fs_mount(gmtf_image *img, const gmtf_fs_options *opt, gmtf_fs **out)
{
    gmtf_fs *fs;
    int rc = fs_new(img, opt, GMTF_FS_BLOCK_DEFAULT, &fs);
    if (rc) {
        gmtf_image_close(img);
        return rc;
    }
    rc = fs_load(fs);
    if (!rc && fs->bs > SNAP_CHUNK && fs->bs != GMTF_FS_BLOCK_DEFAULT)
        rc = codec_resize(fs);
    if (!rc && !fs->ro) {
        uint64_t size;
        if (!img_size(fs, &size) && size < fs->end)
            fs_log(fs, "image is %llu bytes but data reaches %llu: truncated?",
                   (unsigned long long)size, (unsigned long long)fs->end);
        /* A fresh journal of the mount size; staged data gets compressed. */
        rc = fs_checkpoint(fs, fs->opt.journal_bytes);
    }
    if (!rc)
        rc = flusher_start(fs);
    if (rc) {
        fs_destroy(fs, 1);
        return rc;
    }
    *out = fs;
    return 0;
}

int gmtf_fs_unmount(gmtf_fs *fs)
{
    if (!fs)
        return 0;
    flusher_stop(fs);
    int rc = 0;
    if (!fs->ro) {
        FS_WRLOCK(fs);
        /* Files still open are closed now. */
        uint64_t ino = 0;
        for (struct inode *in; (in = inode_next(fs, &ino));) {
            if (in->nlink == 0) {
                in->nopen = 0;
                in->nlookup = 0;
                rec_idel_unused(fs, in);
            }
        }
        fs->opt.no_flush = 0;
        rc = fs_compact(fs, 1);
        if (!rc)
            rc = fs_checkpoint(fs, JOURNAL_MIN); /* small journal: a compact image at rest */
        /* The first checkpoint had to place its snapshot past the mount's big
         * journal; a second one lands in the space before it, and the end of
         * the image goes back to the host. */
        if (!rc && alloc_free_bytes(fs) >= fs->sb.snap_len + fs->sb.jrnl_len)
            rc = fs_checkpoint(fs, JOURNAL_MIN);
        if (!rc && fs->err)
            rc = fs->err;
        FS_UNLOCK(fs);
    }
    fs_destroy(fs, 1);
    return rc;
}

int gmtf_fs_get_info(gmtf_fs *fs, gmtf_fs_info *info)
{
    memset(info, 0, sizeof *info);
    FS_RDLOCK(fs);
    info->block_size = fs->bs;
    memcpy(info->label, fs->sb.label, sizeof info->label);
    memcpy(info->uuid, fs->sb.uuid, 16);
    info->generation = fs->sb.gen;
    info->capacity = fs->sb.capacity;
    info->image_bytes = fs->end;
    info->used_bytes = fs->used;
    uint64_t pos = 0;
    for (struct inode *in; (in = inode_scan(fs, &pos));) {
        if (S_ISREG(in->mode)) {
            info->files++;
            info->data_bytes += in->size;
        } else if (S_ISDIR(in->mode))
            info->dirs++;
        else if (S_ISLNK(in->mode))
            info->symlinks++;
        else
            info->others++;
    }
    info->stored_bytes = fs->stored_bytes;
    info->frames = fs->live_frames;
    info->dirty_bytes = fs->dirty_bytes;
    info->replayed_records = fs->replayed;
    info->frames_decoded = __atomic_load_n(&fs->frames_decoded, __ATOMIC_RELAXED);
    pthread_mutex_lock(&fs->cache_lock);
    info->cache_bytes = fs->cache_bytes;
    pthread_mutex_unlock(&fs->cache_lock);
    FS_UNLOCK(fs);
    return 0;
}

int gmtf_fs_statfs(gmtf_fs *fs, struct statvfs *st)
{
    memset(st, 0, sizeof *st);
    FS_RDLOCK(fs);
    uint64_t used = fs->used + DATA_START + fs->dirty_bytes, avail;
    if (fs->sb.capacity) {
        avail = fs->sb.capacity > used ? fs->sb.capacity - used : 0;
    } else {
        uint64_t host = 0;
        if (img_host_free(fs, &host))
            host = 0;
        avail = host + alloc_free_bytes(fs) - alloc_punched_bytes(fs); /* holes: in host */
    }
    uint64_t files = fs->ninodes;
    FS_UNLOCK(fs);
    st->f_bsize = fs->bs;
    st->f_frsize = 4096;
    st->f_blocks = (used + avail) / 4096;
    st->f_bfree = avail / 4096;
    st->f_bavail = avail / 4096;
    st->f_files = files + (1u << 30);
    st->f_ffree = 1u << 30;
    st->f_favail = 1u << 30;
    st->f_namemax = GMTF_FS_NAME_MAX;
    st->f_fsid = get_le64(fs->sb.uuid) ^ get_le64(fs->sb.uuid + 8);
    if (fs->ro)
        st->f_flag |= ST_RDONLY;
    return 0;
}
