#!/bin/bash
# Benchmark: fsync'ed single-row sqlite3 transactions per second on a gmtf
# mount and on the host filesystem (where the image lives), same run.
#
#   bench/run sqlite [N]     (N transactions per run, default 1000; needs
#                             root or fusermount3, /dev/fuse, sqlite3)
#
# Each figure is the median of 3 runs; journal modes DELETE (sqlite's
# default) and WAL, synchronous=FULL. Acceptance (issue 3): >= 100 tx/s on
# the mount in DELETE mode. Exits 1 below that, 77 when FUSE is unusable.
: "${GMTF_BUILD_ROOT:=$(cd "$(dirname "$0")/.." && pwd)/build}"
. "$(dirname "$0")/../tests/fuse/common.sh"
need sqlite3 python3
N=${1:-${GMTF_BENCH_TX:-1000}}
RUNS=3

make_image
gmtf_mount
HOST=$T_DIR/host
mkdir -p "$HOST"

# tx_per_s DIR MODE: median over RUNS of N one-row transactions
tx_per_s() {
    local dir=$1 mode=$2 r rates=()
    for r in $(seq 1 $RUNS); do
        local db=$dir/bench-$mode-$r.db
        rm -f "$db" "$db-wal" "$db-shm" "$db-journal"
        sqlite3 "$db" "PRAGMA journal_mode=$mode; PRAGMA synchronous=FULL;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);" >/dev/null || fail "create $db"
        local sql=$T_DIR/tx.sql
        { echo "PRAGMA synchronous=FULL;"
          for i in $(seq 1 "$N"); do echo "INSERT INTO t(v) VALUES ('row $i $RANDOM');"; done; } >"$sql"
        local t0 t1
        t0=$(date +%s.%N)
        timeout 600 sqlite3 "$db" <"$sql" >/dev/null || fail "transactions on $db"
        t1=$(date +%s.%N)
        [ "$(sqlite3 "$db" 'SELECT count(*) FROM t;')" = "$N" ] || fail "row count on $db"
        rates+=("$(python3 -c "print('%.1f' % ($N / ($t1 - $t0)))")")
    done
    printf '%s\n' "${rates[@]}" | sort -g | sed -n "$(((RUNS + 1) / 2))p"
}

host_fs=$(findmnt -no FSTYPE -T "$HOST" 2>/dev/null || stat -f -c %T "$HOST")
declare -A R
for mode in DELETE WAL; do
    R[gmtf_$mode]=$(tx_per_s "$MNT" $mode)
    R[host_$mode]=$(tx_per_s "$HOST" $mode)
done
printf '%-28s %12s %12s\n' "sqlite3 tx/s (median of $RUNS)" "journal=DELETE" "journal=WAL"
printf '%-28s %12s %12s\n' "gmtf mount" "${R[gmtf_DELETE]}" "${R[gmtf_WAL]}"
printf '%-28s %12s %12s\n' "host ($host_fs)" "${R[host_DELETE]}" "${R[host_WAL]}"
gmtf_umount
fsck_clean
python3 -c "import sys; sys.exit(0 if float('${R[gmtf_DELETE]}') >= 100 else 1)" || fail "below 100 tx/s on the mount"
