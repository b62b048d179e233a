/* Superblocks, snapshots, checkpoints; mkfs, mount, unmount, statfs.
 *
 * Durable state = the newest valid superblock slot -> its snapshot (all
 * metadata as records, compressed) + its journal (records appended since).
 * A checkpoint writes a new snapshot and an empty journal region into free
 * space, flushes, then writes the other superblock slot with generation+1
 * and flushes again: a crash anywhere leaves one of the two slots valid. */
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs_internal.h"

/* ---- superblock ------------------------------------------------------------ */

void sb_encode(const sb_info *sb, uint8_t *b)
{
    memset(b, 0, SB_SLOT_SIZE);
    memcpy(b, SB_MAGIC, 8);
    put_le32(b + 8, FMT_VERSION);
    put_le32(b + 12, 0); /* incompatible features: none yet */
    put_le64(b + 16, sb->gen);
    memcpy(b + 24, sb->uuid, 16);
    memcpy(b + 40, sb->label, strnlen(sb->label, GMTF_FS_LABEL_MAX));
    put_le32(b + 104, sb->block_size);
    put_le32(b + 108, 0);
    put_le64(b + 112, sb->capacity);
    put_le64(b + 120, sb->image_end);
    put_le64(b + 128, sb->snap_off);
    put_le64(b + 136, sb->snap_len);
    put_le64(b + 144, sb->jrnl_off);
    put_le64(b + 152, sb->jrnl_len);
    put_le64(b + 160, sb->jrnl_id);
    put_le64(b + 168, sb->ctime);
    put_le64(b + 176, sb->wtime);
    put_le32(b + SB_SLOT_SIZE - 4, gmtf_crc32c(0, b, SB_SLOT_SIZE - 4));
}

/* 0, -EINVAL (no magic: not a gmtf slot) or -EUCLEAN (damaged). */
int sb_decode(const uint8_t *b, sb_info *sb)
{
    if (memcmp(b, SB_MAGIC, 8))
        return -EINVAL;
    if (get_le32(b + SB_SLOT_SIZE - 4) != gmtf_crc32c(0, b, SB_SLOT_SIZE - 4))
        return -EUCLEAN;
    if (get_le32(b + 8) != FMT_VERSION || get_le32(b + 12) != 0)
        return -EUCLEAN;
    memset(sb, 0, sizeof *sb);
    sb->gen = get_le64(b + 16);
    memcpy(sb->uuid, b + 24, 16);
    memcpy(sb->label, b + 40, GMTF_FS_LABEL_MAX);
    sb->label[GMTF_FS_LABEL_MAX] = 0;
    sb->block_size = get_le32(b + 104);
    sb->capacity = get_le64(b + 112);
    sb->image_end = get_le64(b + 120);
    sb->snap_off = get_le64(b + 128);
    sb->snap_len = get_le64(b + 136);
    sb->jrnl_off = get_le64(b + 144);
    sb->jrnl_len = get_le64(b + 152);
    sb->jrnl_id = get_le64(b + 160);
    sb->ctime = get_le64(b + 168);
    sb->wtime = get_le64(b + 176);
    uint32_t bs = sb->block_size;
    if (bs < GMTF_FS_BLOCK_MIN || bs > GMTF_FS_BLOCK_MAX || (bs & (bs - 1)))
        return -EUCLEAN;
    if (sb->snap_off < DATA_START || sb->snap_len < SNAP_HDR_SIZE || sb->snap_len > (1ull << 40) ||
        sb->snap_off + sb->snap_len < sb->snap_off)
        return -EUCLEAN;
    if (sb->jrnl_len > (1ull << 30) || (sb->jrnl_len && sb->jrnl_off < DATA_START) ||
        sb->jrnl_off + sb->jrnl_len < sb->jrnl_off)
        return -EUCLEAN;
    if (sb->capacity &&
        (sb->snap_off + sb->snap_len > sb->capacity || sb->jrnl_off + sb->jrnl_len > sb->capacity))
        return -EUCLEAN;
    return 0;
}

static uint64_t journal_id(const sb_info *sb, uint64_t gen)
{
    /* Unique per checkpoint and per filesystem: a stale chunk left by an
     * older journal (or an older filesystem on the device) never matches. */
    return fs_hash64(sb->uuid, 16, gen) ^ gen;
}

/* ---- snapshot ---------------------------------------------------------------- */

static int snapshot_write(gmtf_fs *fs, uint64_t gen, uint64_t *off, uint64_t *len)
{
    wbuf w = {0};
    uint32_t *ends = NULL;
    size_t nch = 0;
    int rc = meta_serialize(fs, &w, SNAP_CHUNK, &ends, &nch);
    if (rc)
        return rc;
    uint64_t *coff = malloc((nch + 1) * sizeof *coff), *doff = malloc((nch + 1) * sizeof *doff);
    uint8_t *dst = NULL, *img = NULL;
    if (!coff || !doff) {
        rc = -ENOMEM;
        goto out;
    }
    coff[0] = 0;
    for (size_t i = 0; i < nch; i++)
        coff[i + 1] = ends[i];
    if (nch) {
        rc = codec_encode(fs, w.p, coff, nch, &dst, doff);
        if (rc)
            goto out;
    } else {
        doff[0] = 0;
    }
    uint64_t total = SNAP_HDR_SIZE + doff[nch];
    img = malloc(total);
    if (!img) {
        rc = -ENOMEM;
        goto out;
    }
    memset(img, 0, SNAP_HDR_SIZE);
    put_le32(img, SNAP_MAGIC);
    put_le32(img + 4, FMT_VERSION);
    put_le64(img + 8, gen);
    put_le32(img + 16, (uint32_t)nch);
    put_le64(img + 24, w.len);
    put_le64(img + 32, doff[nch]);
    put_le32(img + 40, gmtf_crc32c(0, w.p, w.len));
    put_le32(img + 60, gmtf_crc32c(0, img, 60));
    if (nch)
        memcpy(img + SNAP_HDR_SIZE, dst, doff[nch]);
    rc = alloc_space(fs, total, off);
    if (rc)
        goto out;
    rc = img_write(fs, img, total, *off);
    if (rc) {
        alloc_release_now(fs, *off, total);
        goto out;
    }
    *len = total;
out:
    wb_free(&w);
    free(ends);
    free(coff);
    free(doff);
    free(dst);
    free(img);
    return rc;
}

static int snapshot_load(gmtf_fs *fs)
{
    const sb_info *sb = &fs->sb;
    uint64_t size = 0;
    if (!fs->img->ops->size(fs->img->ctx, &size) && sb->snap_off + sb->snap_len > size) {
        fs_log(fs, "snapshot at %llu (%llu bytes) lies past the end of the image (%llu bytes)",
               (unsigned long long)sb->snap_off, (unsigned long long)sb->snap_len,
               (unsigned long long)size);
        return -EUCLEAN;
    }
    uint8_t *img = malloc(sb->snap_len), *raw = NULL;
    if (!img)
        return -ENOMEM;
    int rc = img_read(fs, img, sb->snap_len, sb->snap_off);
    if (rc) {
        fs_log(fs, "snapshot at %llu (%llu bytes) unreadable: %s", (unsigned long long)sb->snap_off,
               (unsigned long long)sb->snap_len, strerror(-rc));
        free(img);
        return -EUCLEAN;
    }
    uint32_t nch = get_le32(img + 16);
    uint64_t raw_len = get_le64(img + 24), flen = get_le64(img + 32);
    if (get_le32(img) != SNAP_MAGIC || get_le32(img + 60) != gmtf_crc32c(0, img, 60) ||
        get_le32(img + 4) != FMT_VERSION || get_le64(img + 8) != sb->gen ||
        flen != sb->snap_len - SNAP_HDR_SIZE || raw_len > (uint64_t)nch * GMTF_BLOCK_MAX) {
        fs_log(fs, "snapshot header at %llu damaged", (unsigned long long)sb->snap_off);
        free(img);
        return -EUCLEAN;
    }
    size_t raw_cap = 0; /* grown to the largest chunk seen */
    uint64_t pos = SNAP_HDR_SIZE, got = 0;
    uint32_t crc = 0;
    fs->replaying = 1;
    for (uint32_t i = 0; i < nch && !rc; i++) {
        gmtf_frame_info fi;
        rc = gmtf_frame_info_get(img + pos, sb->snap_len - pos, &fi);
        if (!rc && (fi.orig_len > GMTF_FS_BLOCK_MAX || fi.frame_len > sb->snap_len - pos))
            rc = GMTF_E_CORRUPT;
        if (!rc && fi.orig_len > raw_cap) {
            uint8_t *r2 = realloc(raw, fi.orig_len);
            if (!r2) {
                rc = -ENOMEM;
                break;
            }
            raw = r2;
            raw_cap = fi.orig_len;
        }
        if (!rc)
            rc = codec_decode_one(fs, img + pos, fi.frame_len, raw, fi.orig_len);
        if (rc) {
            fs_log(fs, "snapshot chunk %u at %llu: %s", i, (unsigned long long)(sb->snap_off + pos),
                   gmtf_strerror(rc));
            rc = -EUCLEAN;
            break;
        }
        crc = gmtf_crc32c(crc, raw, fi.orig_len);
        got += fi.orig_len;
        int r = rec_apply_all(fs, raw, fi.orig_len);
        if (r == -ENOMEM)
            rc = r;
        else if (r)
            fs_log(fs, "snapshot chunk %u: a record does not apply (%s)", i, strerror(-r));
        pos += fi.frame_len;
    }
    fs->replaying = 0;
    if (!rc && (got != raw_len || crc != get_le32(img + 40))) {
        fs_log(fs, "snapshot at %llu: content checksum mismatch", (unsigned long long)sb->snap_off);
        rc = -EUCLEAN;
    }
    free(raw);
    free(img);
    return rc;
}

/* ---- state ---------------------------------------------------------------------- */

static void meta_free_all(gmtf_fs *fs)
{
    while (fs->dlist) {
        struct dblock *d = fs->dlist;
        fs->dlist = d->gnext;
        free(d->pages);
        free(d->buf);
        free(d);
    }
    free(fs->dhash);
    fs->dhash = NULL;
    fs->dhash_cap = 0;
    fs->dirty_bytes = 0;
    for (size_t i = 0; i < fs->dh_cap; i++)
        while (fs->dh[i]) {
            struct dent *d = fs->dh[i];
            fs->dh[i] = d->hnext;
            free(d);
        }
    free(fs->dh);
    fs->dh = NULL;
    fs->dh_cap = fs->dh_count = 0;
    for (uint64_t i = 0; i < fs->itab_cap; i++) {
        struct inode *in = fs->itab[i];
        if (!in)
            continue;
        if (S_ISREG(in->mode))
            free(in->u.ext.v);
        else if (S_ISDIR(in->mode))
            free(in->u.dir.v);
        else if (S_ISLNK(in->mode))
            free(in->u.target);
        free(in->xattr);
        free(in);
    }
    free(fs->itab);
    fs->itab = NULL;
    fs->itab_cap = 0;
    free(fs->ino_free);
    fs->ino_free = NULL;
    fs->nino_free = fs->ino_free_cap = 0;
    free(fs->adirty);
    fs->adirty = NULL;
    fs->nadirty = fs->adirty_cap = 0;
    free(fs->frames);
    fs->frames = NULL;
    fs->nframes = 0;
    free(fs->frame_free);
    fs->frame_free = NULL;
    fs->nframe_free = fs->frame_free_cap = 0;
    fs->live_frames = fs->stored_bytes = 0;
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

/* Makes the batch codec again for this image's block size. */
int codec_resize(gmtf_fs *fs)
{
    gmtf_codec *c;
    gmtf_codec_options co = {
        .threads = gmtf_codec_threads(fs->codec), .mtf = fs->opt.mtf, .max_block = fs->bs};
    int rc = gmtf_codec_create(&c, &co);
    if (rc)
        return rc == -ENOMEM ? rc : -EINVAL;
    pthread_mutex_lock(&fs->codec_lock);
    gmtf_codec_destroy(fs->codec);
    fs->codec = c;
    pthread_mutex_unlock(&fs->codec_lock);
    return 0;
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

/* ---- checkpoint -------------------------------------------------------------------- */

int fs_checkpoint(gmtf_fs *fs, uint64_t journal_bytes)
{
    if (fs->ro)
        return -EROFS;
    int rc = flush_dirty(fs, 0);
    if (rc)
        return rc;
    rc = inode_emit_dirty(fs);
    if (rc)
        return rc;
    sb_info nsb = fs->sb;
    nsb.gen = fs->sb.gen + 1;
    if (journal_bytes < JOURNAL_FLOOR)
        journal_bytes = JOURNAL_FLOOR;
    rc = snapshot_write(fs, nsb.gen, &nsb.snap_off, &nsb.snap_len);
    if (rc)
        return rc;
    rc = alloc_space(fs, journal_bytes, &nsb.jrnl_off);
    if (rc) {
        alloc_release_now(fs, nsb.snap_off, nsb.snap_len);
        return rc;
    }
    nsb.jrnl_len = journal_bytes;
    nsb.jrnl_id = journal_id(&nsb, nsb.gen);
    nsb.wtime = (uint64_t)time(NULL);
    nsb.image_end = fs->end;
    uint8_t *b = malloc(SB_SLOT_SIZE);
    if (!b)
        rc = -ENOMEM;
    uint64_t size;
    /* The journal region must exist before the superblock names it: extend
     * the file (sparse on the host) to the end of the allocated area. */
    if (!rc && !fs->img->is_blockdev && !(rc = fs->img->ops->size(fs->img->ctx, &size)) &&
        size < fs->end)
        rc = fs->img->ops->truncate(fs->img->ctx, fs->end);
    if (!rc) {
        sb_encode(&nsb, b);
        rc = img_flush(fs); /* snapshot durable before the superblock names it */
    }
    if (!rc)
        rc = img_write(fs, b, SB_SLOT_SIZE, (nsb.gen & 1) * SB_SLOT_SIZE);
    if (!rc)
        rc = img_flush(fs);
    free(b);
    if (rc) {
        fs_log(fs, "checkpoint %llu failed: %s", (unsigned long long)nsb.gen, strerror(-rc));
        alloc_release_now(fs, nsb.snap_off, nsb.snap_len);
        alloc_release_now(fs, nsb.jrnl_off, nsb.jrnl_len);
        return rc;
    }
    /* The new state is durable: the old snapshot, journal and everything
     * freed since are free now. */
    if (fs->sb.snap_len)
        alloc_release_now(fs, fs->sb.snap_off, fs->sb.snap_len);
    if (fs->sb.jrnl_len)
        alloc_release_now(fs, fs->sb.jrnl_off, fs->sb.jrnl_len);
    alloc_commit_pending(fs);
    /* The old journal is gone: no STAGE record needs an old frame now. */
    for (size_t i = 0; i < fs->held.n; i++)
        alloc_release_now(fs, fs->held.v[i].off, fs->held.v[i].len);
    fs->held.n = 0;
    for (uint32_t id = 1; id < fs->nframes; id++)
        fs->frames[id].pinned = 0;
    fs->sb = nsb;
    fs->jbuf.len = 0;
    fs->jpos = 0;
    fs->jseq = 0;
    alloc_trim_end(fs);
    return 0;
}

/* ---- load ------------------------------------------------------------------------ */

static int read_slots(gmtf_image *img, sb_info sb[2], int ok[2])
{
    uint8_t *b = malloc(2 * SB_SLOT_SIZE);
    if (!b)
        return -ENOMEM;
    int rc = img->ops->pread(img->ctx, b, 2 * SB_SLOT_SIZE, 0);
    int magic = 0;
    for (int i = 0; i < 2; i++) {
        ok[i] = 0;
        if (rc)
            continue;
        int r = sb_decode(b + i * SB_SLOT_SIZE, &sb[i]);
        ok[i] = r == 0;
        magic |= r != -EINVAL;
    }
    free(b);
    if (rc)
        return rc == -EIO ? -EINVAL : rc; /* shorter than two slots: not an image */
    if (!ok[0] && !ok[1])
        return magic ? -EUCLEAN : -EINVAL;
    return 0;
}

static void post_load(gmtf_fs *fs)
{
    /* Unlinked files that were open at the crash: gone now. */
    fs->replaying = 1;
    for (uint64_t i = 1; i < fs->itab_cap; i++)
        if (fs->itab[i] && fs->itab[i]->nlink == 0)
            inode_free_mem(fs, fs->itab[i]);
    /* Frames no block points at (written just before a crash, or only used
     * by such files) are free space. */
    for (uint32_t id = 1; id < fs->nframes; id++)
        if (fs->frames[id].clen && !fs->frames[id].refs) {
            fs->frames[id].refs = 1;
            frame_unref(fs, id);
        }
    fs->replaying = 0;
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
    int ok[2];
    int rc = read_slots(fs->img, sb, ok);
    if (rc)
        return rc;
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
            rc = jr_replay(fs);
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
    post_load(fs);
    rc = alloc_rebuild(fs);
    if (rc == -EUCLEAN && fs->ro)
        rc = 0; /* read what can be read; fsck reports the overlap */
    return rc;
}

/* ---- public ------------------------------------------------------------------------ */

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
    uint64_t size = 0;
    int rc = img->ops->size(img->ctx, &size);
    if (rc)
        return rc;
    if (img->is_blockdev) {
        if (!o.capacity || o.capacity > size)
            o.capacity = size;
    } else {
        rc = img->ops->truncate(img->ctx, 0);
        if (rc)
            return rc;
    }
    if (o.capacity && o.capacity < DATA_START + (1u << 20))
        return -ENOSPC;
    gmtf_fs_options fo = {.threads = 1, .flush_interval_ms = 0};
    gmtf_fs *fs;
    rc = fs_new(img, &fo, bs, &fs);
    if (rc)
        return rc;
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
    rc = zero ? img->ops->pwrite(img->ctx, zero, DATA_START, 0) : -ENOMEM;
    free(zero);
    if (!rc) {
        fs->replaying = 1; /* build the root without journaling it */
        rc = jr_inode_new(fs, GMTF_ROOT_INO, 1, S_IFDIR | 0755, (uint32_t)getuid(),
                          (uint32_t)getgid(), 0, GMTF_ROOT_INO, 0);
        fs->replaying = 0;
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
        if (!img->ops->size(img->ctx, &size) && size < fs->end)
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
        for (uint64_t i = 1; i < fs->itab_cap; i++) {
            struct inode *in = fs->itab[i];
            if (in && in->nlink == 0) {
                in->nopen = 0;
                in->nlookup = 0;
                inode_maybe_delete(fs, in);
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
    for (uint64_t i = 1; i < fs->itab_cap; i++) {
        struct inode *in = fs->itab[i];
        if (!in)
            continue;
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
        if (!fs->img->ops->host_free || fs->img->ops->host_free(fs->img->ctx, &host))
            host = 0;
        avail = host + alloc_free_bytes(fs) - alloc_punched_bytes(fs); /* holes: in host */
    }
    uint64_t files = 0;
    for (uint64_t i = 1; i < fs->itab_cap; i++)
        files += fs->itab[i] != NULL;
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
