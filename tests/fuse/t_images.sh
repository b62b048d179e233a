#!/bin/bash
# The format compatibility images (tests/images/) through the daemon: each
# one, copied, mounts with -o ro (the copy is not changed, the crash image's
# journal is replayed in memory) and read-write, and the mounted tree shows
# exactly the MANIFEST's lines (types, modes, owners, ns times, sizes,
# sha256, links, devices, xattrs); fsck is clean after the rw unmount.
. "$(dirname "$0")/common.sh"
need_real
need python3
export LC_ALL=C
IMAGES=${GMTF_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/images
[ -f "$IMAGES/MANIFEST" ] || fail "$IMAGES/MANIFEST missing"
. "$IMAGES/manifest-lib.sh"

compare() { # compare NAME: the mounted tree against MANIFEST
    grep "^entry $1 " "$IMAGES/MANIFEST" >"$T_DIR/want"
    manifest_tree "$1" "$MNT" >"$T_DIR/got" || fail "$1: walking the mount failed"
    [ -s "$T_DIR/want" ] || fail "$1: no entries in MANIFEST"
    diff "$T_DIR/want" "$T_DIR/got" >"$T_DIR/diff" || {
        head -n 20 "$T_DIR/diff" >&2
        fail "$1: the mounted tree differs from MANIFEST"
    }
}

n=0
for name in $(awk '$1 == "image" { print $2 }' "$IMAGES/MANIFEST"); do
    cp "$IMAGES/$name" "$IMG" || fail "copy $name"
    cp "$IMG" "$T_DIR/orig"
    gmtf_mount -o ro
    compare "$name"
    gmtf_umount
    cmp -s "$IMG" "$T_DIR/orig" || fail "$name: a read-only mount changed the image"
    gmtf_mount
    compare "$name"
    gmtf_umount
    fsck_clean
    gmtf_mount -o ro
    compare "$name"
    gmtf_umount
    say "$name: ok"
    n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "only $n images listed"
exit 0
