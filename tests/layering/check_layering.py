#!/usr/bin/env python3
"""Checks that the object files of a folder call each other one way.

Usage: check_layering.py NAME README INPUT...
INPUT: an object file, a static library (its members), or a folder (its
*.o files, as meson keeps a target's objects in BUILD/DIR/TARGET.p/);
a glob pattern stands for what it matches.

Builds the call graph of the objects from their symbols (nm: an object
that leaves symbol S undefined calls the object that defines S), then
fails (exit 1) on
  - any cycle among the objects (strongly connected components of more
    than one object), and
  - any call against the floor order, when README holds one: a fenced
    block opened by ```floors, one floor per line from the top down,
    each floor naming its files without .c (several on a line share a
    floor). A file may call files of its own floor or of any floor
    below; calls within a floor must still be acyclic.
Every object must appear in the floors when the block exists, and every
name in the floors must be an object (so the list cannot go stale).
Prints the graph, one line per object, top floor first.
"""
import glob
import os
import re
import subprocess
import sys


def symbols(path):
    """{object name: (defined, undefined)} for an object or an archive."""
    out = subprocess.run(["nm", "-P", "-A", path], check=True, capture_output=True,
                         text=True).stdout
    objs = {}
    for line in out.splitlines():
        head, _, rest = line.partition(": ")
        parts = rest.split()
        if len(parts) < 2:
            continue
        m = re.match(r".*\[(.*)\]$", head)
        name = obj_name(m.group(1) if m else head)
        defined, undefined = objs.setdefault(name, (set(), set()))
        sym, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(sym)
        elif kind in "TDBRVWGSC":
            defined.add(sym)
    return objs


def inputs(args):
    for pattern in args:
        for a in sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]:
            yield from expand(a)


def expand(a):
    if os.path.isdir(a):
        yield from sorted(os.path.join(a, f) for f in os.listdir(a) if f.endswith(".o"))
    else:
        yield a


def obj_name(path):
    base = os.path.basename(path)
    base = re.sub(r"\.o(bj)?$", "", base)
    return re.sub(r"\.(c|cu|cpp)$", "", base)


def read_floors(readme):
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"^```floors\n(.*?)^```", text, re.M | re.S)
    if not m:
        return None
    floors = []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            floors.append(line.split())
    return floors


def sccs(nodes, edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    name, readme = sys.argv[1], sys.argv[2]
    defs, undefs = {}, {}
    for path in inputs(sys.argv[3:]):
        for n, (d, u) in symbols(path).items():
            defs[n], undefs[n] = d, u
    if not defs:
        print(f"{name}: no objects found in {' '.join(sys.argv[3:])}")
        return 1
    owner = {}
    for n, ds in defs.items():
        for s in ds:
            owner.setdefault(s, n)
    edges = {n: set() for n in defs}
    why = {}
    for n, us in undefs.items():
        for s in us:
            t = owner.get(s)
            if t and t != n:
                edges[n].add(t)
                why.setdefault((n, t), s)
    bad = 0
    floors = read_floors(readme)
    level = {}
    if floors is not None:
        for i, fl in enumerate(floors):
            for f in fl:
                level[f] = i
        for n in sorted(defs):
            if n not in level:
                print(f"{name}: {n}.o is not in the floors of {readme}")
                bad += 1
        for f in sorted(level):
            if f not in defs:
                print(f"{name}: floor entry '{f}' of {readme} names no object")
                bad += 1
    order = sorted(defs, key=lambda n: (level.get(n, 1 << 30), n))
    for n in order:
        print(f"  {n} -> {' '.join(sorted(edges[n], key=lambda t: (level.get(t, 1 << 30), t))) or '-'}")
    for comp in sccs(defs, edges):
        if len(comp) > 1:
            cyc = [f"{a}->{b} ({why[(a, b)]})" for a in comp for b in sorted(edges[a]) if b in comp]
            print(f"{name}: cycle among {', '.join(comp)}: {'; '.join(cyc)}")
            bad += 1
    if floors is not None:
        for n in order:
            for t in sorted(edges[n]):
                if n in level and t in level and level[t] < level[n]:
                    print(f"{name}: {n} calls up into {t} ({why[(n, t)]}); "
                          f"floor {level[n]} may only call floors >= {level[n]}")
                    bad += 1
    print(f"{name}: {len(defs)} objects, {sum(len(e) for e in edges.values())} calls between "
          f"them, {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
