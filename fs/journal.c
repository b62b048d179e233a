/* The journal: the records built since the last commit (fs->jbuf) are
 * written as one checksummed chunk into the journal region and flushed;
 * at mount the chunks are read back and applied until the first that does
 * not check (the end of the log, or a torn last chunk). When the region is
 * full, journal_commit says so (JOURNAL_FULL) and its caller checkpoints
 * (sync.c). */
#include <stdio.h>

#include "fs_internal.h"

int journal_commit(gmtf_fs *fs)
{
    if (fs->ro)
        return 0;
    int rc = rec_attr_emit(fs);
    if (rc)
        return rc;
    wbuf *j = &fs->jbuf;
    if (j->len == 0)
        return 0;
    if (fs->opt.no_flush) {
        /* mkfs: nothing needs to be durable before the end, and the final
         * checkpoint writes the whole state from memory: the records are
         * not needed (no journal region, no checkpoint before the end, so
         * the image keeps no snapshot but the final one's). */
        j->len = 0;
        alloc_commit_pending(fs);
        return 0;
    }
    if (fs->jpos + j->len > fs->sb.jrnl_len)
        return JOURNAL_FULL; /* the caller checkpoints (fs_commit) */
    uint8_t *h = j->p;
    store_le32(h, JR_MAGIC);
    store_le32(h + 4, (uint32_t)(j->len - JR_HDR_SIZE));
    store_le64(h + 8, fs->sb.jrnl_id);
    store_le64(h + 16, fs->jseq);
    store_le32(h + 24, gmtf_crc32c(0, j->p + JR_HDR_SIZE, j->len - JR_HDR_SIZE));
    store_le32(h + 28, gmtf_crc32c(0, h, 28));
    /* Both copies, then one device flush. */
    uint64_t at = fs->sb.jrnl_off + fs->jpos;
    rc = img_write(fs, j->p, j->len, at);
    if (!rc && fs->sb.jrnl2_off)
        rc = img_write(fs, j->p, j->len, at = fs->sb.jrnl2_off + fs->jpos);
    if (!rc)
        rc = img_flush(fs);
    if (rc) {
        fs_log(fs, "journal write at %llu failed: %s", (unsigned long long)at, strerror(-rc));
        return rc; /* the buffer is kept and written again by the next commit */
    }
    fs->jpos += j->len;
    fs->jseq++;
    j->len = 0;
    alloc_commit_pending(fs);
    return 0;
}

/* The payload length of a valid chunk with sequence number seq at pos of a
 * copy (len bytes), else -1. */
static int64_t chunk_at(const gmtf_fs *fs, const uint8_t *buf, uint64_t len, uint64_t pos,
                        uint64_t seq)
{
    if (!buf || len - pos < JR_HDR_SIZE)
        return -1;
    const uint8_t *h = buf + pos;
    uint32_t plen = load_le32(h + 4);
    if (load_le32(h) != JR_MAGIC || load_le32(h + 28) != gmtf_crc32c(0, h, 28) ||
        load_le64(h + 8) != fs->sb.jrnl_id || load_le64(h + 16) != seq ||
        plen > len - pos - JR_HDR_SIZE ||
        load_le32(h + 24) != gmtf_crc32c(0, h + JR_HDR_SIZE, plen))
        return -1;
    return plen;
}

/* Is there a valid chunk of this journal with a sequence number above seq
 * anywhere past pos? Then the log does not end at pos: it is damaged. */
static int later_chunk(const gmtf_fs *fs, const uint8_t *buf, uint64_t len, uint64_t pos,
                       uint64_t seq)
{
    if (!buf)
        return 0;
    for (uint64_t p = pos + 1; p + JR_HDR_SIZE <= len; p++) {
        const uint8_t *h = buf + p;
        if (load_le32(h) != JR_MAGIC || load_le64(h + 8) != fs->sb.jrnl_id)
            continue;
        uint64_t s = load_le64(h + 16);
        if (s > seq && s - seq < len && chunk_at(fs, buf, len, p, s) >= 0)
            return 1;
    }
    return 0;
}

int journal_replay(gmtf_fs *fs)
{
    uint64_t len = fs->sb.jrnl_len, pos = 0;
    fs->jpos = 0;
    fs->jseq = 0;
    if (len == 0)
        return 0;
    /* Every chunk is in both copies: a chunk damaged in one is read from
     * the other. A torn last commit can leave it valid in one copy only. */
    uint64_t offs[2] = {fs->sb.jrnl_off, fs->sb.jrnl2_off};
    int ncopies = fs->sb.jrnl2_off ? 2 : 1, readable = 0;
    /* Never more memory than the image can hold (a superblock may claim a
     * 1 GiB journal in a small image): a copy reaching past the end is
     * unreadable below, the other is read as far as the image goes. */
    uint64_t size, room = 0;
    if (!img_size(fs, &size)) {
        for (int k = 0; k < ncopies; k++)
            if (offs[k] < size && size - offs[k] > room)
                room = size - offs[k];
        if (len > room)
            len = room;
        if (len == 0) {
            fs_log(fs, "journal of generation %llu lies past the end of the image",
                   (unsigned long long)fs->sb.gen);
            return -EIO;
        }
    }
    uint8_t *buf[2] = {NULL, NULL};
    for (int k = 0; k < ncopies; k++) {
        buf[k] = malloc(len);
        if (!buf[k]) {
            free(buf[0]);
            return -ENOMEM;
        }
        int rc = img_read(fs, buf[k], len, offs[k]);
        if (rc) {
            fs_log(fs, "journal copy at %llu (%llu bytes) unreadable: %s",
                   (unsigned long long)offs[k], (unsigned long long)len, strerror(-rc));
            free(buf[k]);
            buf[k] = NULL;
            fs->meta_damaged++;
        } else {
            readable++;
        }
    }
    if (!readable) {
        fs_log(fs, "journal of generation %llu unreadable: its records cannot be replayed",
               (unsigned long long)fs->sb.gen);
        return -EIO;
    }
    fs->loading = LOADING_JOURNAL;
    int first = 0, damage = 0, single = 0; /* single: a chunk served by one copy only */
    for (;;) {
        int64_t plen = -1;
        int from = -1, bad = 0;
        for (int k = 0; k < ncopies; k++) {
            int64_t l = chunk_at(fs, buf[k], len, pos, fs->jseq);
            if (l < 0)
                bad = 1;
            else if (from < 0) {
                from = k;
                plen = l;
            }
        }
        if (from < 0) {
            for (int k = 0; k < ncopies && !damage; k++)
                if (later_chunk(fs, buf[k], len, pos, fs->jseq)) {
                    fs_log(fs,
                           "journal chunk %llu at %llu damaged in every copy, yet later "
                           "chunks exist",
                           (unsigned long long)fs->jseq, (unsigned long long)(offs[k] + pos));
                    damage = -EUCLEAN;
                }
            break; /* the end of the log (or a torn last commit) */
        }
        if (single)
            fs->meta_damaged++; /* the chunk before was in one copy, yet not the last */
        single = bad;
        const uint8_t *h = buf[from] + pos;
        int r = rec_apply_all(fs, h + JR_HDR_SIZE, (size_t)plen);
        if (r && !first) {
            first = r;
            fs_log(fs, "journal chunk %llu at %llu: %s", (unsigned long long)fs->jseq,
                   (unsigned long long)(offs[from] + pos), strerror(-r));
        }
        pos += JR_HDR_SIZE + (uint64_t)plen;
        fs->jseq++;
    }
    fs->loading = 0;
    fs->jpos = pos;
    free(buf[0]);
    free(buf[1]);
    if (first == -ENOMEM)
        return first;
    return damage; /* records that do not apply: counted, fsck reports them */
}
