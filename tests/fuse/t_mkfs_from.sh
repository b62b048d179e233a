#!/bin/bash
# mkfs.gmtf --from an archive (tar.gz, tar.xz, from stdin) and from a
# directory, then every file and its metadata on the mount compared with
# the archive as tar extracts it: contents, type, mode, owner, ns mtime,
# link targets, hard-link groups, device numbers, xattrs, ACLs, sizes of
# sparse files.
. "$(dirname "$0")/common.sh"
need_real
need tar getfattr setfattr setfacl python3
"$MKFS" --help 2>&1 | grep -q -- '--from' || skip "mkfs.gmtf has no --from yet"

# ---- a tree with one of everything
SRC=$T_DIR/src
mkdir -p "$SRC/dir/sub" "$SRC/empty_dir" "$SRC/modes"
cp -a "${GMTF_SRC_TREE:-/usr/include/linux}" "$SRC/tree" 2>/dev/null || skip "no source tree"
printf 'hello\n' >"$SRC/dir/f"
: >"$SRC/dir/empty"
head -c 2M /dev/urandom >"$SRC/dir/rand"
seq 1 300000 >"$SRC/dir/text"
ln "$SRC/dir/f" "$SRC/dir/hard1" && ln "$SRC/dir/f" "$SRC/dir/sub/hard2"
ln -s f "$SRC/dir/sym" && ln -s /nonexistent/target "$SRC/dir/dangling"
mkfifo "$SRC/dir/fifo" && mknod "$SRC/dir/null" c 1 3 && mknod "$SRC/dir/loop" b 7 5
truncate -s 50M "$SRC/dir/sparse" && echo end >>"$SRC/dir/sparse"
for m in 0 400 644 700 755 1777 2755 4755 6711; do : >"$SRC/modes/m$m"; chmod $m "$SRC/modes/m$m"; done
chown 1001:2002 "$SRC/dir/f" && chown 3:4 "$SRC/modes/m644"
setfattr -n user.color -v blue "$SRC/dir/f" && setfattr -n user.bin -v 0x0001ff00 "$SRC/dir/rand"
setfacl -m u:65534:r "$SRC/dir/text" && setfacl -d -m g:65534:rx "$SRC/dir/sub"
touch -h -d '2003-04-05 06:07:08.123456789' "$SRC/dir/sym"
touch -d '1999-12-31 23:59:59.987654321' "$SRC/dir/f" "$SRC/dir/sub" "$SRC/empty_dir"
TAR_OPTS="--format=posix --xattrs --xattrs-include=* --acls --numeric-owner --sort=name"
tar $TAR_OPTS -C "$SRC" -cf "$T_DIR/a.tar" . || fail "tar create"
gzip -k "$T_DIR/a.tar" && xz -k -T1 "$T_DIR/a.tar" || fail "compress"
REF=$T_DIR/ref
mkdir "$REF" && tar $TAR_OPTS -C "$REF" -xpf "$T_DIR/a.tar" || fail "reference extraction"

meta() { # DIR -> metadata lines, hard-link groups by first path, xattrs
    tree_meta "$1"
    (cd "$1" && find . -type b -o -type c | sort | xargs -r stat -c '%n %t:%T')
    (cd "$1" && find . -links +1 -type f -printf '%i %p\n' | sort -k2 |
        awk '{ if (!($1 in g)) g[$1] = $2; print $2, "->", g[$1] }')
    tree_xattrs "$1"
}
compare_with_ref() { # what
    same_tree "$REF" "$MNT" || fail "$1: contents differ from the archive"
    meta "$REF" >"$T_DIR/meta.ref"
    meta "$MNT" >"$T_DIR/meta.mnt"
    diff "$T_DIR/meta.ref" "$T_DIR/meta.mnt" >"$T_DIR/meta.diff" || {
        grep '^[<>]' "$T_DIR/meta.diff" | head -n 20 >&2; fail "$1: metadata differs from the archive"; }
    [ "$(stat -c %s "$MNT/dir/sparse")" = $(((50 << 20) + 4)) ] || fail "$1: sparse size"
}

for src in a.tar.gz a.tar.xz stdin dir; do
    rm -f "$IMG"
    case $src in
    stdin) timeout 600 "$MKFS" --from - "$IMG" <"$T_DIR/a.tar.xz" >"$T_DIR/mkfs.log" 2>&1 ;;
    dir) timeout 600 "$MKFS" --from "$SRC" "$IMG" >"$T_DIR/mkfs.log" 2>&1 ;;
    *) timeout 600 "$MKFS" --from "$T_DIR/$src" "$IMG" >"$T_DIR/mkfs.log" 2>&1 ;;
    esac || { cat "$T_DIR/mkfs.log" >&2; fail "mkfs.gmtf --from $src"; }
    fsck_clean
    gmtf_mount
    compare_with_ref "--from $src"
    gmtf_umount
    fsck_clean
    say "--from $src: image $(stat -c %s "$IMG") bytes for $(du -sb "$SRC" | cut -f1) bytes of tree"
done
say "PASS"
