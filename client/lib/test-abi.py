#!/usr/bin/env python3
"""libsseq's exports, as the dynamic linker sees them (objdump -T), against their sources:
libsseq.syms (one version node per protocol minor), libsseq-compat.ld (LIBSSEQ_0) and
<sseq/sseq.h>. Every function the header declares is exported under the one node that
lists it, nothing else is exported, every function of 0.1.0 is there under LIBSSEQ_0 too
(what programs linked against 0.1.0 ask for), and the loader finds each by version.

Usage: test-abi.py LIBSSEQ_SO LIBSSEQ_SYMS LIBSSEQ_COMPAT_LD SSEQ_H SSEQ_PROTO
"""
import ctypes
import os
import re
import subprocess
import sys

lib, syms_path, compat_path, header_path, proto_path = sys.argv[1:6]

# What libsseq 0.1.0 exported, all under LIBSSEQ_0: these stay loadable for good.
RELEASE_0_1_0 = """
sseq_alloc sseq_await sseq_close sseq_connect sseq_copy_d2d sseq_copy_d2h sseq_copy_h2d
sseq_device_limits sseq_execute sseq_execute_function sseq_execute_function_attrs
sseq_flush sseq_free sseq_function_attributes sseq_get_fd sseq_get_info sseq_get_lane
sseq_get_lanes sseq_host_alloc sseq_host_free sseq_last_error_message sseq_last_error_tag
sseq_load_module sseq_module_functions sseq_module_global sseq_next_error sseq_outstanding
sseq_poll sseq_set_completion_callback sseq_set_lane sseq_slice sseq_stats sseq_strerror
sseq_sync sseq_wait
""".split()

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


# libsseq.syms: node -> the names it lists, in file order.
nodes = {}
for name, body in re.findall(r"([A-Za-z0-9_.]+)\s*\{(.*?)\}", strip_comments(open(syms_path).read()), re.S):
    body = body.split("local:")[0].replace("global:", "")
    nodes[name] = [s.strip() for s in body.split(";") if s.strip()]
check(list(nodes)[:1] == ["LIBSSEQ_0"] and nodes["LIBSSEQ_0"] == [],
      f"LIBSSEQ_0 first and empty (it holds the compat aliases alone): {nodes.get('LIBSSEQ_0')}")
listed = {}
for node, names in nodes.items():
    for n in names:
        check(n not in listed, f"{n} in {listed.get(n)} and {node}")
        listed[n] = node

# The version nodes are SSEQ_<major>.<minor> of the protocol, oldest first, none past the
# protocol this tree speaks.
proto = open(proto_path).read()
major = int(re.search(r"PROTOCOL_MAJOR = (\d+);", proto).group(1))
minor = int(re.search(r"PROTOCOL_MINOR = (\d+);", proto).group(1))
minors = []
for node in list(nodes)[1:]:
    m = re.fullmatch(r"SSEQ_(\d+)\.(\d+)", node)
    check(m is not None and int(m.group(1)) == major, f"node {node} is not SSEQ_{major}.<minor>")
    if m:
        minors.append(int(m.group(2)))
check(minors == sorted(set(minors)) and (not minors or minors[-1] <= minor),
      f"nodes out of order or past protocol 1.{minor}: {list(nodes)}")

# libsseq-compat.ld: exactly 0.1.0's functions, each as itself.
compat = re.findall(r'"(\w+)@LIBSSEQ_0"\s*=\s*(\w+)\s*;', strip_comments(open(compat_path).read()))
check(all(a == b for a, b in compat), f"a compat alias names another function: {compat}")
compat = sorted(a for a, _ in compat)
check(compat == sorted(RELEASE_0_1_0),
      f"libsseq-compat.ld is not 0.1.0's list: missing {sorted(set(RELEASE_0_1_0) - set(compat))}, "
      f"extra {sorted(set(compat) - set(RELEASE_0_1_0))}")
check(all(listed.get(n, "LIBSSEQ_0") != "LIBSSEQ_0" for n in RELEASE_0_1_0),
      "a function of 0.1.0 in no node of its own")

# The header's functions are the listed ones: every sseq_*( outside comments and macros,
# less the static inline helpers (SSEQ_I32() and friends) that are no symbols.
header = strip_comments(open(header_path).read()).replace("\\\n", " ")
header = "\n".join(l for l in header.splitlines() if not l.lstrip().startswith("#"))
inline = set(re.findall(r"static\s+inline\s[^;{(]*\b(sseq_\w+)\(", header))
declared = set(re.findall(r"\b(sseq_[a-z0-9_]*)\(", header)) - inline
check(len(declared) > 30, f"found too few functions in {header_path}: {sorted(declared)}")
check(declared == set(listed),
      f"sseq.h and libsseq.syms differ: not listed {sorted(declared - set(listed))}, "
      f"not declared {sorted(set(listed) - declared)}")

# What the library exports: defined dynamic symbols by (name, version), and addresses.
out = subprocess.run(["objdump", "-T", lib], check=True, capture_output=True, text=True).stdout
exported, address = set(), {}
for line in out.splitlines():
    f = line.split()
    if len(f) < 6 or not re.fullmatch(r"[0-9a-f]{8,16}", f[0]) or "*UND*" in f:
        continue
    name, version = f[-1], f[-2].strip("()")
    if name == version and "*ABS*" in f:  # the version definitions themselves
        continue
    exported.add((name, version))
    address[(name, version)] = int(f[0], 16)
expected = {(n, node) for n, node in listed.items()} | {(n, "LIBSSEQ_0") for n in compat}
check(exported == expected,
      f"exports differ from libsseq.syms + libsseq-compat.ld: unexpected {sorted(exported - expected)}, "
      f"missing {sorted(expected - exported)}")
for n in compat:
    a, b = address.get((n, "LIBSSEQ_0")), address.get((n, listed.get(n)))
    check(a is not None and a == b, f"{n}@LIBSSEQ_0 is not {n}@@{listed.get(n)}")

# The loader's view: a program linked against 0.1.0 asks for NAME@LIBSSEQ_0, one linked
# now for NAME@<its node>; both find the same function, and no other version does.
# An ASan-built libsseq loads only into a process that has the ASan runtime first: run
# again with it preloaded (as tests/python/run.sh does for the Python suite).
ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
asan = re.search(r"(\S*libasan\.so\S*) => (\S+)", ldd)
if asan and "libasan" not in os.environ.get("LD_PRELOAD", ""):
    os.environ["LD_PRELOAD"] = asan.group(2) + ":" + os.environ.get("LD_PRELOAD", "")
    os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    os.execv(sys.executable, [sys.executable] + sys.argv)
libdl = ctypes.CDLL(None)
libdl.dlvsym.restype = ctypes.c_void_p
libdl.dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
handle = ctypes.CDLL(lib)._handle
for n, node in listed.items():
    new = libdl.dlvsym(handle, n.encode(), node.encode())
    check(new is not None, f"dlvsym({n}, {node}) found nothing")
    if n in compat:
        old = libdl.dlvsym(handle, n.encode(), b"LIBSSEQ_0")
        check(old is not None and old == new, f"dlvsym({n}, LIBSSEQ_0) is not {n}@@{node}")
    else:
        check(libdl.dlvsym(handle, n.encode(), b"LIBSSEQ_0") is None,
              f"{n}, new since 0.1.0, found under LIBSSEQ_0")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"{len(listed)} functions in {len(nodes) - 1} nodes ({', '.join(list(nodes)[1:])}), "
      f"{len(compat)} of them also under LIBSSEQ_0; objdump -T and dlvsym agree")
