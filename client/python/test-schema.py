#!/usr/bin/env python3
"""The Python package's tables against their sources and libsseq: sseq/_schema.py in the
tree (what pip and PYTHONPATH use) is what the build generated from proto/sseq.proto, its
Status is libsseq's enum sseq_error name for name and number with sseq_strerror()'s text
for each, its Stats is struct sseq_stats field for field, its argument type codes are
enum sseq_arg_type's, and the package's default socket is what the library it loads
says, SSEQ_DEFAULT_SOCKET.

Usage: test-schema.py GENERATED_SCHEMA_PY PACKAGE_DIR LIBSSEQ_SO SSEQ_H SSEQ_SOCKET_H
"""
import dataclasses
import os
import re
import subprocess
import sys
import types

generated, package_dir, lib, header_path, socket_header_path = sys.argv[1:6]

# An ASan-built libsseq loads only into a process that has the ASan runtime first.
ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
asan = re.search(r"(\S*libasan\.so\S*) => (\S+)", ldd)
if asan and "libasan" not in os.environ.get("LD_PRELOAD", ""):
    os.environ["LD_PRELOAD"] = asan.group(2) + ":" + os.environ.get("LD_PRELOAD", "")
    os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


in_tree = os.path.join(package_dir, "sseq", "_schema.py")
check(open(generated).read() == open(in_tree).read(),
      f"{in_tree} is out of date: copy the build's {generated} over it")

os.environ["SSEQ_LIBRARY"] = os.path.abspath(lib)
# The modules under test without the package's __init__, which needs numpy: a bare
# package over the same directory.
package = types.ModuleType("sseq")
package.__path__ = [os.path.join(package_dir, "sseq")]
sys.modules["sseq"] = package
from sseq import _lib, _schema, errors  # noqa: E402

header = re.sub(r"/\*.*?\*/", "", open(header_path).read(), flags=re.S)
enum = re.search(r"enum sseq_error \{(.*?)\};", header, re.S).group(1)
base = int(re.search(r"SSEQ_ERR_BASE = (\d+),", enum).group(1))
codes = {n: base + int(v) for n, v in re.findall(r"SSEQ_ERR_(\w+) = SSEQ_ERR_BASE \+ (\d+),", enum)}
check(len(codes) >= 19, f"found too few codes in {header_path}: {codes}")
check({s.name: int(s) for s in errors.Status} == codes,
      f"sseq.Status and sseq.h's enum sseq_error differ: "
      f"{sorted(set(s.name for s in errors.Status) ^ set(codes))}")
lib_c = _lib.lib()
for s in errors.Status:
    text = lib_c.sseq_strerror(-int(s)).decode()
    check(text == _schema.STATUS_TEXT[s],
          f"{s.name}: sseq_strerror says {text!r}, the schema {_schema.STATUS_TEXT[s]!r}")
    err = errors.Error(-int(s), text)
    check(err.status is s and err.name == s.name, f"sseq.Error({-int(s)}) is {err.name}")

stats = re.search(r"struct sseq_stats \{(.*?)\};", header, re.S).group(1)
fields = tuple(re.findall(r"uint64_t (\w+);", stats))
check(tuple(f.name for f in dataclasses.fields(_schema.Stats)) == fields,
      f"sseq.Stats is not struct sseq_stats: {fields}")
check([f for f, _ in _lib.SseqStats._fields_] == ["size", *fields],
      "_lib.SseqStats is not struct sseq_stats")

arg_enum = re.search(r"enum sseq_arg_type \{(.*?)\};", header, re.S).group(1)
arg_names = re.findall(r"SSEQ_ARG_(\w+)", arg_enum)
check(re.search(r"SSEQ_ARG_BUFFER = 1,", arg_enum) is not None, "SSEQ_ARG_BUFFER is not 1")
check(_schema.ARG_TYPES == {n: i + 1 for i, n in enumerate(arg_names)},
      f"the package's argument types {_schema.ARG_TYPES} are not sseq.h's {arg_names}")
check(all(getattr(_lib, "ARG_" + n) == v for n, v in _schema.ARG_TYPES.items()),
      "_lib.ARG_* are not the table's")

sock = open(socket_header_path).read()
d = re.search(r'#define SSEQ_SOCKET_DIR "([^"]+)"', sock).group(1)
check(_lib.default_socket() == d + "/gpu0.sock",
      f"the package's default socket {_lib.default_socket()!r} is not {d}/gpu0.sock")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"{len(codes)} statuses, {len(fields)} stats fields and the default socket "
      f"({_lib.default_socket()}) agree with sseq.h and libsseq")
