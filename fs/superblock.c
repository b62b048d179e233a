/* The two superblock slots: their byte layout (docs/format.md) and reading
 * and writing them. A slot names the durable state: a snapshot and a
 * journal region. Slot gen & 1 takes generation gen, so a checkpoint never
 * overwrites the slot that names the state it builds on. */

#include "fs_internal.h"

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

int sb_read_slots(gmtf_fs *fs, sb_info sb[2], int res[2])
{
    uint8_t *b = malloc(2 * SB_SLOT_SIZE);
    if (!b)
        return -ENOMEM;
    int rc = img_read(fs, b, 2 * SB_SLOT_SIZE, 0);
    int magic = 0;
    for (int i = 0; i < 2; i++) {
        res[i] = rc ? rc : sb_decode(b + i * SB_SLOT_SIZE, &sb[i]);
        magic |= res[i] == 0 || res[i] == -EUCLEAN;
    }
    free(b);
    if (rc)
        return rc == -EIO ? -EINVAL : rc; /* shorter than two slots: not an image */
    if (res[0] && res[1])
        return magic ? -EUCLEAN : -EINVAL;
    return 0;
}

int sb_write(gmtf_fs *fs, const sb_info *sb)
{
    uint8_t *b = malloc(SB_SLOT_SIZE);
    if (!b)
        return -ENOMEM;
    sb_encode(sb, b);
    int rc = img_write(fs, b, SB_SLOT_SIZE, (sb->gen & 1) * SB_SLOT_SIZE);
    free(b);
    return rc;
}
