#!/bin/bash
# Makes the compatibility images of the CURRENT format version (FMT_VERSION
# in fs/format.h) and their MANIFEST lines. See README.md here for the
# rule: images of a released version are never regenerated or deleted.
#
#   tests/images/make-images.sh BUILDDIR [--force]
#
# BUILDDIR is a built tree (ninja -C BUILDDIR): it needs tools/mkfs.gmtf and
# tests/fs/gen_images. Run as root so that device nodes and foreign owners
# are part of the images (as another user they are left out). --force
# replaces existing images of the current version (only while that version
# is still in development).
set -euo pipefail
export LC_ALL=C

build=${1:?usage: make-images.sh BUILDDIR [--force]}
force=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gen=$build/tests/fs/gen_images
mkfs=$build/tools/mkfs.gmtf
for t in "$gen" "$mkfs"; do
    [ -x "$t" ] || { echo "make-images: $t missing: build $build first" >&2; exit 1; }
done
version=$(sed -n "s/^#define FMT_VERSION \([0-9]*\)u.*/\1/p" "$root/fs/format.h" "$root/fs/fs_internal.h" | head -1)
[ -n "$version" ] || { echo "make-images: FMT_VERSION not found" >&2; exit 1; }
v=v$version
names=("$v-tree.img" "$v-ops.img" "$v-crash.img")
# Version 2 on: also blocks of 1 MiB (frame version 2's method 2 takes blocks
# of 900 KiB and more only).
[ "$version" -ge 2 ] && names+=("$v-large.img")
for n in "${names[@]}"; do
    if [ -e "$here/$n" ] && [ "$force" != --force ]; then
        echo "make-images: $here/$n exists; images of a released format version are" \
             "never regenerated (--force only while $v is in development)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d /tmp/gmtf-images-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$gen" tree "$tmp/tree"
"$mkfs" -q -b 64K -L "gmtf-$v-tree" --from "$tmp/tree" "$tmp/$v-tree.img"
"$gen" ops "$tmp/$v-ops.img" "$tmp/$v-crash.img" "$tmp/mirror"
if [ "$version" -ge 2 ]; then
    "$gen" large "$tmp/large"
    "$mkfs" -q -b 1M -L "gmtf-$v-large" --from "$tmp/large" "$tmp/$v-large.img"
fi

. "$here/manifest-lib.sh"

manifest_image() {
    local img=$1 dir=$2 journal=$3 how=$4
    echo "image $img version=$version bytes=$(stat -c %s "$tmp/$img")" \
         "sha256=$(sha256sum <"$tmp/$img" | cut -d' ' -f1) journal=$journal" \
         "made=$(date -u +%Y-%m-%d) how=$how"
    manifest_tree "$img" "$dir"
}

new=$tmp/MANIFEST.new
if [ -f "$here/MANIFEST" ]; then
    # Keep every other image's lines (older versions stay as they were).
    grep -v -E "^(image|entry) ($(IFS='|'; echo "${names[*]}" | sed 's/\./\\./g')) " \
        "$here/MANIFEST" >"$new" || true
else
    cat >"$new" <<'EOF'
# gmtf compatibility images: what each image in this folder must show.
# Made by make-images.sh; checked by tests/fs/test_fs_images.c. Never edit
# or delete the lines of a released format version. Line formats:
#   image NAME version=V bytes=N sha256=HEX journal=0|1 made=DATE how=WORDS
#     journal=1: the image holds journal records that a mount replays
#   entry NAME PATH TYPE mode=OCTAL uid=N gid=N mtime=SEC.NSEC [fields]
#     TYPE dir|file|symlink|fifo|socket|chr|blk; file: size=N sha256=HEX
#     nlink=N [inode=K: paths with one K are hard links of one inode];
#     symlink: target=HEX; chr, blk: rdev=MAJOR:MINOR;
#     xattr.NAME=HEX for every extended attribute (no others may exist)
EOF
fi
{
    manifest_image "$v-tree.img" "$tmp/tree" 0 "mkfs.gmtf_-b_64K_--from_generated_tree"
    manifest_image "$v-ops.img" "$tmp/mirror" 0 "library_workload,_clean_unmount"
    manifest_image "$v-crash.img" "$tmp/mirror" 1 "library_workload,_crash_after_fsync"
    if [ "$version" -ge 2 ]; then
        manifest_image "$v-large.img" "$tmp/large" 0 "mkfs.gmtf_-b_1M_--from_generated_tree"
    fi
} >>"$new"

for n in "${names[@]}"; do
    cp "$tmp/$n" "$here/$n"
done
mv "$new" "$here/MANIFEST"
ls -l "${names[@]/#/$here/}"
echo "make-images: wrote ${names[*]} and MANIFEST in $here"
