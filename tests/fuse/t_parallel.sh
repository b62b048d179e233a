#!/bin/bash
# Parallel writers and readers: 4 writers making files, 4 writers filling
# disjoint ranges of one shared file, readers re-reading a tree the whole
# time, and a directory changing under a lister; then every byte checked,
# and again after unmount and remount on a real image.
. "$(dirname "$0")/common.sh"
need sha256sum dd

# GMTF_TEST_SCALE (tests/README.md; scripts/test's TSan pass sets 8): fewer
# reader rounds and directory changes, and a third of the data (1 MiB pieces
# instead of 3): the same writers and ranges, but under ThreadSanitizer the
# codec's work on 70 MB was most of the pass's time.
scale=${GMTF_TEST_SCALE:-1}
mib=$((scale >= 4 ? 1 : 3))
rounds=$(((5 + scale - 1) / scale)) churns=$((60 / scale > 15 ? 60 / scale : 15))

SRC=$T_DIR/src
mkdir -p "$SRC"
for i in 1 2 3 4; do head -c $((mib << 20)) /dev/urandom >"$SRC/rand$i"; done
# compressible data too, so the codec path is exercised beyond stored blocks
for i in 1 2 3 4; do seq $((i * 100000)) $((i * 100000 + mib * 400000 / 3)) >"$SRC/text$i"; done
(cd "$SRC" && sha256sum * >"$T_DIR/src.sha")

make_image
gmtf_mount
cp -a "$SRC" "$MNT/ro" || fail "seed copy"

pids=()
# writers: each makes its own files, in chunks, some rewritten
for w in 1 2 3 4; do
    (
        mkdir -p "$MNT/w$w" || exit 1
        for k in 1 2 3; do
            cat "$SRC/rand$w" >"$MNT/w$w/r$k" || exit 1
            dd if="$SRC/text$w" of="$MNT/w$w/t$k" bs=64k 2>/dev/null || exit 1
        done
        cat "$SRC/text$w" >"$MNT/w$w/r2" || exit 1 # overwrite with different data
    ) & pids+=($!)
done
# four writers on disjoint 1 MiB-aligned ranges of one file
: >"$MNT/shared"
for w in 1 2 3 4; do
    dd if="$SRC/rand$w" of="$MNT/shared" bs=1M seek=$(((w - 1) * mib)) conv=notrunc 2>/dev/null & pids+=($!)
done
# readers: re-read and check the seeded tree while the writers run
for r in 1 2 3; do
    ( for k in $(seq 1 $rounds); do (cd "$MNT/ro" && sha256sum -c --quiet "$T_DIR/src.sha") || exit 1; done ) & pids+=($!)
done
# a directory changing while it is listed: the names that never change
# must be seen exactly once by every listing
mkdir "$MNT/churn" && (cd "$MNT/churn" && seq -f 'stable%g' 1 300 | xargs touch)
( for k in $(seq 1 $churns); do for i in $(seq 1 20); do : >"$MNT/churn/tmp$k.$i"; done; rm -f "$MNT/churn/tmp$k."*; done ) & churn=$!
lister_ok=1
for k in $(seq 1 20); do
    n=$(ls -f "$MNT/churn" | grep -c '^stable')
    d=$(ls -f "$MNT/churn" | grep '^stable' | sort | uniq -d | wc -l)
    if [ "$n" != 300 ] || [ "$d" != 0 ]; then lister_ok=0; say "listing saw $n stable names, $d duplicated"; fi
done
wait $churn || fail "churn"
[ $lister_ok = 1 ] || fail "readdir under concurrent change"

for p in "${pids[@]}"; do wait "$p" || fail "a parallel worker failed (pid $p)"; done

verify() {
    for w in 1 2 3 4; do
        cmp "$SRC/rand$w" "$MNT/w$w/r1" && cmp "$SRC/rand$w" "$MNT/w$w/r3" &&
            cmp "$SRC/text$w" "$MNT/w$w/r2" &&
            for k in 1 2 3; do cmp "$SRC/text$w" "$MNT/w$w/t$k" || exit 1; done || fail "writer $w data"
        cmp <(dd if="$MNT/shared" bs=1M skip=$(((w - 1) * mib)) count=$mib 2>/dev/null) "$SRC/rand$w" || fail "shared file range $w"
    done
    (cd "$MNT/ro" && sha256sum -c --quiet "$T_DIR/src.sha") || fail "seeded tree"
}
verify
sync
if [ "$GMTF_MEMFS" != 1 ]; then
    gmtf_umount
    fsck_clean
    gmtf_mount
    verify
fi
gmtf_umount
fsck_clean
say "PASS"
