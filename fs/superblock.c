/* The superblock slots: their byte layout (docs/format.md), reading and
 * writing them, and choosing which generation to load. A slot names the
 * durable state: the snapshot and journal copies. Generation g goes to
 * slot g & 1 and then to slot 2 + (g & 1) (version 2), so a checkpoint
 * never overwrites the slots naming the state it builds on, and a single
 * damaged page never hides the newest generation. */

#include "fs_internal.h"

void sb_encode(const sb_info *sb, uint8_t *b)
{
    memset(b, 0, SB_SLOT_SIZE);
    memcpy(b, SB_MAGIC, 8);
    store_le32(b + 8, FMT_VERSION);
    store_le32(b + 12, sb->incompat);
    store_le64(b + 16, sb->gen);
    memcpy(b + 24, sb->uuid, 16);
    memcpy(b + 40, sb->label, strnlen(sb->label, GMTF_FS_LABEL_MAX));
    store_le32(b + 104, sb->block_size);
    store_le32(b + 108, 0);
    store_le64(b + 112, sb->capacity);
    store_le64(b + 120, sb->image_end);
    store_le64(b + 128, sb->snap_off);
    store_le64(b + 136, sb->snap_len);
    store_le64(b + 144, sb->jrnl_off);
    store_le64(b + 152, sb->jrnl_len);
    store_le64(b + 160, sb->jrnl_id);
    store_le64(b + 168, sb->ctime);
    store_le64(b + 176, sb->wtime);
    store_le64(b + 184, sb->snap2_off);
    store_le64(b + 192, sb->jrnl2_off);
    store_le32(b + 200, sb->pack_size);
    store_le64(b + 204, sb->ino_gen);
    store_le32(b + SB_SLOT_SIZE - 4, gmtf_crc32c(0, b, SB_SLOT_SIZE - 4));
}

uint64_t sb_journal_id(const uint8_t uuid[16], uint64_t gen)
{
    /* Unique per checkpoint and per filesystem: a stale chunk left by an
     * older journal (or an older filesystem on the device) never matches. */
    return fs_hash64(uuid, 16, gen) ^ gen;
}

/* Does [off, off+len) lie in the data area (and the capacity)? */
static int sb_region_ok(const sb_info *sb, uint64_t start, uint64_t off, uint64_t len)
{
    return off >= start && off + len >= off && (!sb->capacity || off + len <= sb->capacity);
}

int sb_decode(const uint8_t *b, sb_info *sb)
{
    if (memcmp(b, SB_MAGIC, 8))
        return -EINVAL;
    if (load_le32(b + SB_SLOT_SIZE - 4) != gmtf_crc32c(0, b, SB_SLOT_SIZE - 4))
        return -EUCLEAN;
    uint32_t version = load_le32(b + 8), incompat = load_le32(b + 12);
    if (version > FMT_VERSION || (version == FMT_VERSION && (incompat & ~SB_INCOMPAT_KNOWN)))
        return -EPROTONOSUPPORT;
    if (version < FMT_VERSION_1 || (version == FMT_VERSION_1 && incompat))
        return -EUCLEAN;
    memset(sb, 0, sizeof *sb);
    sb->version = version;
    sb->incompat = incompat;
    sb->gen = load_le64(b + 16);
    memcpy(sb->uuid, b + 24, 16);
    memcpy(sb->label, b + 40, GMTF_FS_LABEL_MAX);
    sb->label[GMTF_FS_LABEL_MAX] = 0;
    sb->block_size = load_le32(b + 104);
    sb->capacity = load_le64(b + 112);
    sb->image_end = load_le64(b + 120);
    sb->snap_off = load_le64(b + 128);
    sb->snap_len = load_le64(b + 136);
    sb->jrnl_off = load_le64(b + 144);
    sb->jrnl_len = load_le64(b + 152);
    sb->jrnl_id = load_le64(b + 160);
    sb->ctime = load_le64(b + 168);
    sb->wtime = load_le64(b + 176);
    sb->ino_gen = load_le64(b + 204);
    uint64_t start = DATA_START_V1;
    if (version >= FMT_VERSION) {
        sb->snap2_off = load_le64(b + 184);
        sb->jrnl2_off = load_le64(b + 192);
        sb->pack_size = load_le32(b + 200);
        start = DATA_START;
    }
    uint32_t bs = sb->block_size, ps = sb->pack_size;
    if (bs < GMTF_FS_BLOCK_MIN || bs > GMTF_FS_BLOCK_MAX || (bs & (bs - 1)))
        return -EUCLEAN;
    if (ps && (ps < GMTF_FS_BLOCK_MIN || ps > bs || (ps & (ps - 1))))
        return -EUCLEAN; /* 0: packs of up to a block (images before the field) */
    if (sb->snap_len < SNAP_HDR_SIZE || sb->snap_len > (1ull << 40) ||
        !sb_region_ok(sb, start, sb->snap_off, sb->snap_len))
        return -EUCLEAN;
    if (sb->jrnl_len > (1ull << 30) ||
        (sb->jrnl_len && !sb_region_ok(sb, start, sb->jrnl_off, sb->jrnl_len)))
        return -EUCLEAN;
    if (version >= FMT_VERSION &&
        (!sb_region_ok(sb, start, sb->snap2_off, sb->snap_len) ||
         (sb->jrnl_len && !sb_region_ok(sb, start, sb->jrnl2_off, sb->jrnl_len))))
        return -EUCLEAN;
    return 0;
}

int sb_read_slots(gmtf_fs *fs, sb_info sb[SB_SLOTS], int res[SB_SLOTS])
{
    uint8_t *b = malloc(SB_SLOTS * SB_SLOT_SIZE);
    if (!b)
        return -ENOMEM;
    unsigned nslots = SB_SLOTS;
    uint64_t size = 0;
    if (!img_size(fs, &size) && size < SB_SLOTS * SB_SLOT_SIZE)
        nslots = SB_SLOTS_V1; /* a small version 1 image: no room for four */
    int rc = img_read(fs, b, nslots * SB_SLOT_SIZE, 0);
    int magic = 0, newer = 0;
    for (unsigned i = 0; i < SB_SLOTS; i++) {
        res[i] = rc ? rc : i < nslots ? sb_decode(b + i * SB_SLOT_SIZE, &sb[i]) : -EINVAL;
        magic |= res[i] == 0 || res[i] == -EUCLEAN;
        newer |= res[i] == -EPROTONOSUPPORT;
    }
    free(b);
    if (rc)
        return rc == -EIO ? -EINVAL : rc; /* shorter than two slots: not an image */
    for (unsigned i = 0; i < SB_SLOTS; i++)
        if (res[i] == 0)
            return 0;
    return newer ? -EPROTONOSUPPORT : magic ? -EUCLEAN : -EINVAL;
}

/* Is slot i a valid copy of generation gen? (A version 1 generation lives
 * only in slot gen & 1; version 2 in slots gen & 1 and 2 + (gen & 1).) */
static int holds(const sb_info sb[SB_SLOTS], const int res[SB_SLOTS], unsigned i, uint64_t gen)
{
    return res[i] == 0 && sb[i].gen == gen;
}

static int slot_fits(const sb_info *s, unsigned i)
{
    if ((s->gen & 1) != (i & 1))
        return 0;
    return s->version >= FMT_VERSION || i < SB_SLOTS_V1;
}

void sb_pick(const sb_info sb[SB_SLOTS], const int res[SB_SLOTS], sb_choice *c)
{
    memset(c, 0, sizeof *c);
    int ok[SB_SLOTS];
    for (unsigned i = 0; i < SB_SLOTS; i++)
        ok[i] = res[i] == 0 && slot_fits(&sb[i], i);
    /* Generations newest first; each once, from its primary when valid. */
    int used[SB_SLOTS] = {0};
    for (;;) {
        int best = -1;
        for (unsigned i = 0; i < SB_SLOTS; i++)
            if (ok[i] && !used[i] &&
                (best < 0 || sb[i].gen > sb[best].gen ||
                 (sb[i].gen == sb[best].gen && (unsigned)best > i)))
                best = (int)i;
        if (best < 0)
            break;
        for (unsigned i = 0; i < SB_SLOTS; i++)
            if (ok[i] && sb[i].gen == sb[best].gen)
                used[i] = 1;
        c->slot[c->n++] = best;
    }
    if (c->n == 0 || sb[c->slot[0]].version < FMT_VERSION)
        return; /* version 1: one copy, nothing more to tell */
    uint64_t v = sb[c->slot[0]].gen;
    unsigned p = (unsigned)(v & 1), q = p ^ 1;
    int prim = ok[p] && holds(sb, res, p, v), sec = ok[2 + p] && holds(sb, res, 2 + p, v);
    if (!prim)
        c->twin_bad = 1; /* the primary is written first: only damage loses it */
    else if (!sec)
        c->twin_torn = 1; /* a crash between the two writes (or damage) */
    /* The other pair holds the generation before (or a torn write of the
     * next one, in its primary): both unreadable is damage, not a crash. */
    if (res[q] != 0 && res[2 + q] != 0 && sb[c->slot[0]].gen > 1)
        c->pair_lost = 1;
}

int sb_write(gmtf_fs *fs, const sb_info *sb, int secondary)
{
    uint8_t *b = malloc(SB_SLOT_SIZE);
    if (!b)
        return -ENOMEM;
    sb_encode(sb, b);
    uint64_t slot = (sb->gen & 1) + (secondary ? 2 : 0);
    int rc = img_write(fs, b, SB_SLOT_SIZE, slot * SB_SLOT_SIZE);
    free(b);
    return rc;
}
