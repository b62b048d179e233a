#!/usr/bin/env bash
# mkfs.gmtf on many files in one directory against the same files spread
# over several directories (issue #10: the name hash decides the first).
#
#   bench/run mkfs-dirs [FILES] [DIRS] [RUNS]     (defaults 40000 200 5)
#
# Makes FILES small files (names f0, f1, ...; a few bytes each) once in one
# directory and once in DIRS directories of FILES/DIRS each, under
# $TMPDIR (tmpfs when /dev/shm is used), then times `mkfs.gmtf -q -j1
# --from` on each tree RUNS times, alternating, and prints the medians and
# their ratio (one directory / DIRS directories). MKFS overrides the
# program (default BUILD/tools/mkfs.gmtf, passed by bench/run).
set -euo pipefail
files=${1:-40000} dirs=${2:-200} runs=${3:-5}
mkfs=${MKFS:?MKFS: the mkfs.gmtf to time}
work=$(mktemp -d "${TMPDIR:-/tmp}/gmtf-mkfs-dirs.XXXXXX")
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/one" "$work/many"
per=$(((files + dirs - 1) / dirs))
(
    cd "$work/one"
    for ((i = 0; i < files; i++)); do echo "file $i" >"f$i"; done
)
(
    cd "$work/many"
    for ((d = 0; d < dirs; d++)); do mkdir "d$d"; done
    for ((i = 0; i < files; i++)); do echo "file $i" >"d$((i / per))/f$i"; done
)

now() { date +%s.%N; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
: >"$work/t.one"
: >"$work/t.many"
for ((r = 0; r < runs; r++)); do
    for t in one many; do
        rm -f "$work/img"
        s=$(now)
        "$mkfs" -q -j1 --from "$work/$t" "$work/img"
        echo "$(now) - $s" | bc -l >>"$work/t.$t"
    done
done
one=$(median <"$work/t.one")
many=$(median <"$work/t.many")
printf 'mkfs.gmtf -j1 of %d files: one directory %.2f s, %d directories %.2f s (median of %d), ratio %.2f\n' \
    "$files" "$one" "$dirs" "$many" "$runs" "$(echo "$one / $many" | bc -l)"
