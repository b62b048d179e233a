#!/bin/bash
# The daemon's memory beyond its configured caches stays small (issue 3):
# an image made from a source tree is read whole by tar, then twice by
# eight parallel readers, and the daemon's peak RSS (VmHWM) less its
# decoded-block cache must stay under a bound that follows from the design
# (docs/format.md, "Memory per file"): with threads=2, three decoders of
# about 5 blocks each (2 MiB blocks: 32 MiB), FUSE request buffers (up to
# 1 MiB per FUSE thread), read-ahead groups, the metadata (~300 bytes a
# file) and the program itself: about 46 MiB measured on /usr/include
# (8,036 files), bound 56 MiB + 600 bytes a file. Before the fixed mmap
# threshold (tools/gmtf_mount.c) the same run took 67-68 MiB, and the
# Linux 6.1 tree 250-300 MiB beyond a 64 MiB cache. Since mkfs cuts its pack
# frames by their cost to a cold read at F = 650 (2026-11-25, task ratio11)
# the tree's frames are larger (13 frames for its 123 MB, 16 at F = 375), and
# the decoders' workspaces grow with the largest frame each has decoded
# (docs/format.md, "Memory per file"): 51 MiB measured at F = 375, 60-62 at
# F = 650 on the 2-core machine; bound 68 MiB + 600 bytes a file.
. "$(dirname "$0")/common.sh"
need_real
need tar xargs find

# meson test sets MALLOC_PERTURB_, which makes malloc write every byte it
# hands out: RSS would then be what the daemon allocated, not what it uses.
unset MALLOC_PERTURB_
TREE=${GMTF_MEM_TREE:-/usr/include}
[ -d "$TREE" ] || skip "no $TREE to read"
CACHE_MIB=16
nfiles=$(find "$TREE" -type f | wc -l)
LIMIT_MIB=$((68 + nfiles * 600 / 1048576))

make_image --from "$TREE"
gmtf_mount -o "cache_size=${CACHE_MIB}M,threads=2"
[ -r "/proc/$DPID/status" ] || skip "no /proc/$DPID/status"

hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$DPID/status"; }
start=$(hwm_kib)
bytes=$(cd "$MNT" && tar cf - . | wc -c) || fail "tar of the mount failed"
[ "$bytes" -gt $((1 << 20)) ] || fail "tar read only $bytes bytes"
for pass in 1 2; do
    (cd "$MNT" && find . -type f -print0 | xargs -0 -P 8 -n 16 cat >/dev/null) ||
        fail "parallel readers failed (pass $pass)"
done
peak=$(hwm_kib)
kill -0 "$DPID" 2>/dev/null || fail "daemon died"
beyond=$((peak / 1024 - CACHE_MIB))
say "tree $TREE ($nfiles files), $bytes bytes through tar; VmHWM after mount" \
    "$((start / 1024)) MiB, after reading $((peak / 1024)) MiB: $beyond MiB beyond the" \
    "${CACHE_MIB} MiB cache (bound $LIMIT_MIB)"
[ "$beyond" -lt "$LIMIT_MIB" ] ||
    fail "daemon peak RSS $((peak / 1024)) MiB is $beyond MiB beyond its cache (bound $LIMIT_MIB)"
gmtf_umount
say "PASS"
