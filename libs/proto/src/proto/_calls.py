"""What a call to another role can end in: one small family, shared by both clients.

A boundary translates failures once (STYLE.md): trio turns the OSError zoo into
`BrokenResourceError` at its stream boundary, and httpx has one exception tree. Here every
way a call to a role can fail is a `CallFailed`, so a caller writes `except
proto.CallFailed` (or one of its kinds, where it acts differently on it) and never lists
`OSError`, `BrokenResourceError` or `TooSlowError` by hand:

```
CallFailed                 the call did not get its reply
├─ BadRequest              our own request cannot be sent (nothing was): not Unicode text
│   └─ RequestTooLarge     our own request is over the frame limit (`.size`, `.limit`)
├─ Unreachable             nobody answers on the socket (not running, wrong path)
├─ CallBroken              the connection broke during the call (reset, torn frame)
│   └─ NoReply             the role closed the connection without its reply
├─ BadReply                the reply was malformed, too large, or of another kind
├─ CallTimedOut            no reply (or, in a long call, no frame) within the deadline
└─ RemoteError             the role answered with an `error` frame (`.code`, `.error`)
```

Which failure each thing that can go wrong is, and its sentence, is decided in one place,
`_exchange`, for both clients.
"""

from __future__ import annotations

from pathlib import Path

from ._messages import Error

__all__ = [
    "BadReply",
    "BadRequest",
    "CallBroken",
    "CallFailed",
    "CallTimedOut",
    "NoReply",
    "RemoteError",
    "RequestTooLarge",
    "Unreachable",
]


class CallFailed(Exception):
    """A call to a role did not get its reply; `code` says how, the message says why."""

    code = "call-failed"


class BadRequest(CallFailed):
    """Our own request cannot be sent, so nothing was: the role was not asked at all."""

    code = "bad-request"


class RequestTooLarge(BadRequest):
    """Our own request is `size` bytes, over the `limit` a frame holds; nothing was sent."""

    code = "request-too-large"

    def __init__(self, path: Path, kind: str, size: int, limit: int) -> None:
        super().__init__(
            f"the {kind!r} request is {size:,} bytes, over the {_byte_size(limit)} a frame "
            f"holds: not sent to {path}"
        )
        self.path = path
        self.kind = kind
        self.size = size
        self.limit = limit


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


def _byte_size(n: int) -> str:
    """`n` bytes as a reader says it: `1 MiB`, `64 KiB`, `1,000 bytes`."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale:,} {unit}"
    return f"{n:,} bytes"
