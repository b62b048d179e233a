#!/usr/bin/env python3
"""check_abi.py HEADER MAP SHARED_LIB PC_FILE: the library's public surface.

- The shared library exports (nm -D --defined-only) exactly the functions
  the public header declares: nothing internal (stage functions, SIMD
  kernels, C++-mangled CUDA code), nothing declared and missing.
- The version script MAP lists exactly those functions.
- The pkg-config file holds no absolute path except through ${prefix}
  (no toolkit path of the build machine).
Exit 0 when all hold; 1 with the differences otherwise."""
import re
import subprocess
import sys


def header_functions(path):
    s = open(path).read()
    s = re.sub(r"/\*.*?\*/", "", s, flags=re.S)
    s = re.sub(r"//[^\n]*", "", s)
    return set(re.findall(r"\b(gmtf_\w+)\s*\(", s))


def map_functions(path):
    s = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    glob = s.split("global:", 1)[1].split("local:", 1)[0]
    return {n.strip() for n in glob.split(";") if n.strip()}


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in "TtWiDdBbRrVu" and not parts[2].startswith("GMTF_"):
            syms.add(parts[2].split("@")[0])
    return syms


def main():
    header, mapfile, lib, pc = sys.argv[1:5]
    want, listed, have = header_functions(header), map_functions(mapfile), exported(lib)
    bad = []
    if listed != want:
        bad.append("map vs header: only in map %s, only in header %s" %
                   (sorted(listed - want), sorted(want - listed)))
    extra, missing = have - want, want - have
    if extra:
        bad.append("exported but not in the header (%d): %s" % (len(extra), sorted(extra)[:20]))
    if missing:
        bad.append("declared but not exported: %s" % sorted(missing))
    for line in open(pc):
        if line.startswith(("prefix=", "#")):
            continue
        for tok in re.findall(r"(?:^|[\s=:])(-L|-I)?(/[^\s]+)", line):
            bad.append("absolute path in %s: %s" % (pc, line.strip()))
            break
    for b in bad:
        print(b)
    if not bad:
        print("%d functions exported, as gmtf_codec.h declares; %s has no absolute path" %
              (len(have), pc))
    return 1 if bad else 0


sys.exit(main())
