#!/usr/bin/env python3
"""check_layers.py ROOT [OBJECT ...] — the layering rule of docs/architecture.md ("Layering").

Fails, listing every violation, when
  - the `#include "..."` lines of src/ and tools/ make a cycle between directories;
  - they make a cycle between files: a unit is a .c/.cu file with its same-named header, and a source
    file that includes another unit's header uses that unit;
  - tools/ includes a file from tests/ (the shipped CLI must not depend on test code);
  - given the library's object files, their symbols make a cycle: object A uses a symbol that B defines
    and B (directly or through others) one that A defines (files that call each other).
"""
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".c", ".h", ".cu", ".cuh")


def scan(root):
    """Every source file of src/ and tools/ (paths relative to root) and its quoted includes."""
    files = {}
    for top in ("src", "tools"):
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(SOURCES):
                    p = os.path.relpath(os.path.join(d, n), root)
                    with open(os.path.join(root, p), encoding="utf-8", errors="replace") as f:
                        files[p] = INCLUDE.findall(f.read())
    return files


def resolve(root, src, inc):
    """The repository file an include names (its directory, then the include paths), or None."""
    for base in (os.path.dirname(src), "src", "include", "tests"):
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None  # generated (spv_ids.h) or a system header in quotes


def cycles(graph):
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = n[0]
        n[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def report(kind, comps, why):
    """Prints each cycle with the edges inside it; returns how many there were."""
    for comp in comps:
        print(f"FAIL: {kind} cycle: {' <-> '.join(comp)}")
        for a in comp:
            for b in comp:
                if b in why.get(a, {}):
                    print(f"    {a} -> {b}: {why[a][b]}")
    return len(comps)


def include_checks(root):
    files = scan(root)
    dirs, units, why_dir, why_unit, bad = {}, {}, {}, {}, 0
    for src, incs in sorted(files.items()):
        for inc in incs:
            tgt = resolve(root, src, inc)
            if tgt is None:
                continue
            if src.startswith("tools" + os.sep) and tgt.startswith("tests" + os.sep):
                print(f"FAIL: {src} includes {tgt}: the shipped tools must not include from tests/")
                bad += 1
            a, b = os.path.dirname(src), os.path.dirname(tgt)
            if a != b:
                dirs.setdefault(a, set()).add(b)
                why_dir.setdefault(a, {}).setdefault(b, f'{src} includes "{inc}"')
            if src.endswith((".c", ".cu")) and tgt.endswith((".h", ".cuh")):
                ua, ub = os.path.splitext(src)[0], os.path.splitext(tgt)[0]
                if ua != ub:
                    units.setdefault(ua, set()).add(ub)
                    why_unit.setdefault(ua, {}).setdefault(ub, f'{src} includes "{inc}"')
    bad += report("directory", cycles(dirs), why_dir)
    bad += report("file", cycles(units), why_unit)
    return bad, len(files)


def object_checks(objs):
    """Cycles of the symbol graph between object files (nm: defined and undefined globals)."""
    defs, uses = {}, {}
    prefix = os.path.commonpath(objs) if len(objs) > 1 else os.path.dirname(objs[0])
    names = {}
    for o in objs:
        name = os.path.relpath(o, prefix)  # e.g. asr/batch.c.o: the source's path under the target
        names[o] = name[: -len(".o")] if name.endswith(".o") else name
    # one nm for every object (-A: each line starts with its object's path and a colon)
    res = subprocess.run(["nm", "-g", "-A", *objs], capture_output=True, text=True, check=True)
    longest_first = sorted(objs, key=len, reverse=True)
    for line in res.stdout.splitlines():
        o, _, rest = line.partition(":")
        if o not in names:  # a path with a colon in it
            o = next((p for p in longest_first if line.startswith(p + ":")), None)
            if o is None:
                continue
            rest = line[len(o) + 1:]
        name, parts = names[o], rest.split()
        if len(parts) == 2 and parts[0] == "U":
            uses.setdefault(name, set()).add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDRBCVW":
            defs.setdefault(parts[2], name)
    graph, why = {}, {}
    for a, syms in uses.items():
        for s in sorted(syms):
            b = defs.get(s)
            if b and b != a:
                graph.setdefault(a, set()).add(b)
                why.setdefault(a, {}).setdefault(b, f"uses {s}")
    return report("object (call)", cycles(graph), why)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip())
        return 2
    root = argv[1]
    objs = [o for a in argv[2:] for o in a.split(";") if o]  # CMake passes $<TARGET_OBJECTS> as one list
    bad, n = include_checks(root)
    if objs:
        bad += object_checks(objs)
    print(f"{n} source files, {len(objs)} object files, {bad} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
