"""sseq.Error: a libsseq failure with the daemon's status (or errno) and detail text."""

from __future__ import annotations

import errno as _errno
from typing import Optional

# Status and ERR_BASE are generated from the schema (proto/gen-tables.py).
from ._schema import ERR_BASE, Status

__all__ = ["Error", "Status", "ERR_BASE"]


def _is_daemon_code(code: int) -> bool:
    # SSEQ_IS_DAEMON_ERROR
    return -(ERR_BASE + 1000) < code <= -ERR_BASE


class Error(Exception):
    """A failure reported by libsseq or the daemon.

    Attributes:
        code: libsseq's negative return code (``-errno`` or ``-SSEQ_ERR_*``).
        name: the daemon status (``"UNKNOWN_HANDLE"``) or errno (``"ECONNREFUSED"``).
        number: the positive number behind ``name`` (``4002``, ``111``).
        status: the :class:`Status` for a daemon error, else None.
        errno: the errno for a system error, else None.
        description: libsseq's text for the code (``sseq_strerror``).
        message: the daemon's own detail (``sseq_last_error_message``), or libsseq's
            for a call it refused before sending; never an earlier request's. May be "".
        operation: what was being done ("alloc", "execute conv2d", ...).
        tag: the request's tag when the error came from a tagged request, else 0.
    """

    def __init__(self, code: int, description: str = "", message: str = "",
                 operation: str = "", tag: int = 0) -> None:
        self.code = code
        self.number = -code
        self.status: Optional[Status]
        self.errno: Optional[int]
        if _is_daemon_code(code):
            try:
                self.status = Status(-code)
                self.name = self.status.name
            except ValueError:
                self.status = None
                self.name = f"STATUS_{-code - ERR_BASE}"
            self.errno = None
        else:
            self.status = None
            self.errno = -code
            self.name = _errno.errorcode.get(-code, f"ERRNO_{-code}")
        self.description = description
        self.message = message
        self.operation = operation
        self.tag = tag
        super().__init__(str(self))

    def __str__(self) -> str:
        # The daemon's detail is the more specific; the name already says the kind.
        text = f"{self.name} ({self.number}): {self.message or self.description}"
        if self.operation:
            text = f"{self.operation}: {text}"
        return text

    def __reduce__(self):  # picklable, e.g. across xdist workers
        return (Error, (self.code, self.description, self.message, self.operation, self.tag))
