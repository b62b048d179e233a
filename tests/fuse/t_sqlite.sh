#!/bin/bash
# sqlite3 under load on the mount: rollback-journal and WAL databases,
# hundreds of fsync'ed transactions, big transactions, updates, deletes,
# VACUUM, two writers and a reader at once; PRAGMA integrity_check after
# each phase and after unmount and remount.
. "$(dirname "$0")/common.sh"
need sqlite3

make_image -b 64k # many blocks in a database file (each fsync re-encodes the blocks it touched: at the 4 MiB default this test took twice the CPU)
gmtf_mount

DB=$MNT/db
sq() { timeout 300 sqlite3 -bail -cmd '.timeout 20000' "$@"; }
integrity() { # DB
    local r
    r=$(sq "$1" 'PRAGMA integrity_check;') || fail "integrity_check on $1 did not run"
    [ "$r" = ok ] || fail "integrity_check on $1: $r"
}

load() { # DB MODE
    local db=$1 mode=$2
    sq "$db" "PRAGMA journal_mode=$mode; PRAGMA synchronous=FULL;
        CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, k TEXT, v BLOB);
        CREATE INDEX IF NOT EXISTS t_k ON t(k);" >/dev/null || fail "create ($mode)"
    # one fsync'ed transaction per row
    for i in $(seq 1 80); do
        echo "INSERT INTO t(k, v) VALUES ('k$i', randomblob(abs(random()) % 3000));"
    done | sq "$db" >/dev/null || fail "single-row inserts ($mode)"
    # one big transaction
    sq "$db" "BEGIN; WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 20000)
        INSERT INTO t(k, v) SELECT 'b' || x, randomblob(200) FROM c; COMMIT;" || fail "bulk insert ($mode)"
    sq "$db" "UPDATE t SET v = randomblob(500) WHERE id % 7 = 0;
        DELETE FROM t WHERE id % 5 = 0;" || fail "update/delete ($mode)"
    integrity "$db"
}

load "$DB.rollback" DELETE
load "$DB.wal" WAL
sq "$DB.rollback" 'VACUUM;' || fail "VACUUM"
integrity "$DB.rollback"

# two writers and a reader at once on the WAL database
w() { for i in $(seq 1 100); do echo "INSERT INTO t(k, v) VALUES ('$1$i', randomblob(100));"; done | sq "$DB.wal" >/dev/null; }
w wa & p1=$!
w wb & p2=$!
( for i in $(seq 1 35); do sq "$DB.wal" 'SELECT count(*) FROM t;' >/dev/null || exit 1; done ) & p3=$!
wait $p1 || fail "writer a"
wait $p2 || fail "writer b"
wait $p3 || fail "reader"
[ "$(sq "$DB.wal" "SELECT count(*) FROM t WHERE k LIKE 'wa%' OR k LIKE 'wb%';")" = 200 ] || fail "concurrent rows missing"
integrity "$DB.wal"
expect_rollback=$(sq "$DB.rollback" 'SELECT count(*), sum(length(v)) FROM t;')
expect_wal=$(sq "$DB.wal" 'PRAGMA wal_checkpoint(TRUNCATE); SELECT count(*), sum(length(v)) FROM t;' | tail -n 1)

if [ "$GMTF_MEMFS" != 1 ]; then
    gmtf_umount
    fsck_clean
    gmtf_mount
    integrity "$DB.rollback"
    integrity "$DB.wal"
    [ "$(sq "$DB.rollback" 'SELECT count(*), sum(length(v)) FROM t;')" = "$expect_rollback" ] || fail "rollback db changed across remount"
    [ "$(sq "$DB.wal" 'SELECT count(*), sum(length(v)) FROM t;')" = "$expect_wal" ] || fail "wal db changed across remount"
fi
gmtf_umount
fsck_clean
say "PASS"
