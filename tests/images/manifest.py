#!/usr/bin/env python3
"""manifest.py IMG DIR: the "entry" lines of image IMG for the tree at DIR,
in MANIFEST's format (see its header), on standard output.

One process walks the whole tree (the shell version spawned several
programs per path: minutes for the images' three mounts each). Paths in
byte order of their full names (as `find | sort -z` under LC_ALL=C), hard
links numbered in that order, extended attributes sorted by their
"name=0xHEX" line (as getfattr's output through sort)."""
import hashlib
import os
import stat
import sys


def entry(img, root, path, groups):
    st = os.lstat(path)
    rel = path[len(root):] or b"/"
    if any(c in rel for c in b" \t\n\r\v\f"):
        sys.exit("manifest: no spaces in names: %r" % rel)
    m = st.st_mode
    if stat.S_ISDIR(m):
        kind = "dir"
    elif stat.S_ISREG(m):
        kind = "file"
    elif stat.S_ISLNK(m):
        kind = "symlink"
    elif stat.S_ISFIFO(m):
        kind = "fifo"
    elif stat.S_ISSOCK(m):
        kind = "socket"
    elif stat.S_ISCHR(m):
        kind = "chr"
    elif stat.S_ISBLK(m):
        kind = "blk"
    else:
        sys.exit("manifest: %r: unexpected type" % path)
    ns = st.st_mtime_ns
    line = "entry %s %s %s mode=%04o uid=%d gid=%d mtime=%d.%09d" % (
        img, os.fsdecode(rel), kind, stat.S_IMODE(m), st.st_uid, st.st_gid,
        ns // 10**9, ns % 10**9)
    if kind == "file":
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        line += " size=%d sha256=%s nlink=%d" % (st.st_size, h.hexdigest(), st.st_nlink)
        if st.st_nlink > 1:
            k = groups.setdefault(st.st_ino, len(groups) + 1)
            line += " inode=%d" % k
    elif kind == "symlink":
        line += " target=" + os.readlink(path).hex()
    elif kind in ("chr", "blk"):
        line += " rdev=%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    xs = []
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        names = []
    for k in names:
        try:
            v = os.getxattr(path, k, follow_symlinks=False)
        except OSError:
            continue
        xs.append("%s=0x%s" % (k, v.hex()) if v else '%s=""' % k)
    for x in sorted(xs, key=lambda s: s.encode()):
        k, _, v = x.partition("=")
        v = "" if v == '""' else v[2:] if v.startswith("0x") else v
        line += " xattr.%s=%s" % (k, v)
    return line


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: manifest.py IMG DIR")
    img, root = sys.argv[1], os.fsencode(sys.argv[2])
    paths = [root]
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            paths.append(os.path.join(d, n))
    paths.sort()
    groups = {}
    out = [entry(img, root, p, groups) for p in paths]
    sys.stdout.write("".join(l + "\n" for l in out))


main()
