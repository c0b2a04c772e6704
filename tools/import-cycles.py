#!/usr/bin/env python3
"""Import circles between the files of each crate (issue 33): which files use which, from the
paths in their code (`crate::a::b`, `super::x`, `self::y`, and `mod` declarations' children not
counted), and the strongly connected components with more than one file.

Usage: tools/import-cycles.py [crate-src-dir ...]   (default: every crate's src/ in the workspace)
Prints one line per circle (the files in it); exits 1 if there is any.
"""
import os
import re
import sys

ROOTS = ["engine/src", "adapters/kube/src", "perf/src", "perf/kube-sim/src", "loom-tests/src"]


def module_files(src):
    """Map a module path (tuple) to its file, for the crate rooted at src."""
    files = {}
    for dirpath, _, names in os.walk(src):
        for n in names:
            if not n.endswith(".rs"):
                continue
            path = os.path.join(dirpath, n)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                mod = ()
            elif rel[-1] == "mod":
                mod = tuple(rel[:-1])
            elif rel[0] == "bin":
                continue
            else:
                mod = tuple(rel)
            files[mod] = path
    return files


PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")
USE_GROUP = re.compile(r"\buse\s+(crate|super|self)::\{([^;]*)\};", re.S)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def resolve(files, base, segs):
    """The longest prefix of base+segs naming a module file."""
    full = list(base) + segs
    for k in range(len(full), -1, -1):
        if tuple(full[:k]) in files:
            return tuple(full[:k])
    return None


def edges(src):
    files = module_files(src)
    out = {m: set() for m in files}
    for mod, path in files.items():
        text = strip_comments(open(path).read())
        # `super` of a non-mod.rs file is its parent module; of mod.rs too (its own parent).
        here = mod
        # Test modules inside the file are part of it: `super::` there means the file itself.
        targets = []
        for m in USE_GROUP.finditer(text):
            kw, body = m.group(1), m.group(2)
            for item in re.split(r",", body):
                item = item.strip().split(" as ")[0]
                segs = [s for s in item.split("::") if s and s not in ("{", "}", "*", "self")]
                segs = [re.sub(r"[{} ]", "", s) for s in segs]
                targets.append((kw, [s for s in segs if s]))
        for m in PATH.finditer(text):
            kw = m.group(1)
            segs = [s for s in m.group(2).split("::") if s and s != "{"]
            targets.append((kw, segs))
        for kw, segs in targets:
            if kw == "crate":
                base = ()
            elif kw == "self":
                base = here
            else:
                base = here[:-1]
            t = resolve(files, base, segs)
            if t is not None and t != mod and not (len(t) < len(mod) and mod[: len(t)] == t and t == ()):
                out[mod].add(t)
    return files, out


def sccs(graph):
    index, low, stack, on, res = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
            res.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return res


def main():
    roots = sys.argv[1:] or [r for r in ROOTS if os.path.isdir(r)]
    found = 0
    for src in roots:
        files, graph = edges(src)
        # A parent module declaring its children (`mod x;`) is not an import; the crate root
        # is left out of circles (it only declares modules and re-exports).
        for comp in sccs(graph):
            comp = [c for c in comp]
            if len(comp) > 1:
                found += 1
                print(f"{src}: " + " ".join(sorted(os.path.relpath(files[c], src) for c in comp)))
    if not found:
        print("no import circles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
