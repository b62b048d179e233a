#!/usr/bin/env python3
"""tar_compare.py [--no-xattrs] SOURCE.tar[.xz] COPY.tar: every member of SOURCE equals
COPY's (content, type, mode, owner, mtime, link target, hard-link groups,
xattrs); COPY may add only directories that SOURCE implies (parents it
never names) and the root. Prints the differences (at most 20) and exits 1
when there are any; prints the member count and exits 0 otherwise.

Names are compared as bytes, './' prefixes and trailing slashes dropped;
mtimes to the nanosecond where both archives hold them (pax), else to the
second; xattrs are the SCHILY.xattr records (GNU tar --xattrs, libarchive);
--no-xattrs leaves them out (a copy through a format without them)."""
import hashlib
import sys
import tarfile


def norm(name):
    while name.startswith("./"):
        name = name[2:]
    name = name.rstrip("/")
    return name if name not in ("", ".") else "."


def mtime_ns(m):
    v = m.pax_headers.get("mtime")
    if v is not None:
        whole, _, frac = v.partition(".")
        return int(whole) * 10**9 + int((frac + "000000000")[:9]), True
    return int(m.mtime) * 10**9, False


def xattrs(m):
    out = {}
    for k, v in m.pax_headers.items():
        if k.startswith("SCHILY.xattr."):
            out[k[len("SCHILY.xattr."):]] = v.encode("utf-8", "surrogateescape")
    return out


def load(path):
    members, first = {}, {}  # a hard link's name -> the name it links to
    with tarfile.open(path, "r:*", encoding="utf-8", errors="surrogateescape") as t:
        for m in t:
            name = norm(m.name)
            rec = {
                "type": m.type if m.type != tarfile.AREGTYPE else tarfile.REGTYPE,
                "mode": m.mode & 0o7777,
                "uid": m.uid,
                "gid": m.gid,
                "mtime": mtime_ns(m),
                "xattrs": xattrs(m),
            }
            if m.islnk():
                target = norm(m.linkname)
                rec["type"] = tarfile.REGTYPE
                rec["sha"] = members[target]["sha"] if target in members else None
                rec["size"] = members[target]["size"] if target in members else None
                first[name] = first.get(target, target)
            elif m.issym():
                rec["target"] = m.linkname.encode("utf-8", "surrogateescape")
            elif m.isreg():
                f = t.extractfile(m)
                h = hashlib.sha256()
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    h.update(b)
                rec["sha"] = h.hexdigest()
                rec["size"] = m.size
            elif m.ischr() or m.isblk():
                rec["dev"] = (m.devmajor, m.devminor)
            if m.isdir():
                rec.pop("xattrs")
                rec["xattrs"] = xattrs(m)
            members[name] = rec
    # hard-link groups as sets of names, whichever member carries the data
    sets = {}
    for name, root in first.items():
        sets.setdefault(root, {root}).add(name)
    link_sets = {}
    for group in sets.values():
        for n in group:
            link_sets[n] = frozenset(group)
    return members, link_sets


def main():
    args = sys.argv[1:]
    skip = set()
    if args and args[0] == "--no-xattrs":
        skip.add("xattrs")
        args = args[1:]
    if len(args) != 2:
        print("usage: tar_compare.py [--no-xattrs] SOURCE.tar COPY.tar", file=sys.stderr)
        return 2
    a, alinks = load(args[0])
    b, blinks = load(args[1])
    diffs = []
    for name, ra in a.items():
        rb = b.get(name)
        if rb is None:
            diffs.append("missing in the copy: %r" % name)
            continue
        for k in ra:
            if k in skip:
                continue
            va, vb = ra[k], rb.get(k)
            if k == "mtime":
                (na, fa), (nb, fb) = va, vb
                same = na == nb if fa and fb else na // 10**9 == nb // 10**9
            else:
                same = va == vb
            if not same and not (name == "." and k in ("mode", "uid", "gid", "mtime")):
                diffs.append("%r: %s %r != %r" % (name, k, va, vb))
        if alinks.get(name, frozenset([name])) != blinks.get(name, frozenset([name])):
            diffs.append("%r: hard links %r != %r" % (name, sorted(alinks.get(name, [])),
                                                     sorted(blinks.get(name, []))))
    implied = {"."}
    for name in a:
        parts = name.split("/")
        for i in range(1, len(parts)):
            implied.add("/".join(parts[:i]))
    for name, rb in b.items():
        if name not in a and not (name in implied and rb["type"] == tarfile.DIRTYPE):
            diffs.append("only in the copy: %r" % name)
    for d in diffs[:20]:
        print(d)
    if diffs:
        print("%d differences" % len(diffs))
        return 1
    print("%d members equal" % len(a))
    return 0


sys.exit(main())
