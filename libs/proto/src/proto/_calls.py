"""What a call to a role can end in, shared by the trio client and the blocking one."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TypeVar

from ._codec import ProtocolError
from ._messages import Error, Message

__all__ = ["NoReply", "RemoteError", "Unreachable", "expected", "unreachable"]

M = TypeVar("M", bound=Message)


class Unreachable(Exception):
    """Nobody answers on a socket path: the role is not running, or the path is wrong."""

    code = "unreachable"

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot connect to {path}: {reason}")
        self.path = path
        self.reason = reason


class NoReply(ProtocolError):
    """The server closed the connection without a reply: it stopped, died, or gave up."""


class RemoteError(Exception):
    """The server answered with an `error` frame."""

    def __init__(self, error: Error) -> None:
        super().__init__(error.message)
        self.error = error

    @property
    def code(self) -> str:
        """The server's error code."""
        return self.error.code


def unreachable(path: Path, exc: OSError) -> Unreachable:
    """The `Unreachable` a failed connect to `path` is, with a reason the owner can act on."""
    if isinstance(exc, FileNotFoundError):
        return Unreachable(path, "no such socket (is it running?)")
    if isinstance(exc, ConnectionRefusedError):
        return Unreachable(path, "connection refused (is it running?)")
    if isinstance(exc, PermissionError):
        return Unreachable(path, "permission denied (run as the owner's user)")
    return Unreachable(path, exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc)))


def expected(path: Path, reply: Message, expect: type[M]) -> M:
    """`reply` when it is an `expect`; `RemoteError` for an error frame; else `ProtocolError`."""
    if isinstance(reply, Error):
        raise RemoteError(reply)
    if not isinstance(reply, expect):
        got = type(reply).__struct_config__.tag
        want = expect.__struct_config__.tag
        raise ProtocolError(f"expected a {want!r} reply from {path}, got {got!r}")
    return reply
