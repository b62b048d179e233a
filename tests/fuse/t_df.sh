#!/bin/bash
# statfs tells the truth: df's used space grows with stored data, and
# deleting a tree (and overwriting a file) gives the space back, also
# after unmount and remount; du follows stored (compressed) bytes.
. "$(dirname "$0")/common.sh"
need_real
need df du

# syncfs(2) (sync) does not reach a FUSE daemon (the kernel sends FUSE
# syncfs to virtiofs only), so data still in the write-back cache is not
# counted yet: fsync every file first, which compresses and stores it.
used() {
    find "$MNT" -type f -exec sync {} + 2>/dev/null
    df -B1 --output=used "$MNT" | tail -n 1 | tr -d ' '
}
avail() { df -B1 --output=avail "$MNT" | tail -n 1 | tr -d ' '; }

make_image
gmtf_mount
u0=$(used)
[ "$(avail)" -gt 0 ] || fail "df shows no free space"
# 24 MiB of incompressible data and a source tree
for i in 1 2 3; do head -c 8M /dev/urandom >"$MNT/rand$i"; done
cp -a "${GMTF_SRC_TREE:-/usr/include/linux}" "$MNT/tree" || fail "cp tree"
u1=$(used)
say "used: empty $u0, with data $u1"
[ $((u1 - u0)) -ge $((20 << 20)) ] || fail "24 MiB of random data raised df used by only $((u1 - u0)) bytes"
# du of random data ~ its size; of a text tree less than its apparent size
r=$(du -B1 -s "$MNT/rand1" | cut -f1)
[ "$r" -ge $((7 << 20)) ] || fail "du of 8 MiB random data says $r"
ta=$(du -B1 -s --apparent-size "$MNT/tree" | cut -f1); ts=$(du -B1 -s "$MNT/tree" | cut -f1)
say "tree: apparent $ta bytes, stored $ts bytes"

rm -rf "$MNT/tree" "$MNT/rand1" "$MNT/rand2"
u2=$(used)
say "used after deleting: $u2"
[ $((u1 - u2)) -ge $((14 << 20)) ] || fail "deleting 16 MiB + a tree gave back only $((u1 - u2)) bytes"
# overwriting a file in place does not grow the used space without bound
for k in 1 2 3 4 5; do head -c 8M /dev/urandom >"$MNT/rand3"; sync "$MNT/rand3"; done
u3=$(used)
[ $((u3 - u2)) -le $((10 << 20)) ] || fail "rewriting an 8 MiB file 5 times grew used by $((u3 - u2))"
gmtf_umount
fsck_clean
gmtf_mount
u4=$(used)
say "used after remount: $u4"
[ "$u4" -le $((u3 + (2 << 20))) ] || fail "used grew across remount: $u3 -> $u4"
gmtf_umount
fsck_clean
say "PASS"
