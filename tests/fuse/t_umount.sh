#!/bin/bash
# gmtf -u MOUNTPOINT returns only once everything is stored and the image
# is free: right after it, fsck.gmtf -n opens the image (a daemon still
# storing holds its lock: fsck would say 'in use') and finds every byte
# written; the data was left in the write-back cache (no flusher, a large
# dirty limit), so the daemon had seconds of compressing to do after the
# kernel let go of the mount. Also: -u on what is not a gmtf mount fails.
. "$(dirname "$0")/common.sh"
need_real
need python3

make_image
gmtf_mount -o flush_interval=0,dirty_size=1G
# 64 MiB of text-like data: seconds of BWT at unmount
python3 - "$MNT/data" <<'PY'
import random, sys
r = random.Random(7)
words = [bytes(r.choice(b"etaoinshrdlucmfw") for _ in range(r.randint(1, 9))) for _ in range(4000)]
with open(sys.argv[1], "wb") as f:
    for _ in range(64):
        f.write(b" ".join(r.choice(words) for _ in range(210000))[: 1 << 20])
PY
size=$(stat -c %s "$MNT/data")
[ "$size" = $((64 << 20)) ] || fail "wrote $size bytes"
sum=$(sha256sum <"$MNT/data")
t0=$(date +%s.%N)
"$GMTF_DAEMON" -u "$MNT" 2>"$T_DIR/u.err" || { cat "$T_DIR/u.err" >&2; fail "gmtf -u failed"; }
say "gmtf -u took $(echo "$(date +%s.%N) - $t0" | bc -l | cut -c1-5) s"
is_mounted "$MNT" && fail "still mounted after gmtf -u"
"$FSCK" -n "$IMG" >"$T_DIR/fsck.log" 2>&1 || { cat "$T_DIR/fsck.log" >&2; fail "fsck.gmtf -n right after gmtf -u"; }
grep -q "$((64 << 20)) bytes in files" "$T_DIR/fsck.log" || { cat "$T_DIR/fsck.log" >&2; fail "not every byte stored"; }
# the daemon exits by itself, with status 0
for _ in $(seq 1 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$DPID" 2>/dev/null && fail "daemon still running 10 s after gmtf -u"
wait "$DPID" || fail "daemon exited with status $?"
DPID=
# the data as written
gmtf_mount -o ro
[ "$(sha256sum <"$MNT/data")" = "$sum" ] || fail "data differs after gmtf -u"
gmtf_umount
# errors: not a mount point, not a gmtf mount, no argument
"$GMTF_DAEMON" -u "$T_DIR" 2>"$T_DIR/err" && fail "-u on a plain directory succeeded"
grep -q "not a mount point" "$T_DIR/err" || fail "message: $(cat "$T_DIR/err")"
"$GMTF_DAEMON" -u / 2>"$T_DIR/err" && fail "-u / succeeded"
"$GMTF_DAEMON" -u 2>"$T_DIR/err" && fail "-u without a MOUNTPOINT succeeded"
say "PASS"
