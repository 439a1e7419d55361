"""What a call to another role can end in: one small family, shared by both clients.

A boundary translates failures once (STYLE.md): trio turns the OSError zoo into
`BrokenResourceError` at its stream boundary, and httpx has one exception tree. Here every
way a call to a role can fail is a `CallFailed`, so a caller writes `except
proto.CallFailed` (or one of its kinds, where it acts differently on it) and never lists
`OSError`, `BrokenResourceError` or `TooSlowError` by hand:

```
CallFailed                 the call did not get its reply
├─ Unreachable             nobody answers on the socket (not running, wrong path)
├─ CallBroken              the connection broke during the call (reset, torn frame)
│   └─ NoReply             the role closed the connection without its reply
├─ BadReply                the reply was malformed, too large, or of another kind
├─ CallTimedOut            no reply (or, in a long call, no frame) within the deadline
└─ RemoteError             the role answered with an `error` frame (`.code`, `.error`)
```
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TypeVar

from ._codec import ProtocolError
from ._messages import Error, Message

__all__ = [
    "BadReply",
    "CallBroken",
    "CallFailed",
    "CallTimedOut",
    "NoReply",
    "RemoteError",
    "Unreachable",
    "expected",
    "unreachable",
]

M = TypeVar("M", bound=Message)


class CallFailed(Exception):
    """A call to a role did not get its reply; `code` says how, the message says why."""

    code = "call-failed"


class Unreachable(CallFailed):
    """Nobody answers on a socket path: the role is not running, or the path is wrong."""

    code = "unreachable"

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot connect to {path}: {reason}")
        self.path = path
        self.reason = reason


class CallBroken(CallFailed):
    """The connection broke during the call: the role stopped, died, or reset it."""

    code = "broken"


class NoReply(CallBroken):
    """The role closed the connection without a reply: it stopped, died, or gave up."""

    code = "no-reply"


class BadReply(CallFailed):
    """The reply was not a frame of the kind expected (malformed, too large, another kind)."""

    code = "bad-reply"


class CallTimedOut(CallFailed):
    """The role did not answer within the call's deadline (`seconds`)."""

    code = "timeout"

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class RemoteError(CallFailed):
    """The role answered with an `error` frame."""

    def __init__(self, error: Error) -> None:
        super().__init__(error.message)
        self.error = error

    @property
    def code(self) -> str:  # type: ignore[override]
        """The role's error code."""
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


def bad_reply(path: Path, exc: ProtocolError) -> BadReply:
    """A frame from `path` that could not be read, as the call's failure."""
    return BadReply(f"{path} sent a reply that cannot be read: {exc}")


def expected(path: Path, reply: Message, expect: type[M]) -> M:
    """`reply` when it is an `expect`; `RemoteError` for an error frame; else `BadReply`."""
    if isinstance(reply, Error):
        raise RemoteError(reply)
    if not isinstance(reply, expect):
        got = type(reply).__struct_config__.tag
        want = expect.__struct_config__.tag
        raise BadReply(f"expected a {want!r} reply from {path}, got {got!r}")
    return reply
