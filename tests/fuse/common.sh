# Shared by the FUSE integration tests (sourced, not run).
#
# Environment (meson test sets these; see tests/fuse/meson.build):
#   GMTF_DAEMON   the mount daemon to test (build/tools/gmtf, or the
#                 gmtf-memfs test double for the daemon's own layer)
#   GMTF_MEMFS    1 when GMTF_DAEMON is gmtf-memfs: no real image, nothing
#                 persists, mkfs/fsck cases skip
#   GMTF_BUILD_ROOT, GMTF_CORPUS  as for every suite
#   GMTF_KEEP_FAILED  a directory: the image of a failing case is copied there
#
# Exit codes: 0 pass, 1 fail, 77 skip (no /dev/fuse, mounting not
# permitted, or a tool this case needs is missing). Every mount made here
# is unmounted by the EXIT trap; temp dirs are removed.

set -u
T_NAME=$(basename "$0" .sh)
: "${GMTF_BUILD_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)/build}"
: "${GMTF_DAEMON:=$GMTF_BUILD_ROOT/tools/gmtf}"
: "${GMTF_MEMFS:=0}"
MKFS=${GMTF_MKFS:-$GMTF_BUILD_ROOT/tools/mkfs.gmtf}
FSCK=${GMTF_FSCK:-$GMTF_BUILD_ROOT/tools/fsck.gmtf}

say() { printf '%s: %s\n' "$T_NAME" "$*" >&2; }
skip() { say "SKIP: $*"; exit 77; }
fail() {
    say "FAIL: $*"
    if [ -n "${GMTF_KEEP_FAILED:-}" ] && [ -f "${IMG:-}" ]; then
        mkdir -p "$GMTF_KEEP_FAILED" && cp --sparse=always "$IMG" "$GMTF_KEEP_FAILED/$T_NAME.gmtf" &&
            say "image kept as $GMTF_KEEP_FAILED/$T_NAME.gmtf"
        for f in ${KEEP_ALSO:-}; do # evidence a case saved on the way
            [ -e "$f" ] && cp -a --sparse=always "$f" "$GMTF_KEEP_FAILED/" && say "kept $f"
        done
    fi
    if [ -n "${T_DIR:-}" ] && [ -s "$T_DIR/daemon.log" ]; then
        say "daemon log (last 20 lines):"
        tail -n 20 "$T_DIR/daemon.log" >&2
    fi
    exit 1
}
need() { for p in "$@"; do command -v "$p" >/dev/null 2>&1 || skip "$p not installed"; done; }

[ -c /dev/fuse ] || skip "/dev/fuse missing"
[ -x "$GMTF_DAEMON" ] || skip "daemon $GMTF_DAEMON not built"
if [ "$(id -u)" != 0 ] && ! command -v fusermount3 >/dev/null 2>&1; then
    skip "not root and no fusermount3: mounting not permitted"
fi

T_DIR=$(mktemp -d "${TMPDIR:-/tmp}/gmtf-$T_NAME.XXXXXX") || fail "mktemp"
chmod 755 "$T_DIR" # other users (ACL and permission cases) must reach $MNT
IMG=$T_DIR/image.gmtf
MNT=$T_DIR/mnt
mkdir -p "$MNT"
DPID=
MOUNTS=

is_mounted() { mountpoint -q "$1" 2>/dev/null; }

cleanup() {
    local rc=$?
    trap - EXIT
    cd /
    # a case's own background workers first (BG_PIDS): they must not go on
    # writing into the mount point once it is unmounted
    for p in ${BG_PIDS:-}; do kill -9 "$p" 2>/dev/null; done
    for m in $MOUNTS; do
        if is_mounted "$m"; then
            umount "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
        fi
    done
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        # give the daemon time to flush after the unmount, then insist
        for _ in $(seq 1 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$DPID" 2>/dev/null
    fi
    rm -rf "$T_DIR"
    exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

need_real() {
    [ "$GMTF_MEMFS" = 1 ] && skip "needs a real image (running on the memfs double)"
    [ -x "$MKFS" ] || skip "mkfs.gmtf not built ($MKFS)"
}

# make_image [mkfs args...]: a fresh image at $IMG.
make_image() {
    if [ "$GMTF_MEMFS" = 1 ]; then
        : >"$IMG"
        return 0
    fi
    [ -x "$MKFS" ] || skip "mkfs.gmtf not built ($MKFS)"
    timeout 600 "$MKFS" "$@" "$IMG" >"$T_DIR/mkfs.log" 2>&1 || {
        cat "$T_DIR/mkfs.log" >&2
        fail "mkfs.gmtf $* failed"
    }
}

# gmtf_mount [-o opts]...: mounts $IMG on $MNT in the foreground (as a
# background job, so the test knows the daemon's pid) and waits for it.
gmtf_mount() {
    "$GMTF_DAEMON" "$IMG" "$MNT" -f "$@" >>"$T_DIR/daemon.log" 2>&1 &
    DPID=$!
    MOUNTS="$MOUNTS $MNT"
    for _ in $(seq 1 200); do
        is_mounted "$MNT" && return 0
        if ! kill -0 "$DPID" 2>/dev/null; then
            wait "$DPID"
            local st=$?
            DPID=
            if grep -qiE 'permission denied|operation not permitted|fusermount' "$T_DIR/daemon.log"; then
                skip "mounting not permitted: $(tail -n 1 "$T_DIR/daemon.log")"
            fi
            fail "gmtf exited with status $st before mounting"
        fi
        sleep 0.1
    done
    fail "mount did not appear within 20 s"
}

# gmtf_umount: unmounts $MNT with gmtf -u (which returns once the image is
# stored and free) and waits for the daemon to exit; its exit status must
# be 0.
gmtf_umount() {
    is_mounted "$MNT" || fail "$MNT is not mounted (daemon died?)"
    "$GMTF_DAEMON" -u -q "$MNT" || fail "gmtf -u $MNT failed"
    [ -n "$DPID" ] || return 0
    local i
    for i in $(seq 1 1200); do
        kill -0 "$DPID" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$DPID" 2>/dev/null && fail "daemon still running 120 s after unmount"
    wait "$DPID"
    local st=$?
    DPID=
    [ "$st" = 0 ] || fail "daemon exited with status $st after unmount"
}

# fsck_clean: fsck.gmtf -n must find the (unmounted) image clean.
fsck_clean() {
    [ "$GMTF_MEMFS" = 1 ] && return 0
    [ -x "$FSCK" ] || { say "note: fsck.gmtf not built, not checked"; return 0; }
    timeout 600 "$FSCK" -n "$IMG" >"$T_DIR/fsck.log" 2>&1
    local st=$?
    if [ "$st" != 0 ]; then
        cat "$T_DIR/fsck.log" >&2
        fail "fsck.gmtf -n exited $st"
    fi
}

# same_tree A B: diff -r without following links; fifos and device nodes
# of the same type in both count as equal (their metadata is compared by
# tree_meta). Prints the first differences.
same_tree() {
    diff -r --no-dereference "$1" "$2" >"$T_DIR/diff.out" 2>&1
    grep -vE '^File .* is a (fifo|character special file|block special file|socket) while file .* is a \1$' \
        "$T_DIR/diff.out" >"$T_DIR/diff.real"
    [ -s "$T_DIR/diff.real" ] && { head -n 20 "$T_DIR/diff.real" >&2; return 1; }
    return 0
}

# tree_xattrs DIR: every xattr (ACLs included) of every entry, by path.
tree_xattrs() {
    (cd "$1" && find . -print0 | LC_ALL=C sort -z |
        xargs -0 getfattr -h -d -m - --absolute-names 2>/dev/null | grep -v '^$')
}

# tree_meta DIR: one sorted line per entry: type, mode, owner, size and
# mtime (ns), link target, link count, path. Directories show neither size
# nor link count (filesystem-specific); atime, ctime, inode numbers differ
# between copies by nature and are left out.
tree_meta() {
    (cd "$1" && find . \( -type d -printf 'd %m %U:%G - %T@ - - %p\n' \) -o \
        -printf '%y %m %U:%G %s %T@ %l %n %p\n' | LC_ALL=C sort -k8)
}
