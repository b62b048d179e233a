#!/bin/bash
# kill -9 of the daemon in the middle of a workload, three times over: each
# time fsck.gmtf -n must find the image clean, a -o ro mount must show the
# fsync'ed data without writing a byte, and a read-write mount must show
# every file, appended record and sqlite row acknowledged by fsync before
# the kill.
. "$(dirname "$0")/common.sh"
need_real
need python3 sha256sum

SRC_TREE=${GMTF_SRC_TREE:-/usr/include/linux}
LOG=$T_DIR/acked # what fsync acknowledged, written on the host only afterwards
: >"$LOG"

cat >"$T_DIR/writer.py" <<'PY'
import hashlib, os, sqlite3, sys
mnt, log, round_ = sys.argv[1], sys.argv[2], int(sys.argv[3])
lf = open(log, "a")
def ack(line):
    lf.write(line + "\n"); lf.flush(); os.fsync(lf.fileno())
dfd = os.open(mnt, os.O_RDONLY)
app = os.open(os.path.join(mnt, "append.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
db = sqlite3.connect(os.path.join(mnt, "db.sqlite"), isolation_level=None, timeout=30)
# EXTRA: FULL does not sync the directory after the rollback journal is
# unlinked, so under FULL the last commit may roll back after a crash (sqlite docs).
db.execute("PRAGMA synchronous=EXTRA")
db.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, r INT, v TEXT)")
i = 0
while True:
    i += 1
    name = "r%d-f%d" % (round_, i)
    data = (("%s " % name) * (1 + (i * 7919) % 20000)).encode()
    fd = os.open(os.path.join(mnt, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data); os.fsync(fd); os.close(fd)
    os.fsync(dfd)  # the name is durable too
    ack("file %s %s" % (name, hashlib.sha256(data).hexdigest()))
    rec = ("%s\n" % name).encode()
    os.write(app, rec); os.fdatasync(app)
    ack("append %s" % name)
    db.execute("INSERT INTO t(r, v) VALUES (?, ?)", (round_, name))
    # sqlite's commit ends by unlinking its journal and syncing the directory
    # (EXTRA), but when it cannot open the directory (ENOTCONN: the daemon was
    # just killed) it skips that sync and reports success (os_unix.c
    # unixDelete). Sync the directory ourselves, so that only a durable
    # commit is acknowledged (seen: journal unlinked, daemon killed, row acked).
    os.fsync(dfd)
    ack("row %s" % name)
PY

check_acked() { # [ro]: a hot sqlite journal cannot be rolled back read-only
    python3 - "$MNT" "$LOG" "${1:-rw}" <<'PY' || fail "data acknowledged by fsync is missing or wrong"
import hashlib, os, sqlite3, sys
mnt, log, mode = sys.argv[1], sys.argv[2], sys.argv[3]
files = appends = rows = 0
app = open(os.path.join(mnt, "append.log"), "rb").read().split(b"\n") if os.path.exists(os.path.join(mnt, "append.log")) else []
appset = set(app)
db = None
for line in open(log):
    kind, name, *rest = line.split()
    if kind == "file":
        with open(os.path.join(mnt, name), "rb") as f:
            h = hashlib.sha256(f.read()).hexdigest()
        assert h == rest[0], "file %s: content differs" % name
        files += 1
    elif kind == "append":
        assert name.encode() in appset, "append.log lacks %s" % name
        appends += 1
    elif kind == "row" and mode == "rw":
        if db is None:
            db = sqlite3.connect(os.path.join(mnt, "db.sqlite"))  # rolls a hot journal back
            have = set(r[0] for r in db.execute("SELECT v FROM t"))
        assert name in have, "sqlite lacks row %s" % name
        rows += 1
if db is not None:
    ok = db.execute("PRAGMA integrity_check").fetchone()[0]
    assert ok == "ok", "sqlite integrity_check: " + ok
print("checked %d files, %d appends, %d rows" % (files, appends, rows), file=sys.stderr)
PY
}

make_image
for round in 1 2 3; do
    gmtf_mount
    python3 "$T_DIR/writer.py" "$MNT" "$LOG" $round 2>/dev/null & wpid=$!
    cp -a "$SRC_TREE" "$MNT/noise$round" 2>/dev/null & cpid=$!
    BG_PIDS="$wpid $cpid"
    # Let the workload get going (a loaded machine may take seconds for the
    # first row), then kill at a point that differs from round to round.
    for _ in $(seq 1 600); do
        grep -q "^row r$round-" "$LOG" && break
        sleep 0.1
    done
    grep -q "^row r$round-" "$LOG" || fail "round $round: the workload acknowledged nothing in 60 s (daemon log: $(tail -n 3 "$T_DIR/daemon.log"))"
    sleep "$round.$((RANDOM % 10))"
    kill -9 "$DPID"
    wait "$DPID" 2>/dev/null
    DPID=
    wait $wpid 2>/dev/null; wait $cpid 2>/dev/null
    BG_PIDS=
    umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
    is_mounted "$MNT" && fail "dead mount still there"
    say "round $round: killed after $(grep -c '^row' "$LOG") acknowledged transactions in all"

    fsck_clean
    # the image as the kill left it, and the log of acknowledgements
    cp --sparse=always "$IMG" "$T_DIR/killed-r$round.gmtf"
    KEEP_ALSO="$T_DIR/killed-r$round.gmtf $LOG"
    sum0=$(sha256sum <"$IMG")
    gmtf_mount -o ro
    check_acked ro
    gmtf_umount
    [ "$(sha256sum <"$IMG")" = "$sum0" ] || fail "round $round: the ro mount (journal replay) wrote to the image"

    gmtf_mount
    check_acked
    rm -rf "$MNT/noise$round"
    gmtf_umount
    fsck_clean
done
say "PASS"
