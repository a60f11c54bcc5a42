#!/usr/bin/env python3
"""Reads bench/prof-preload.c's samples and says where the thread's CPU time went: the
leaf functions (self time; a system call shows as its libc wrapper), the functions on
the stack (inclusive time), and for the samples whose leaf is in libc, the program's own
function that called into it. Frames the sampler could not name are named here with
addr2line -f against BUILD's binaries (the same build that ran). Only the samples taken
inside $PROF_WITHIN (default uv_run: the loop's turns, not start-up or shutdown) count.

Usage: prof-report.py SAMPLES BUILD_DIR [TOP]   (prints key=value-ish lines)
"""
import collections
import os
import subprocess
import sys


def find_objects(build):
    objs = {}
    for root, _, files in os.walk(build):
        for f in files:
            if f in ("sseqd",) or f.startswith("libsseq.so"):
                objs.setdefault(f, os.path.join(root, f))
    return objs


def main():
    path, build = sys.argv[1], sys.argv[2]
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    samples = []
    header = ""
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                header = line.strip("# \n")
                continue
            samples.append(line.split())
    objs = find_objects(build)
    # Name the frames dladdr could not, one addr2line call per object.
    unnamed = collections.defaultdict(set)
    for s in samples:
        for fr in s:
            obj, _, rest = fr.partition("+")
            if ":" not in rest and obj in objs:
                unnamed[obj].add(rest)
    names = {}
    for obj, offs in unnamed.items():
        offs = sorted(offs)
        r = subprocess.run(["addr2line", "-f", "-C", "-e", objs[obj], *offs],
                           capture_output=True, text=True)
        lines = r.stdout.splitlines()
        for i, off in enumerate(offs):
            fn = lines[2 * i] if 2 * i < len(lines) else "??"
            names[f"{obj}+{off}"] = f"{obj}:{fn}"

    def name(fr):
        obj, _, rest = fr.partition("+")
        if ":" in rest:
            return f"{obj}:{rest.split(':', 1)[1]}"
        return names.get(fr, fr)

    within = os.environ.get("PROF_WITHIN", "uv_run")
    total = len(samples)
    samples = [s for s in samples if not within or any(within in name(fr) for fr in s)]
    n = len(samples)
    leaf = collections.Counter()
    incl = collections.Counter()
    caller = collections.Counter()
    for s in samples:
        if not s:
            continue
        named = [name(fr) for fr in s]
        leaf[named[0]] += 1
        for fn in set(named):
            incl[fn] += 1
        if named[0].startswith(("libc", "libpthread", "?", "ld-linux")):
            own = next((x for x in named if not x.startswith(("libc", "libpthread", "?", "ld-linux", "libuv"))), "?")
            caller[f"{named[0]} <- {own}"] += 1
    print(f"prof {header} stacks={n} of={total} within={within}")
    for title, c in (("self", leaf), ("inclusive", incl), ("libc_leaf_from", caller)):
        for fn, k in c.most_common(top):
            print(f"prof {title} {100.0 * k / max(n, 1):5.1f}% {k} {fn}")


if __name__ == "__main__":
    main()
