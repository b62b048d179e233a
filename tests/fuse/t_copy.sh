#!/bin/bash
# Real copies: cp -a and diff -r of the corpus and of a source tree, with
# their metadata; tar create from the mount and extract onto it; on a real
# image, everything again after unmount and remount, then fsck.
. "$(dirname "$0")/common.sh"
need tar diff find

SRC_TREE=${GMTF_SRC_TREE:-/usr/include/linux}
[ -d "$SRC_TREE" ] || skip "no source tree at $SRC_TREE"
CORPUS=${GMTF_CORPUS:-}
[ -n "$CORPUS" ] && [ -d "$CORPUS" ] || { say "note: corpus absent (GMTF_CORPUS='$CORPUS'), its case skipped"; CORPUS=; }

make_image
gmtf_mount

check_copy() { # SRC DST
    same_tree "$1" "$2" || fail "diff -r $1 $2"
    tree_meta "$1" >"$T_DIR/meta.src"
    tree_meta "$2" >"$T_DIR/meta.dst"
    diff "$T_DIR/meta.src" "$T_DIR/meta.dst" >"$T_DIR/meta.diff" || {
        { grep "^<" "$T_DIR/meta.diff" | head -n 3; grep "^>" "$T_DIR/meta.diff" | head -n 3; } >&2
        fail "metadata of $2 differs from $1"
    }
}

timeout 300 cp -a "$SRC_TREE" "$MNT/src" || fail "cp -a $SRC_TREE"
check_copy "$SRC_TREE" "$MNT/src"
if [ -n "$CORPUS" ]; then
    timeout 300 cp -a "$CORPUS" "$MNT/corpus" || fail "cp -a corpus"
    check_copy "$CORPUS" "$MNT/corpus"
fi

# tar out of the mount, tar into the mount (pax keeps ns timestamps)
TAR_OPTS="--format=posix --pax-option=delete=atime,delete=ctime --sort=name"
timeout 300 tar $TAR_OPTS -C "$MNT" -cf "$T_DIR/out.tar" src || fail "tar create from the mount"
mkdir "$MNT/untar" && timeout 300 tar -C "$MNT/untar" -xpf "$T_DIR/out.tar" || fail "tar extract onto the mount"
check_copy "$SRC_TREE" "$MNT/untar/src"
timeout 300 tar $TAR_OPTS -C "$MNT/untar" -cf "$T_DIR/again.tar" src || fail "tar of the extracted tree"
cmp "$T_DIR/out.tar" "$T_DIR/again.tar" || fail "tar of the copy differs from tar of the original"

# a copy made inside the mount (reads and writes on the same filesystem)
timeout 300 cp -a "$MNT/src" "$MNT/src2" || fail "cp -a inside the mount"
check_copy "$SRC_TREE" "$MNT/src2"

if [ "$GMTF_MEMFS" != 1 ]; then
    gmtf_umount
    fsck_clean
    gmtf_mount
    check_copy "$SRC_TREE" "$MNT/src"
    check_copy "$SRC_TREE" "$MNT/untar/src"
    [ -n "$CORPUS" ] && check_copy "$CORPUS" "$MNT/corpus"
fi
gmtf_umount
fsck_clean
say "PASS"
