#!/bin/bash
# POSIX behaviour through the mount, one system call family at a time:
# files, directories, rename (plain, RENAME_NOREPLACE, RENAME_EXCHANGE),
# hard and symbolic links, device nodes and fifos, chmod/chown/utimens,
# truncate, fallocate (mode 0, punch hole), SEEK_DATA/SEEK_HOLE, unlinked
# open files, xattrs, POSIX ACLs enforced by the kernel, statfs.
. "$(dirname "$0")/common.sh"
need python3 setfattr getfattr setfacl getfacl setpriv

make_image
gmtf_mount -o allow_other
cd "$MNT" || fail "cd $MNT"

# ---- files and directories
printf 'hello\n' >a || fail "create a"
[ "$(cat a)" = hello ] || fail "read back a"
printf 'more\n' >>a
[ "$(wc -l <a)" = 2 ] || fail "append"
mkdir -p d1/d2/d3 || fail "mkdir -p"
[ "$(stat -c %h d1)" = 3 ] || fail "nlink of d1 with one subdir is $(stat -c %h d1)"
rmdir d1 2>/dev/null && fail "rmdir of a non-empty dir succeeded"
rmdir d1/d2/d3 d1/d2 || fail "rmdir"
[ "$(stat -c %h d1)" = 2 ] || fail "nlink of d1 after rmdir"
mkdir d1 2>/dev/null && fail "mkdir over an existing dir succeeded"
: >d1/f
rm d1/f && rmdir d1 || fail "rm + rmdir"
[ -e d1 ] && fail "d1 still there"

# long names: 255 bytes fine, 256 refused
n255=$(printf 'n%.0s' $(seq 1 255))
: >"$n255" || fail "create a 255-byte name"
( : >"${n255}x" ) 2>/dev/null && fail "a 256-byte name was accepted"
rm "$n255"

# ---- rename
echo one >r1; echo two >r2
mv r1 r3 && [ "$(cat r3)" = one ] && [ ! -e r1 ] || fail "plain rename"
mv -f r3 r2 && [ "$(cat r2)" = one ] || fail "rename over a file"
mkdir -p rd/sub && echo x >rd/sub/f
mv rd rd2 && [ "$(cat rd2/sub/f)" = x ] || fail "rename a directory"
mv rd2 rd2/sub/ 2>/dev/null && fail "moved a directory into itself"
echo a >xa; echo b >xb
python3 - <<'EOF' || fail "renameat2 flags"
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
def r2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) != 0:
        return ctypes.get_errno()
    return 0
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
assert r2("xa", "xb", RENAME_NOREPLACE) == errno.EEXIST, "NOREPLACE over existing"
assert r2("xa", "xc", RENAME_NOREPLACE) == 0, "NOREPLACE to a new name"
assert open("xc").read() == "a\n"
assert r2("xc", "xb", RENAME_EXCHANGE) == 0, "EXCHANGE"
assert open("xc").read() == "b\n" and open("xb").read() == "a\n", "EXCHANGE contents"
os.mkdir("xdir")
assert r2("xdir", "xb", RENAME_EXCHANGE) == 0, "EXCHANGE dir and file"
assert os.path.isdir("xb") and open("xdir").read() == "a\n"
assert r2("xc", "nonexistent", RENAME_EXCHANGE) == errno.ENOENT
EOF

# ---- links
echo data >l1
ln l1 l2 && [ "$(stat -c %h l1)" = 2 ] || fail "hard link count"
[ "$(stat -c %i l1)" = "$(stat -c %i l2)" ] || fail "hard link inode"
echo more >>l2; [ "$(cat l1)" = "$(printf 'data\nmore')" ] || fail "write through a link"
rm l1 && [ "$(stat -c %h l2)" = 1 ] || fail "nlink after unlink"
ln -s l2 s1 && [ "$(readlink s1)" = l2 ] && [ "$(cat s1)" = "$(cat l2)" ] || fail "symlink"
long=$(printf 'x%.0s' $(seq 1 3000))
ln -s "$long" s2 && [ "$(readlink s2)" = "$long" ] || fail "3000-byte symlink target"
mkdir hd; ln hd hd2 2>/dev/null && fail "hard link to a directory"

# ---- special files
mkfifo fifo && [ -p fifo ] || fail "mkfifo"
mknod cdev c 1 3 && [ -c cdev ] && [ "$(stat -c %t:%T cdev)" = 1:3 ] || fail "mknod c 1 3"
mknod bdev b 7 0 && [ -b bdev ] || fail "mknod b"

# ---- attributes
echo x >m
chmod 4751 m && [ "$(stat -c %a m)" = 4751 ] || fail "chmod 4751"
chown 1234:5678 m && [ "$(stat -c %u:%g m)" = 1234:5678 ] || fail "chown"
touch -h -d '2001-02-03 04:05:06.123456789' m && \
    [ "$(stat -c %y m)" = "2001-02-03 04:05:06.123456789 +0000" ] || \
    fail "utimens with ns: $(stat -c %y m)"
touch -a -d '1999-01-01 00:00:00' m
[ "$(stat -c %X m)" = "$(date -d '1999-01-01 00:00:00' +%s)" ] || fail "atime"
echo x >sx && chmod 4777 sx
setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo y >>sx' || fail "write as nobody"
[ "$(stat -c %a sx)" = 777 ] || fail "a write by another user kept setuid: mode $(stat -c %a sx)"

# ---- truncate, fallocate, holes
printf 'abcdefgh' >t
truncate -s 4 t && [ "$(cat t)" = abcd ] || fail "truncate down"
truncate -s 6 t && [ "$(od -An -c t | tr -d ' ')" = 'abcd\0\0' ] || fail "truncate up reads zeros"
fallocate -l 1M fa && [ "$(stat -c %s fa)" = 1048576 ] || fail "fallocate mode 0"
head -c 3M /dev/urandom >ph
cp ph ph.orig
fallocate -p -o 1048576 -l 1048576 ph || fail "punch hole"
[ "$(stat -c %s ph)" = 3145728 ] || fail "punch hole changed the size"
cmp -n 1048576 ph ph.orig || fail "punch hole damaged data before the hole"
cmp -i 2097152 ph ph.orig || fail "punch hole damaged data after the hole"
[ "$(dd if=ph bs=1M skip=1 count=1 2>/dev/null | tr -d '\0' | wc -c)" = 0 ] || fail "hole not zero"
truncate -s 64M sparse && printf 'end' | dd of=sparse bs=1 seek=$((48 << 20)) conv=notrunc 2>/dev/null
sync
python3 - <<'EOF' || fail "SEEK_DATA/SEEK_HOLE"
import os
fd = os.open("sparse", os.O_RDONLY)
size = os.fstat(fd).st_size
d = os.lseek(fd, 0, os.SEEK_DATA)
h = os.lseek(fd, 0, os.SEEK_HOLE)
assert 0 <= h <= size, (d, h)
assert d <= 48 << 20, d
try:
    os.lseek(fd, size, os.SEEK_DATA)
    raise SystemExit("SEEK_DATA at EOF did not fail")
except OSError as e:
    assert e.errno == 6, e  # ENXIO
os.lseek(fd, 48 << 20, os.SEEK_SET)
assert os.read(fd, 3) == b"end"
EOF
rm -f sparse ph ph.orig fa

# ---- an unlinked file stays readable while open
echo still-here >u
exec 9<u
rm u
[ "$(cat <&9)" = still-here ] || fail "read of an unlinked open file"
exec 9<&-

# ---- big file at a >4 GiB offset (the memfs double is not sparse)
if [ "$GMTF_MEMFS" != 1 ]; then
    printf 'tail' | dd of=big bs=1 seek=$((5 << 30)) 2>/dev/null || fail "write at 5 GiB"
    [ "$(stat -c %s big)" = $(((5 << 30) + 4)) ] || fail "size of a >4 GiB file"
    [ "$(dd if=big bs=1 skip=$((5 << 30)) count=4 2>/dev/null)" = tail ] || fail "read at 5 GiB"
    rm big
fi

# ---- shared writable mmap through the page cache
python3 - <<'EOF' || fail "shared writable mmap"
import mmap, os
n = 3 * 4096 + 100
fd = os.open("mm", os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, n)
m = mmap.mmap(fd, n, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:5] = b"hello"; m[8192:8197] = b"world"; m[n - 3:n] = b"end"
m.flush()
os.fsync(fd)
m2 = mmap.mmap(fd, n, mmap.MAP_SHARED, mmap.PROT_READ)
assert m2[8192:8197] == b"world"  # one page cache: the second map sees it
m.close(); m2.close(); os.close(fd)
d = open("mm", "rb").read()
assert len(d) == n and d[0:5] == b"hello" and d[8192:8197] == b"world" and d[-3:] == b"end", d[:8]
EOF

# ---- xattrs
echo x >xf
setfattr -n user.color -v blue xf && [ "$(getfattr --only-values -n user.color xf)" = blue ] || fail "user xattr"
setfattr -n trusted.t -v 1 xf && setfattr -n security.s -v 2 xf || fail "trusted/security xattr"
head -c 60000 /dev/urandom | base64 -w0 | head -c 60000 >"$T_DIR/bigval"
setfattr -n user.big -v "$(cat "$T_DIR/bigval")" xf || fail "60000-byte xattr value"
[ "$(getfattr --only-values -n user.big xf)" = "$(cat "$T_DIR/bigval")" ] || fail "big xattr read back"
getfattr -d -m - xf | grep -q 'user.color="blue"' || fail "listxattr"
setfattr -x user.color xf && ! getfattr -n user.color xf 2>/dev/null || fail "removexattr"
python3 - <<'EOF' || fail "xattr flags"
import os, errno
os.setxattr("xf", "user.c", b"1", os.XATTR_CREATE)
try:
    os.setxattr("xf", "user.c", b"2", os.XATTR_CREATE); raise SystemExit("CREATE over existing")
except OSError as e: assert e.errno == errno.EEXIST
try:
    os.setxattr("xf", "user.none", b"2", os.XATTR_REPLACE); raise SystemExit("REPLACE of missing")
except OSError as e: assert e.errno == errno.ENODATA
try:
    os.getxattr("xf", "user.none"); raise SystemExit("get of missing")
except OSError as e: assert e.errno == errno.ENODATA
EOF

# ---- POSIX ACLs: stored, reflected in the mode, enforced by the kernel (the policy is the
# library's, fs/acl.c: not in the memfs double)
if [ "$GMTF_MEMFS" != 1 ]; then
    mkdir acl && chmod 700 acl && echo secret >acl/f && chmod 600 acl/f
    setpriv --reuid=65534 --regid=65534 --clear-groups cat acl/f >/dev/null 2>&1 && fail "nobody read a 700 dir"
    setfacl -m u:65534:rx acl && setfacl -m u:65534:r acl/f || fail "setfacl"
    getfacl -cpn acl/f | grep -q '^user:65534:r--' || fail "getfacl shows the entry"
    [ "$(stat -c %A acl/f)" = "-rw-r-----+" ] || [ "$(stat -c %a acl/f)" = 640 ] || fail "mode after setfacl: $(stat -c %a acl/f)"
    [ "$(setpriv --reuid=65534 --regid=65534 --clear-groups cat acl/f)" = secret ] || fail "ACL did not grant read"
    setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo x >>acl/f' 2>/dev/null && fail "ACL granted write"
    setfacl -d -m u:65534:rwx acl && mkdir acl/sub && : >acl/sub/g
    getfacl -cpn acl/sub/g | grep -q '^user:65534:rwx' || fail "default ACL not inherited by a file"
    getfacl -cpnd acl/sub | grep -q '^user:65534:rwx' || fail "default ACL not inherited by a dir"
    chmod 600 acl/f && getfacl -cpn acl/f | grep -q '^mask::---' || fail "chmod did not update the ACL mask"
    setfacl -b acl/f && ! getfattr -n system.posix_acl_access acl/f 2>/dev/null || fail "setfacl -b"
fi
# umask applies when the parent has no default ACL
(umask 077; : >um) && [ "$(stat -c %a um)" = 600 ] || fail "umask 077 gave $(stat -c %a um)"
# setgid directories pass their group on
mkdir sg && chown 0:4321 sg && chmod 2775 sg && mkdir sg/in && : >sg/f
[ "$(stat -c %g sg/f)" = 4321 ] && [ "$(stat -c %g sg/in)" = 4321 ] || fail "setgid group inheritance"
[ "$(stat -c %a sg/in)" = 2755 ] || fail "setgid dir bit inheritance: $(stat -c %a sg/in)"

# ---- statfs
df -P . >/dev/null || fail "df"
[ "$(stat -f -c %l .)" = 255 ] || fail "f_namemax"

# ---- directory listing: every name once, with many entries
mkdir many && (cd many && seq 1 3000 | xargs touch) || fail "create 3000 files"
[ "$(ls many | wc -l)" = 3000 ] || fail "ls of 3000 entries: $(ls many | wc -l)"
[ "$(ls -f many | sort | uniq -d | wc -l)" = 0 ] || fail "duplicate names in a listing"
find many -type f | head -n 1500 | xargs rm
[ "$(ls many | wc -l)" = 1500 ] || fail "ls after deleting half"
rm -rf many

cd /
gmtf_umount
fsck_clean
say "PASS"
