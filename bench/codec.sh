#!/usr/bin/env bash
# The codec acceptance benchmarks of docs/benchmarks.md, in one run:
#  1. ratio: gmtfc -b 900k on each corpus file separately vs bzip2 -9, per file and totals;
#  2. speed: first 100 MiB of the Linux 6.1 tar, gmtfc -b 900k -j1 and -j2 vs bzip2 -9 / -d,
#     median of RUNS runs (default 5), MB/s = 10^6 bytes of uncompressed data per second.
# Usage: [RUNS=5] [PEERS=all] [CLOCK=cpu] [OTHER=GMTFC] bench/run codec [BUILD_DIR]
#   (or bench/codec.sh [BUILD_DIR]; default build-bench, configured if missing;
#   PEERS=all adds zstd -19 and xz -9; CLOCK=cpu times user + system CPU instead of wall
#   clock, for a shared machine; OTHER=path of another gmtfc binary, e.g. one built with
#   -Dc_args=-DGMTF_FRAME_VERSION=1, adds its column to the ratio tables and its row to the
#   speed table)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-bench}
runs=${RUNS:-5}
corpus=${GMTF_CORPUS:-../shared/corpus}
if [ ! -d "$build" ]; then meson setup "$build" -Dbuildtype=release >/dev/null; fi
ninja -C "$build" >/dev/null
gmtfc=$PWD/$build/tools/gmtfc
work=$(mktemp -d "${TMPDIR:-/tmp}/gmtf-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
echo "# gmtfc $($gmtfc --version 2>&1 | head -1); $(bzip2 --version 2>&1 </dev/null | head -1)"

if [ -d "$corpus" ]; then
    for set in calgary canterbury; do
        [ -d "$corpus/$set" ] || continue
        echo
        echo "## ratio: $set (each file separately; gmtfc -b 900k vs bzip2 -9)"
        printf '| %-14s | %10s | %10s | %10s | %8s |%s\n' file bytes gmtfc bzip2-9 gain \
            "${OTHER:+ $(printf '%10s |' other)}"
        printf '|%s|%s|%s|%s|%s|%s\n' ---------------- ------------ ------------ ------------ \
            ---------- "${OTHER:+------------|}"
        tg=0 tb=0 to=0 tx=0
        for f in "$corpus/$set"/*; do
            name=$(basename "$f")
            [ "$name" = SHA256SUMS ] && continue
            o=$(stat -c %s "$f")
            g=$("$gmtfc" -b 900k -c "$f" | wc -c)
            b=$(bzip2 -9 -c "$f" | wc -c)
            x=0
            [ -n "${OTHER:-}" ] && x=$("$OTHER" -b 900k -c "$f" | wc -c)
            tg=$((tg + g)) tb=$((tb + b)) to=$((to + o)) tx=$((tx + x))
            printf '| %-14s | %10d | %10d | %10d | %7.2f%% |%s\n' "$name" "$o" "$g" "$b" \
                "$(echo "100 * ($b - $g) / $b" | bc -l)" "${OTHER:+ $(printf '%10d |' "$x")}"
        done
        printf '| %-14s | %10d | %10d | %10d | %7.2f%% |%s\n' TOTAL "$to" "$tg" "$tb" \
            "$(echo "100 * ($tb - $tg) / $tb" | bc -l)" "${OTHER:+ $(printf '%10d |' "$tx")}"
    done
else
    echo "(no corpus at $corpus: ratio tables skipped)"
fi

src=/usr/src/linux-source-6.1.tar.xz
if [ ! -f "$src" ]; then
    echo "(no $src: speed table skipped; apt-get install linux-source-6.1)"
    exit 0
fi
{ xz -dc "$src" || true; } | head -c 100M >"$work/in" # xz stops on SIGPIPE
size=$(stat -c %s "$work/in")
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
timeit() { # cmd infile outfile -> seconds (median of $runs)
    for _ in $(seq "$runs"); do
        if [ "${CLOCK:-wall}" = cpu ]; then
            # shellcheck disable=SC2086
            /usr/bin/time -f "%U %S" -o "$work/time" sh -c "$1" <"$2" >"$3"
            awk '{print $1 + $2}' "$work/time"
        else
            local t0 t1
            t0=$(date +%s.%N)
            eval "$1" <"$2" >"$3"
            t1=$(date +%s.%N)
            echo "$t1 - $t0" | bc -l
        fi
    done | median
}
echo
echo "## speed: first 100 MiB of the Linux 6.1 tar, median of $runs runs (${CLOCK:-wall} clock; load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '| %-22s | %10s | %7s | %9s | %9s |\n' tool bytes ratio "enc MB/s" "dec MB/s"
printf '|%s|%s|%s|%s|%s|\n' ------------------------ ------------ --------- ----------- -----------
row() { # name enc-cmd dec-cmd
    local te td o
    te=$(timeit "$2" "$work/in" "$work/c")
    td=$(timeit "$3" "$work/c" "$work/d")
    cmp -s "$work/d" "$work/in" || { echo "$1: round trip FAILED" >&2; exit 1; }
    o=$(stat -c %s "$work/c")
    printf '| %-22s | %10d | %7.3f | %9.1f | %9.1f |\n' "$1" "$o" \
        "$(echo "$size / $o" | bc -l)" "$(echo "$size / $te / 1000000" | bc -l)" \
        "$(echo "$size / $td / 1000000" | bc -l)"
}
row "gmtfc -b 900k -j1" "$gmtfc -b 900k -j1 -c" "$gmtfc -d -j1 -c"
row "gmtfc -b 900k -j2" "$gmtfc -b 900k -j2 -c" "$gmtfc -d -j2 -c"
[ -n "${OTHER:-}" ] && row "other -b 900k -j1" "$OTHER -b 900k -j1 -c" "$OTHER -d -j1 -c"
row "bzip2 -9" "bzip2 -9 -c" "bzip2 -d -c"
command -v lbzip2 >/dev/null && row "lbzip2 -9 -n2" "lbzip2 -9 -n2 -c" "lbzip2 -d -n2 -c"
if [ "${PEERS:-}" = all ]; then # slow: minutes per run
    command -v zstd >/dev/null && row "zstd -19 -T1" "zstd -19 -T1 -q -c" "zstd -d -q -c"
    command -v xz >/dev/null && row "xz -9 -T1" "xz -9 -T1 -c" "xz -d -c"
fi
