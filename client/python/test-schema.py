#!/usr/bin/env python3
"""The Python package's tables against their sources and libsseq: sseq/_schema.py in the
tree (what pip and PYTHONPATH use) is what the build generated from proto/sseq.proto, its
Status is libsseq's enum sseq_error name for name and number with sseq_strerror()'s text
for each, its Stats is struct sseq_stats field for field, its argument type codes are
enum sseq_arg_type's and _lib's ARG_* one for each, its ctypes struct sseq_arg is
sseq.h's (every member at the C offset, of the C size and kind) and its value union has
the member the argument table names for each type, able to hold the type's range, and no
other, sseq.args' typed scalars are the table's (where numpy is found), and the
package's default socket and socket directory are what the library it loads says,
SSEQ_DEFAULT_SOCKET and SSEQ_SOCKET_DIR, spelled nowhere in its code.

Usage: test-schema.py GENERATED_SCHEMA_PY PACKAGE_DIR LIBSSEQ_SO SSEQ_H SSEQ_SOCKET_H
"""
import ast
import ctypes
import dataclasses
import glob
import importlib.util
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
# _lib names each type by hand (ARG_I32, ...): a row added to karg.h without it shows here.
lib_args = {n[4:]: getattr(_lib, n, None) for n in _lib.__all__ if n.startswith("ARG_")}
check(lib_args == _schema.ARG_TYPES, "_lib's exported ARG_* are not the table's: "
      f"{sorted(set(lib_args.items()) ^ set(_schema.ARG_TYPES.items()), key=str)}")
check(list(_schema.ARG_INFO) == list(_schema.ARG_TYPES) and
      all(a.code == _schema.ARG_TYPES[t] for t, a in _schema.ARG_INFO.items()),
      "_schema.ARG_INFO is not ARG_TYPES, code for code")

# struct sseq_arg as sseq.h declares it, laid out by ctypes (the platform's C rules), to
# compare with the package's hand-written mirror member by member.
C_TYPES = {f"{u}int{n}_t": getattr(ctypes, f"c_{u}int{n}") for u in ("", "u")
           for n in (8, 16, 32, 64)}
C_TYPES.update(float=ctypes.c_float, double=ctypes.c_double)


def c_fields(body, where):
    """ctypes _fields_ for the member declarations in body (nested struct/union kept)."""
    fields = []
    while body.strip():
        m = re.match(r"\s*(struct|union) \{", body)
        if m:
            depth, i = 1, m.end()
            while depth:
                depth += {"{": 1, "}": -1}.get(body[i], 0)
                i += 1
            inner, rest = body[m.end():i - 1], body[i:]
            name = re.match(r"\s*(\w+);", rest)
            base = ctypes.Structure if m.group(1) == "struct" else ctypes.Union
            cls = type(f"{where}_{name.group(1)}", (base,),
                       {"_fields_": c_fields(inner, f"{where}_{name.group(1)}")})
            fields.append((name.group(1), cls))
            body = rest[name.end():]
            continue
        m = re.match(r"\s*(const )?(enum \w+|\w+) (\*?)(\w+);", body)
        if not m:
            sys.exit(f"FAIL: cannot read {where}'s members at {body.strip()[:40]!r}")
        if m.group(3):
            t = ctypes.c_void_p
        elif m.group(2).startswith("enum "):
            t = ctypes.c_int  # as _lib assumes: gcc's and clang's enums on Linux
        elif m.group(2) in C_TYPES:
            t = C_TYPES[m.group(2)]
        else:
            sys.exit(f"FAIL: {where}.{m.group(4)}: no ctypes type known for {m.group(2)}")
        fields.append((m.group(4), t))
        body = body[m.end():]
    return fields


def kind(t):
    """A leaf member's kind and size: pointer, float, int or uint."""
    if t is ctypes.c_void_p or t is ctypes.c_char_p or issubclass(t, ctypes._Pointer):
        return "pointer", ctypes.sizeof(t)
    if t in (ctypes.c_float, ctypes.c_double):
        return "float", ctypes.sizeof(t)
    return ("int" if t(-1).value < 0 else "uint"), ctypes.sizeof(t)


def layout(cls, prefix="", base=0):
    """Each member of cls, nested ones by path: (path, offset, size, kind)."""
    out = [(prefix or cls.__name__, base, ctypes.sizeof(cls), ctypes.alignment(cls))]
    for name, t in cls._fields_:
        off = base + getattr(cls, name).offset
        if issubclass(t, (ctypes.Structure, ctypes.Union)):
            out += layout(t, f"{prefix}.{name}", off)
        else:
            out.append((f"{prefix}.{name}", off) + kind(t))
    return out


c_arg = re.search(r"struct sseq_arg \{(.*?)\n\};", header, re.S).group(1)
c_struct = type("struct_sseq_arg", (ctypes.Structure,),
                {"_fields_": c_fields(c_arg, "sseq_arg")})
have, want = layout(_lib.SseqArg)[1:], layout(c_struct)[1:]
check((ctypes.sizeof(_lib.SseqArg), ctypes.alignment(_lib.SseqArg)) ==
      (ctypes.sizeof(c_struct), ctypes.alignment(c_struct)),
      f"_lib.SseqArg is {ctypes.sizeof(_lib.SseqArg)} bytes, struct sseq_arg "
      f"{ctypes.sizeof(c_struct)}")
check(len(want) >= 12, f"found too few members of struct sseq_arg in {header_path}: {want}")
check(have == want, "_lib.SseqArg is not sseq.h's struct sseq_arg (path, offset, size, "
      f"kind): {sorted(set(have) ^ set(want))}")

# Each type's carrying member (karg.h's wide column) in the ctypes union, able to hold
# its range; a type carried in its own member is that member's exact type. Every member
# carries some type: the union is the wide column, no more.
members = dict(_lib._ArgValue._fields_)
wide = {a.wide for a in _schema.ARG_INFO.values()}
check(set(members) == wide, f"_lib._ArgValue's members {list(members)} are not karg.h's "
      f"wide column {sorted(wide)}")
for t, a in _schema.ARG_INFO.items():
    m = members.get(a.wide)
    check(m is not None, f"{t}: no member {a.wide!r} in _lib._ArgValue")
    if m is None or a.lo is None:
        continue
    k, size = kind(m)
    lo, hi = (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if k == "int" else \
        (0, (1 << (8 * size)) - 1)
    check(k in ("int", "uint") and lo <= a.lo and a.hi <= hi and
          (a.wide != a.name or (lo, hi) == (a.lo, a.hi)),
          f"{t}: _lib._ArgValue.{a.wide} ({k}, {size} bytes) does not carry "
          f"[{a.lo}, {a.hi}]")

# sseq.args needs numpy (the python suite's interpreter has it; this one may not).
if importlib.util.find_spec("numpy"):
    from sseq import args  # noqa: E402
    for t, a in _schema.ARG_INFO.items():
        if t in ("BUFFER", "BYTES"):
            continue
        cls = getattr(args, a.name, None)
        check(cls is not None and (cls.type_code, cls.type_name, cls.field) ==
              (a.code, a.name, a.wide), f"sseq.args.{a.name} is not the table's {a}")
        if cls is not None and issubclass(cls, args._Int):
            check((cls.lo, cls.hi) == (a.lo, a.hi),
                  f"sseq.args.{a.name}'s range [{cls.lo}, {cls.hi}] is not the table's "
                  f"[{a.lo}, {a.hi}]")
    args_checked = "sseq.args' scalars, "
else:
    args_checked = ""
    print("sseq.args not checked: no numpy for", sys.executable)

sock = open(socket_header_path).read()
d = re.search(r'#define SSEQ_SOCKET_DIR "([^"]+)"', sock).group(1)
check(_lib.default_socket() == d + "/gpu0.sock",
      f"the package's default socket {_lib.default_socket()!r} is not {d}/gpu0.sock")
check(_lib.default_socket_dir() == d,
      f"the package's socket directory {_lib.default_socket_dir()!r} is not {d}")
# The package asks libsseq where the sockets are: no code of it spells the directory
# (docstrings may say it).
for path in sorted(glob.glob(os.path.join(package_dir, "sseq", "*.py"))):
    tree = ast.parse(open(path).read(), path)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    for n in ast.walk(tree):
        check(not (isinstance(n, ast.Constant) and isinstance(n.value, str) and d in n.value
                   and id(n) not in docs),
              f"{path}:{getattr(n, 'lineno', '?')}: spells the socket directory {d!r}: "
              "ask libsseq (_lib.default_socket_dir())")

for f in failures:
    print("FAIL:", f)
if failures:
    sys.exit(1)
print(f"{len(codes)} statuses, {len(fields)} stats fields, struct sseq_arg's "
      f"{len(want)} members, {args_checked}the socket directory and default socket "
      f"({_lib.default_socket()}) agree with sseq.h, the argument table and libsseq")
