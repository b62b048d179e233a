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
    ev_free(&fs->retired_cur);
    ev_free(&fs->retired_prev);
    ev_free(&fs->punched);
    wb_free(&fs->jbuf);
    pthread_mutex_lock(&fs->cache_lock);
    cache_free_all(fs);
    pthread_mutex_unlock(&fs->cache_lock);
    free(fs->dedup);
    fs->dedup = NULL;
    fs->dedup_cap = fs->dedup_n = 0;
    fs->next_gen = 1;
    fs->gen_clocked = 0;
    fs->corrupt_records = 0;
    fs->replayed = 0;
    fs->meta_damaged = 0;
    fs->root_nlink_bad = 0;
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
    fs->ps = bs;
    fs->cache_limit = fs->opt.cache_bytes;
    fs->dirty_limit = fs->opt.dirty_bytes;
    fs->next_gen = 1;
    fs->data_start = DATA_START;
    pthread_rwlock_init(&fs->lock, NULL);
    pthread_mutex_init(&fs->codec_lock, NULL);
    pthread_mutex_init(&fs->dpool_mtx, NULL);
    pthread_cond_init(&fs->dpool_cond, NULL);
    pthread_mutex_init(&fs->cache_lock, NULL);
    pthread_cond_init(&fs->cache_cond, NULL);
    pthread_mutex_init(&fs->fl_mtx, NULL);
    pthread_cond_init(&fs->fl_cond, NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* Workspaces follow max_block: size it to this image's blocks (the
     * codec is made again once the superblock tells the block size). */
    gmtf_codec_options co = {
        .threads = fs->opt.threads ? fs->opt.threads : (unsigned)(ncpu > 0 ? ncpu : 1),
        .max_block = bs > SNAP_CHUNK ? bs : SNAP_CHUNK,
    };
    fs->pool_max = co.threads < 16 ? co.threads : 16;
    int rc = codec_make(fs, co.threads, co.max_block, &fs->codec);
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
    flush_job_drop(fs); /* an abandoned mkfs: a flush still encoding */
    if (fs->split_codec)
        gmtf_codec_destroy(fs->split_codec);
    meta_free_all(fs);
    if (!fs->opt.exit_after || !gmtf_codec_batch_device(fs->codec))
        gmtf_codec_destroy(fs->codec);
    for (unsigned i = 0; i < fs->ndpool; i++)
        gmtf_codec_destroy(fs->dpool[i]);
    pthread_mutex_destroy(&fs->dpool_mtx);
    pthread_cond_destroy(&fs->dpool_cond);
    pthread_rwlock_destroy(&fs->lock);
    pthread_mutex_destroy(&fs->codec_lock);
    pthread_mutex_destroy(&fs->cache_lock);
    pthread_cond_destroy(&fs->cache_cond);
    pthread_mutex_destroy(&fs->fl_mtx);
    pthread_cond_destroy(&fs->fl_cond);
    if (close_img)
        gmtf_image_close(fs->img);
    free(fs);
}

static void post_load(gmtf_fs *fs)
{
    /* Unlinked files that were open at the crash: gone now (their frames
     * retired). The root stays whatever its link count says: fsck fixes it. */
    fs->loading = LOADING_JOURNAL;
    uint64_t ino = 0;
    for (struct inode *in; (in = inode_next(fs, &ino));)
        if (in->nlink == 0 && ino != GMTF_ROOT_INO)
            inode_drop(fs, in);
    fs->loading = 0;
    /* Frames no record ever mapped (written just before a crash): free
     * space, their ids free. */
    for (uint32_t id = 1; id < fs->nframes; id++) {
        struct frame *f = &fs->frames[id];
        if (f->clen && !f->refs) {
            fs->live_frames--;
            fs->stored_bytes -= f->clen;
            memset(f, 0, sizeof *f);
        }
    }
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

/* Loads the generation in slot i of sb. */
static int load_generation(gmtf_fs *fs, const sb_info *sb)
{
    meta_free_all(fs);
    fs->sb = *sb;
    fs->bs = sb->block_size;
    fs->ps = sb->pack_size ? sb->pack_size : sb->block_size;
    fs->data_start = sb->version >= FMT_VERSION ? DATA_START : DATA_START_V1;
    int rc = snapshot_load(fs);
    fs->replayed = 0; /* count the journal's records, not the snapshot's */
    if (rc == 0)
        rc = journal_replay(fs);
    struct inode *root = inode_get(fs, GMTF_ROOT_INO);
    if (rc == 0 && (!root || !S_ISDIR(root->mode))) {
        fs_log(fs, "generation %llu: no root directory", (unsigned long long)sb->gen);
        rc = -EUCLEAN;
    }
    return rc;
}

int fs_load(gmtf_fs *fs)
{
    sb_info sb[SB_SLOTS];
    int res[SB_SLOTS];
    int rc = sb_read_slots(fs, sb, res);
    if (rc)
        return rc;
    sb_choice c;
    sb_pick(sb, res, &c);
    if (c.n == 0)
        return -EUCLEAN;
    int k = 0;
    rc = -EUCLEAN;
    for (; k < c.n && rc && rc != -ENOMEM; k++) {
        rc = load_generation(fs, &sb[c.slot[k]]);
        if (rc && k + 1 < c.n)
            fs_log(fs, "generation %llu (superblock slot %d) cannot be loaded: trying %llu",
                   (unsigned long long)sb[c.slot[k]].gen, c.slot[k],
                   (unsigned long long)sb[c.slot[k + 1]].gen);
    }
    if (rc)
        return rc;
    frame_load_end(fs);
    if (k > 1) {
        /* Never silent: the newest state is lost, at least for now. */
        fs->fell_back = 1;
        fs->lost_gen = sb[c.slot[0]].gen;
        char when[40] = "?";
        time_t w = (time_t)fs->sb.wtime;
        struct tm tm;
        if (gmtime_r(&w, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
        fs_log(fs,
               "generation %llu is damaged: loaded the one before (%llu, written %s); "
               "changes made after it are not in this state",
               (unsigned long long)fs->lost_gen, (unsigned long long)fs->sb.gen, when);
    } else {
        fs->sb_twin_bad = c.twin_bad;
        fs->sb_pair_lost = c.pair_lost;
        if (c.twin_bad)
            fs_log(fs, "generation %llu: one superblock copy is damaged (the other serves)",
                   (unsigned long long)fs->sb.gen);
        if (c.pair_lost)
            fs_log(fs, "both superblock slots of the other pair are unreadable");
    }
    /* The root's link count is 2 and one per subdirectory; a wrong one is
     * set right here (a mount repairs it, fsck reports it). */
    struct inode *root = inode_get(fs, GMTF_ROOT_INO);
    uint32_t want = 2;
    for (uint32_t i = 0; i < root->u.dir.n; i++) {
        struct inode *c = root->u.dir.v[i] ? inode_get(fs, root->u.dir.v[i]->ino) : NULL;
        want += c && S_ISDIR(c->mode) && c->ino != GMTF_ROOT_INO;
    }
    if (root->nlink != want) {
        fs_log(fs, "the root directory has link count %u, should be %u", root->nlink, want);
        fs->root_nlink_bad = root->nlink + 1;
        root->nlink = want;
    }
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
    if (!o.pack_size)
        o.pack_size = bs < GMTF_FS_PACK_DEFAULT ? bs : GMTF_FS_PACK_DEFAULT;
    uint32_t ps = o.pack_size;
    if (ps < GMTF_FS_BLOCK_MIN || ps > bs || (ps & (ps - 1)))
        return -EINVAL;
    if (o.label && strlen(o.label) > GMTF_FS_LABEL_MAX)
        return -ENAMETOOLONG;
    /* its codec on the CPU: no GPU probe (~0.1 s) for one small snapshot */
    gmtf_fs_options fo = {
        .threads = 1, .flush_interval_ms = 0, .write_time = o.time, .codec_late = 1};
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
    sb->pack_size = ps;
    fs->ps = ps;
    sb->capacity = o.capacity;
    sb->ctime = o.time ? (uint64_t)o.time : (uint64_t)time(NULL);
    if (o.label)
        snprintf(sb->label, sizeof sb->label, "%s", o.label);
    if (o.uuid) {
        memcpy(sb->uuid, o.uuid, 16); /* as given: reproducible images (mkfs -U) */
    } else {
        if (getrandom(sb->uuid, 16, 0) != 16)
            for (int i = 0; i < 16; i++) /* no entropy source: still distinct per run */
                sb->uuid[i] = (uint8_t)(fs_hash64(&sb->ctime, 8, (uint64_t)getpid() + i) >> 8);
        sb->uuid[6] = (uint8_t)((sb->uuid[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
        sb->uuid[8] = (uint8_t)((sb->uuid[8] & 0x3f) | 0x80);
    }
    sb->incompat = o.incomplete ? SB_INCOMPLETE : 0;
    fs->end = DATA_START;
    uint8_t *zero = calloc(1, DATA_START);
    rc = zero ? img_write(fs, zero, DATA_START, 0) : -ENOMEM;
    free(zero);
    if (!rc) {
        fs->loading = LOADING_BUILD; /* the root, without journaling it */
        rc = rec_inode_new(fs, GMTF_ROOT_INO, 1, S_IFDIR | 0755, (uint32_t)getuid(),
                           (uint32_t)getgid(), 0, GMTF_ROOT_INO, 0);
        fs->loading = 0;
        struct inode *root = inode_get(fs, GMTF_ROOT_INO);
        if (!rc && root && o.time) { /* the snapshot takes it from memory */
            root->at_s = root->mt_s = root->ct_s = o.time;
            root->at_ns = root->mt_ns = root->ct_ns = 0;
        }
    }
    /* To be filled (mkfs --from): one generation, incomplete, without a
     * journal (the fill keeps its records in memory); the fill's
     * checkpoint then takes the other slot pair, and a load that cannot
     * read it finds only this incomplete state, which mount and fsck
     * refuse: never an empty tree. Empty: fill the other slot pair too,
     * all four valid from the start. */
    if (!rc)
        rc = fs_checkpoint(fs, o.incomplete ? 0 : JOURNAL_MIN);
    if (!rc && !o.incomplete)
        rc = fs_checkpoint(fs, JOURNAL_MIN);
    fs_destroy(fs, 0);
    return rc;
}

/* A version 1 image mounted read-write becomes version 2: the two more
 * superblock slots need [DATA_START_V1, DATA_START), so frames there move
 * up first; then a checkpoint writes only primary slots (the old
 * generation still names what lies in the new slots' place) and a second
 * one, once no version 1 slot is left, all four. */
static int fs_upgrade(gmtf_fs *fs)
{
    int rc = alloc_claim(fs, DATA_START_V1, DATA_START - DATA_START_V1);
    if (rc)
        return rc;
    fs->data_start = DATA_START;
    for (uint32_t id = 1; id < fs->nframes && !rc; id++) {
        struct frame *f = &fs->frames[id];
        if (!f->clen || f->off >= DATA_START)
            continue;
        uint8_t *buf = malloc(f->clen);
        uint64_t to;
        rc = buf ? img_read(fs, buf, f->clen, f->off) : -ENOMEM;
        if (!rc)
            rc = alloc_space(fs, f->clen, &to);
        if (!rc) {
            rc = img_write(fs, buf, f->clen, to);
            if (rc)
                alloc_release_now(fs, to, f->clen);
        }
        free(buf);
        if (!rc) {
            alloc_retire(fs, f->off, f->clen); /* the old generation reads it there */
            f->off = to;
        }
    }
    if (!rc) {
        fs->upgrading = 1;
        rc = fs_checkpoint(fs, fs->opt.journal_bytes);
        fs->upgrading = 0;
    }
    if (!rc)
        rc = fs_checkpoint(fs, fs->opt.journal_bytes);
    if (!rc)
        fs_log(fs, "image upgraded to format version %u", FMT_VERSION);
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
    if (!rc && (fs->sb.incompat & SB_INCOMPLETE) && !fs->opt.mkfs_finish) {
        fs_log(fs, "the image is incomplete: the mkfs that made it did not finish");
        rc = -EUCLEAN;
    }
    if (!rc && (fs->sb.incompat & SB_INCOMPLETE) && !fs->fell_back)
        fs->mkfs_fill = 1;
    if (!rc && fs->fell_back && !fs->ro) {
        fs_log(fs, "refusing to mount read-write: run fsck.gmtf on the image, or mount it "
                   "read-only to copy out what the older generation holds");
        rc = -EUCLEAN;
    }
    if (!rc && !fs->ro) {
        uint64_t size;
        if (!img_size(fs, &size) && size < fs->end)
            fs_log(fs, "image is %llu bytes but data reaches %llu: truncated?",
                   (unsigned long long)size, (unsigned long long)fs->end);
        /* A mount writes only when it must: to upgrade a version 1 image,
         * after a crash (replayed records), to repair a damaged copy, or
         * when loading gave frames other ids than the image's (records
         * written from now on name table ids: frame.c). */
        if (fs->sb.version < FMT_VERSION)
            rc = fs_upgrade(fs);
        else if (fs->replayed || fs->meta_damaged || fs->sb_twin_bad || fs->sb_pair_lost ||
                 fs->root_nlink_bad || fs->frames_renumbered)
            rc = fs_checkpoint(fs, fs->opt.journal_bytes);
        fs->changed = 0;
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
        rc = flush_join(fs); /* async_flush: a flush still encoding */
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
        if (fs->opt.mkfs_finish && !rc && !fs->err) /* (a lost async flush: stays so) */
            fs->sb.incompat &= ~SB_INCOMPLETE;
        /* Nothing changed since mount: the image stays as it was, byte for
         * byte (an archive under checksums is not rewritten by reading). */
        if (fs->changed || fs->dlist || fs->opt.mkfs_finish) {
            int fill = fs->mkfs_fill, jrc = rc;
            rc = fs_compact(fs, 1);
            if (jrc)
                rc = jrc;
            if (!rc) /* small journal: a compact image at rest */
                rc = fs_checkpoint(fs, JOURNAL_MIN);
            /* The first checkpoint had to place its snapshot past the
             * mount's big journal; a second one lands in the space before
             * it (and frees what the first retired), and the end of the
             * image goes back to the host. Not after mkfs's fill: it had no
             * journal, and the generation before is the incomplete one, so
             * one checkpoint leaves one snapshot (two copies) at rest. */
            if (!rc && !fill)
                rc = fs_checkpoint(fs, JOURNAL_MIN);
        }
        if (!rc && fs->err)
            rc = fs->err;
        FS_UNLOCK(fs);
    }
    fs_destroy(fs, 1);
    return rc;
}

void gmtf_fs_abandon(gmtf_fs *fs)
{
    if (!fs)
        return;
    flusher_stop(fs);
    fs_destroy(fs, 1);
}

int gmtf_fs_get_info(gmtf_fs *fs, gmtf_fs_info *info)
{
    memset(info, 0, sizeof *info);
    FS_RDLOCK(fs);
    info->block_size = fs->bs;
    info->pack_size = fs->ps;
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
    info->range_decodes = __atomic_load_n(&fs->range_decodes, __ATOMIC_RELAXED);
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
    /* Retired space (what deletes and overwrites freed, kept while an older
     * generation may be loaded) counts as free: a writer that needs it gets
     * it back at once (two checkpoints, sync.c), and the flusher frees it
     * anyway when there is much. */
    uint64_t retired = alloc_retired_bytes(fs);
    uint64_t used = fs->used + fs->data_start + fs->dirty_bytes, avail;
    used = used > retired ? used - retired : 0;
    if (fs->sb.capacity) {
        avail = fs->sb.capacity > used ? fs->sb.capacity - used : 0;
    } else {
        /* Free space inside the image counts only as far as the host has
         * it allocated: holes punched out of it are in the host's free
         * space already. */
        uint64_t host = 0, alloc = 0, inside = alloc_free_bytes(fs);
        if (img_host_free(fs, &host))
            host = 0;
        if (!img_allocated(fs, &alloc)) {
            uint64_t live = fs->used + fs->data_start;
            alloc = alloc > live ? alloc - live : 0;
            inside = alloc < inside ? alloc : inside;
        }
        avail = host + inside + retired;
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
    st->f_fsid = load_le64(fs->sb.uuid) ^ load_le64(fs->sb.uuid + 8);
    if (fs->ro)
        st->f_flag |= ST_RDONLY;
    return 0;
}

/* ---- statistics (gmtf-stat) ------------------------------------------------ */

typedef struct span {
    uint32_t frame, off, len;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->frame != y->frame)
        return x->frame < y->frame ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The distinct bytes that the spans v[0..n) (sorted) cover. */
static uint64_t spans_union(const span *v, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n;) {
        uint32_t frame = v[i].frame;
        uint64_t start = v[i].off, end = (uint64_t)v[i].off + v[i].len;
        for (i++; i < n && v[i].frame == frame && v[i].off <= end; i++)
            if ((uint64_t)v[i].off + v[i].len > end)
                end = (uint64_t)v[i].off + v[i].len;
        total += end - start;
    }
    return total;
}

int gmtf_fs_get_stats(gmtf_fs *fs, gmtf_fs_stats *st)
{
    memset(st, 0, sizeof *st);
    int rc = 0;
    FS_RDLOCK(fs);
    st->format_version = fs->sb.version;
    size_t nspan = 0, nframes = 0;
    uint64_t pos = 0;
    for (struct inode *in; (in = inode_scan(fs, &pos));)
        if (S_ISREG(in->mode))
            nspan += in->u.ext.n;
    for (uint32_t id = 1; id < fs->nframes; id++)
        nframes += fs->frames[id].clen != 0;
    span *v = malloc((nspan + 1) * sizeof *v);
    st->frame_clen = malloc((nframes + 1) * sizeof *st->frame_clen);
    st->frame_dlen = malloc((nframes + 1) * sizeof *st->frame_dlen);
    if (!v || !st->frame_clen || !st->frame_dlen) {
        rc = -ENOMEM;
        goto out;
    }
    size_t k = 0;
    pos = 0;
    for (struct inode *in; (in = inode_scan(fs, &pos));) {
        if (!S_ISREG(in->mode))
            continue;
        for (uint32_t i = 0; i < in->u.ext.n && k < nspan; i++) {
            const struct fref *e = &in->u.ext.v[i];
            v[k++] = (span){e->frame, e->off, e->len};
            st->mapped_bytes += e->len;
        }
    }
    uint64_t decoded = 0;
    for (uint32_t id = 1; id < fs->nframes && st->nframes < nframes; id++) {
        const struct frame *f = &fs->frames[id];
        if (!f->clen)
            continue;
        st->frame_clen[st->nframes] = f->clen;
        st->frame_dlen[st->nframes++] = f->dlen;
        decoded += f->dlen;
        if (f->flags & FRAME_OUTSIDE)
            continue; /* not this image's space */
        if (f->dlen == fs->bs && f->live == (uint64_t)f->refs * f->dlen) /* whole blocks only */
            st->block_frame_bytes += f->clen;
        else
            st->pack_frame_bytes += f->clen;
    }
    const sb_info *sb = &fs->sb;
    st->sb_bytes = fs->data_start;
    st->snapshot_bytes = alloc_meta_len(fs, sb->snap_len);
    st->snapshot_raw_bytes = sb->snap_raw;
    st->snapshot_copies = sb->snap_len ? 1u + (sb->snap2_off != 0) : 0;
    st->journal_bytes = alloc_meta_len(fs, sb->jrnl_len);
    st->journal_copies = sb->jrnl_len ? 1u + (sb->jrnl2_off != 0) : 0;
    st->retired_bytes = alloc_retired_bytes(fs);
    st->spare_bytes = fs->spare.len;
    st->free_bytes = alloc_free_bytes(fs);
    st->end_bytes = fs->end;
out:
    FS_UNLOCK(fs);
    if (rc) {
        free(v);
        gmtf_fs_stats_free(st);
        return rc;
    }
    qsort(v, k, sizeof *v, span_cmp);
    st->unique_bytes = spans_union(v, k);
    st->dead_bytes = decoded > st->unique_bytes ? decoded - st->unique_bytes : 0;
    free(v);
    return 0;
}

void gmtf_fs_stats_free(gmtf_fs_stats *st)
{
    free(st->frame_clen);
    free(st->frame_dlen);
    st->frame_clen = st->frame_dlen = NULL;
    st->nframes = 0;
}

int gmtf_fs_stored_share(gmtf_fs *fs, uint64_t ino, uint64_t *stored)
{
    *stored = 0;
    FS_RDLOCK(fs);
    struct inode *in = inode_get(fs, ino);
    if (in && S_ISREG(in->mode)) {
        double share = 0;
        for (uint32_t i = 0; i < in->u.ext.n; i++) {
            const struct fref *e = &in->u.ext.v[i];
            const struct frame *f = &fs->frames[e->frame];
            uint64_t over = f->live > f->dlen ? f->live : f->dlen;
            if (over)
                share += (double)f->clen * e->len / (double)over;
        }
        *stored = (uint64_t)(share + 0.5);
    }
    FS_UNLOCK(fs);
    return in ? 0 : -ENOENT;
}
