"""Which sseqd socket a pytest worker uses (the list, $SSEQ_SOCKET_DIR/gpu*.sock, the
order it fails over in), and how connecting to one failed: the classification and the
wording of the plugin's skip and error reasons (sseq.pytest_plugin uses them)."""

from __future__ import annotations

import errno
import glob
import grp
import os
import pwd
import re
import select
import stat
from typing import Optional

import pytest

import sseq
from sseq import _lib
from sseq.errors import Status
from sseq.session import Session


def __getattr__(name: str) -> str:
    # DEFAULT_SOCKET_DIR: where sseq-enable-gpus's socket units listen (sseqd@N.socket:
    # gpuN.sock), libsseq's SSEQ_SOCKET_DIR, asked of libsseq when first named, so that
    # importing this module does not load it (a description without a libsseq).
    if name == "DEFAULT_SOCKET_DIR":
        return _lib.default_socket_dir() or "libsseq's socket directory"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The group sseqd@.socket gives its sockets (SocketGroup=), when the socket's own
#: group cannot be read.
SOCKET_GROUP = "sseq"
# A connection that fails with these may succeed a moment later (a daemon starting).
_RETRYABLE = (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN)
# How a connection whose daemon went away fails every later call.
_GONE_ERRNOS = (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN, errno.ECONNABORTED,
                errno.ESHUTDOWN)


def split_sockets(spec: Optional[str]) -> list[str]:
    """The socket paths in a colon- or comma-separated list (empty entries dropped)."""
    if not spec:
        return []
    return [p for p in re.split(r"[:,]", spec) if p.strip()]


def socket_for_worker(worker_id: Optional[str], sockets: list[str]) -> Optional[str]:
    """The socket xdist worker ``gwN`` uses: ``sockets[N % len(sockets)]``; the first
    for a run without xdist; None (libsseq's default) when the list is empty."""
    if not sockets:
        return None
    return sockets[_worker_number(worker_id) % len(sockets)]


def _worker_number(worker_id: Optional[str]) -> int:
    m = re.fullmatch(r"gw(\d+)", worker_id or "")
    return int(m.group(1)) if m else 0


def discover_sockets(directory: Optional[str] = None) -> list[str]:
    """The sockets ``gpuN.sock`` in ``directory`` (default ``$SSEQ_SOCKET_DIR``, else
    libsseq's directory, ``/run/sseq``), in GPU order; those sseq-enable-gpus's units
    listen on; none without a libsseq to say where."""
    d = directory or os.environ.get("SSEQ_SOCKET_DIR") or _lib.default_socket_dir()
    if not d:
        return []
    found = []
    for path in glob.glob(os.path.join(glob.escape(d), "gpu*.sock")):
        m = re.fullmatch(r"gpu(\d+)\.sock", os.path.basename(path))
        try:
            is_sock = stat.S_ISSOCK(os.stat(path).st_mode)
        except OSError:
            is_sock = False
        if m and is_sock:
            found.append((int(m.group(1)), path))
    return [p for _, p in sorted(found)]


def _failover_order(worker_id: Optional[str], sockets: list[str]) -> list[Optional[str]]:
    """The preferred socket, then the others of the list after it, wrapping."""
    if not sockets:
        return [None]
    i = _worker_number(worker_id) % len(sockets)
    return sockets[i:] + sockets[:i]


def _socket_spec(config: pytest.Config) -> tuple[list[str], str]:
    """The sockets this process may use and where the list came from."""
    opt = config.getoption("sseq_socket")
    if opt:
        return split_sockets(opt), "--sseq-socket"
    for name in ("SSEQ_SOCKETS", "SSEQ_SOCKET"):
        if os.environ.get(name):
            return split_sockets(os.environ[name]), f"${name}"
    d = os.environ.get("SSEQ_SOCKET_DIR") or _lib.default_socket_dir()
    found = discover_sockets(d) if d else []
    if found:
        return found, f"found in {d}"
    return [], "libsseq's default"


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _permission_advice(path: str) -> str:
    """Why EACCES, and what to do: the socket's group, named from the socket itself."""
    try:
        st = os.stat(path)
    except OSError:
        return (f"permission denied on {path} (its directory is closed to you): join group "
                f"'{SOCKET_GROUP}' (sudo usermod -aG {SOCKET_GROUP} $USER, then log in again)")
    group = _group_name(st.st_gid)
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    mode = stat.S_IMODE(st.st_mode)
    text = f"permission denied on {path} (owner {owner}, group {group}, mode {mode:04o})"
    if mode & 0o060 != 0o060:
        return text + (f": its mode lets group {group} not read and write it (sseqd@.socket "
                       "sets SocketMode=0660); ask the machine's administrator")
    if st.st_gid in os.getgroups() or st.st_gid == os.getgid():
        return text + f": you are in group {group} and still may not open it"
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
        added = user in grp.getgrgid(st.st_gid).gr_mem
    except KeyError:
        added = False
    if added:
        return text + (f": you were added to group {group} after this login; log in again "
                       f"(or run under 'newgrp {group}')")
    return text + (f": join group '{group}' (sudo usermod -aG {group} $USER, then log in "
                   "again)")


def describe_connect_error(path: str, e: sseq.Error) -> str:
    """One line naming why connecting to ``path`` failed."""
    if e.errno == errno.EACCES:
        return _permission_advice(path)
    if e.errno is not None:
        return f"no sseqd answers at {path}: {e.name} ({os.strerror(e.errno)})"
    return f"sseqd at {path} refused the session: {e.name} ({e.message or e.description})"


def _library_message(e: OSError) -> str:
    # _lib's text says "NAME: NAME: reason" (its own prefix, then ctypes's): once is enough.
    text = e.strerror or str(e)
    text = re.sub(r"^libsseq not found \(set SSEQ_LIBRARY to the path of libsseq\.so\): ",
                  "", text)
    text = re.sub(r"(?:(?<=^)|(?<=; ))([^;:]+): \1: ", r"\1: ", text)
    where = "SSEQ_LIBRARY=" if os.environ.get("SSEQ_LIBRARY") else ""
    return (f"libsseq not found: tried {where}{text} (set SSEQ_LIBRARY to the path of "
            "libsseq.so)")


def _gone(e: BaseException) -> bool:
    """Whether a call failed because the daemon went away (closed or reset)."""
    return isinstance(e, sseq.Error) and (e.errno in _GONE_ERRNOS
                                          or e.status == Status.SHUTTING_DOWN)


def _peer_closed(session: Session) -> bool:
    """Whether the daemon closed this connection, learned without I/O on it."""
    try:
        fd = session.fileno()
    except (ValueError, sseq.Error):
        return True
    p = select.poll()
    p.register(fd, select.POLLIN | select.POLLRDHUP)
    return any(ev & (select.POLLHUP | select.POLLERR | select.POLLRDHUP | select.POLLNVAL)
               for _, ev in p.poll(0))
