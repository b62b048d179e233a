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
    if (fs->opt.no_flush && j->len < (64u << 20)) {
        /* mkfs: nothing needs to be durable before the end, so records wait
         * in memory for the final checkpoint (no journal region needed). */
        alloc_commit_pending(fs);
        return 0;
    }
    if (fs->jpos + j->len > fs->sb.jrnl_len)
        return JOURNAL_FULL; /* the caller checkpoints (fs_commit) */
    uint8_t *h = j->p;
    put_le32(h, JR_MAGIC);
    put_le32(h + 4, (uint32_t)(j->len - JR_HDR_SIZE));
    put_le64(h + 8, fs->sb.jrnl_id);
    put_le64(h + 16, fs->jseq);
    put_le32(h + 24, gmtf_crc32c(0, j->p + JR_HDR_SIZE, j->len - JR_HDR_SIZE));
    put_le32(h + 28, gmtf_crc32c(0, h, 28));
    rc = img_write(fs, j->p, j->len, fs->sb.jrnl_off + fs->jpos);
    if (!rc)
        rc = img_flush(fs);
    if (rc) {
        fs_log(fs, "journal write at %llu failed: %s",
               (unsigned long long)(fs->sb.jrnl_off + fs->jpos), strerror(-rc));
        return rc; /* the buffer is kept and written again by the next commit */
    }
    fs->jpos += j->len;
    fs->jseq++;
    j->len = 0;
    alloc_commit_pending(fs);
    return 0;
}

int journal_replay(gmtf_fs *fs)
{
    uint64_t len = fs->sb.jrnl_len, pos = 0;
    fs->jpos = 0;
    fs->jseq = 0;
    if (len == 0)
        return 0;
    uint8_t *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    int rc = img_read(fs, buf, len, fs->sb.jrnl_off);
    if (rc) {
        /* An image cut short inside the journal: replay what is there. */
        free(buf);
        fs_log(fs, "journal at %llu unreadable (%s): not replayed",
               (unsigned long long)fs->sb.jrnl_off, strerror(-rc));
        return 0;
    }
    fs->loading = 1;
    int first = 0;
    while (len - pos >= JR_HDR_SIZE) {
        const uint8_t *h = buf + pos;
        uint32_t plen = get_le32(h + 4);
        if (get_le32(h) != JR_MAGIC || get_le32(h + 28) != gmtf_crc32c(0, h, 28) ||
            get_le64(h + 8) != fs->sb.jrnl_id || get_le64(h + 16) != fs->jseq ||
            plen > len - pos - JR_HDR_SIZE ||
            get_le32(h + 24) != gmtf_crc32c(0, h + JR_HDR_SIZE, plen))
            break; /* the end of the log (or a torn last chunk) */
        int r = rec_apply_all(fs, h + JR_HDR_SIZE, plen);
        if (r && !first) {
            first = r;
            fs_log(fs, "journal chunk %llu at %llu: %s", (unsigned long long)fs->jseq,
                   (unsigned long long)(fs->sb.jrnl_off + pos), strerror(-r));
        }
        pos += JR_HDR_SIZE + plen;
        fs->jseq++;
    }
    fs->loading = 0;
    fs->jpos = pos;
    free(buf);
    return first == -ENOMEM ? first : 0;
}
