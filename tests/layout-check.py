"""The call graph of daemon/server, read from its C files (tests aside): which file's
functions call (or take the address of) which other file's exported functions. It
reports the largest circle of files that call one another (a strongly connected
component), the pairs of files that call each other both ways, and the exported
functions not named after their file (module.c's smodule_*, query-modules.c's query_*
count as named after it: PREFIXES).
Usage: layout-check.py [--dir DIR] [--max-circle N] [--max-pairs N] [--max-misnamed N]
       [--verbose]
Exit 0 with the measurements, 1 with the bound each one broke. The bounds (tests/meson.build)
stop the knot from growing back: calls go down from the loop (server.c) through input
(conn.c), dispatch (request.c) and the handlers to leaves (out.c, outcome.c, handles.c,
pause.c, session.c); a call back up (say out.c calling conn.c) closes a circle through
every file between. A lower file calls up only through a function pointer handed down to it
(a handle kind's release, the poll callback, the core's observer): the graph sees the file
that hands it over, not the call."""

import argparse
import os
import re
import sys
from collections import defaultdict

# Prefixes an export of a file may carry besides the file's own name ("query-modules.c":
# query_modules_ or query_): a file whose objects have a name of their own.
PREFIXES = {
    "module.c": ["smodule_"],
    "module-names.c": ["smodule_"],
    "staging.c": ["staging_"],
}

IDENT = re.compile(r"[A-Za-z_]\w*")


def strip(text):
    """text without comments, string and character literals, or preprocessor lines
    (their newlines kept)."""
    out = []
    i, n = 0, len(text)
    bol = True
    while i < n:
        c = text[i]
        if bol and c == "#":
            # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    i += 1
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        if c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        if c == "\n":
            bol = True
        elif not c.isspace():
            bol = False
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """[(name, is_static, body)] of the function definitions in stripped C text."""
    found = []
    depth = 0
    decl_start = 0
    i, n = 0, len(text)
    body_start = None
    head = None
    while i < n:
        c = text[i]
        if c == "{":
            if depth == 0:
                pre = text[decl_start:i].rstrip()
                head = None
                if pre.endswith(")"):
                    # the identifier before the parameter list's opening parenthesis
                    k, level = len(pre) - 1, 0
                    while k >= 0:
                        if pre[k] == ")":
                            level += 1
                        elif pre[k] == "(":
                            level -= 1
                            if level == 0:
                                break
                        k -= 1
                    m = re.search(r"([A-Za-z_]\w*)\s*$", pre[:k])
                    if m and "=" not in pre:
                        head = (m.group(1), re.search(r"\bstatic\b", pre) is not None)
                body_start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if head:
                    found.append((head[0], head[1], text[body_start : i + 1]))
                decl_start = i + 1
        elif c == ";" and depth == 0:
            decl_start = i + 1
        i += 1
    return found


def graph(folder):
    files = sorted(
        f for f in os.listdir(folder) if f.endswith(".c") and not f.startswith("test-")
    )
    defs = {}
    for f in files:
        with open(os.path.join(folder, f), encoding="utf-8") as fh:
            defs[f] = functions(strip(fh.read()))
    exported = {}
    for f in files:
        for name, static, _ in defs[f]:
            if not static:
                exported[name] = f
    edges = defaultdict(set)
    for f in files:
        local = {name for name, _, _ in defs[f]}
        for _, _, body in defs[f]:
            for ident in IDENT.findall(body):
                g = exported.get(ident)
                if g and g != f and ident not in local:
                    edges[f].add(g)
    return files, exported, edges


def sccs(nodes, edges):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def named_after(name, f):
    stem = f[:-2].replace("-", "_")
    prefixes = [stem + "_", stem.split("_")[0] + "_"] + PREFIXES.get(f, [])
    return any(name.startswith(p) for p in prefixes)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.path.join(root, "daemon", "server"))
    ap.add_argument("--max-circle", type=int)
    ap.add_argument("--max-pairs", type=int)
    ap.add_argument("--max-misnamed", type=int)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()

    files, exported, edges = graph(a.dir)
    comps = sccs(files, edges)
    largest = max(comps, key=len)
    pairs = sorted(
        (f, g) for f in files for g in edges.get(f, ()) if f < g and f in edges.get(g, ())
    )
    misnamed = sorted((f, n) for n, f in exported.items() if not named_after(n, f))

    print("files: %d, exported functions: %d" % (len(files), len(exported)))
    print("largest circle: %d files: %s" % (len(largest), " ".join(largest)))
    print("pairs calling each other: %d" % len(pairs))
    for f, g in pairs:
        print("  %s <-> %s" % (f, g))
    print("exports not named after their file: %d" % len(misnamed))
    if a.verbose:
        for f, n in misnamed:
            print("  %s: %s" % (f, n))
        for f in files:
            print("%s -> %s" % (f, " ".join(sorted(edges.get(f, ())))))

    bad = []
    if a.max_circle is not None and len(largest) > a.max_circle:
        bad.append("largest circle %d files, more than %d" % (len(largest), a.max_circle))
    if a.max_pairs is not None and len(pairs) > a.max_pairs:
        bad.append("%d pairs call each other, more than %d" % (len(pairs), a.max_pairs))
    if a.max_misnamed is not None and len(misnamed) > a.max_misnamed:
        bad.append("%d exports not named after their file, more than %d"
                   % (len(misnamed), a.max_misnamed))
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
