"""One request and its replies, without I/O: what the trio and the blocking client share.

A client drives an `Exchange`. It takes the request's bytes (`request`, before any I/O,
so that our own oversized request is `RequestTooLarge`, never a reply the role spoiled),
connects, sends them, feeds what it reads to `receive` and asks `next_frame` until a frame
comes. The two drivers (`_client` over a trio stream, `_blocking` over a plain socket)
only say what happened to them in their own terms as one of the events below; `failure`
is the one table that turns an event into the call's failure, so both clients fail with
the same class and the same sentence:

| event                          | failure                                             |
|--------------------------------|-----------------------------------------------------|
| `Refused(error)` (the connect) | `Unreachable`: no such socket, refused, not allowed |
| `Broken(reason)`               | `CallBroken`: the connection broke (reset, EPIPE)   |
| `ClosedBetweenFrames()`        | `NoReply`: closed without a reply                   |
| `ClosedMidFrame(detail)`       | `CallBroken`: broke mid-frame                       |
| `Unreadable(error)`            | `BadReply`: a reply that cannot be read             |
| `TimedOut(seconds)`            | `CallTimedOut`: says what the role did not do, by   |
|                                | the phase: accept the connection, take the request, |
|                                | answer, send its next frame                         |

A frame of a `PROGRESS` kind (a long request's "still at it") is not the reply: both
clients hand it to the caller's `on_progress`, if any, and wait for the next frame, the
deadline counted again from it.

A full listen backlog is no event: the role is there, only busy, so both clients wait for
room (the trio one trying again with `Backoff`, the blocking one in the kernel) until the
deadline, which is then `TimedOut` in the phase "connect".
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar, assert_never

from ._calls import (
    BadReply,
    BadRequest,
    CallBroken,
    CallFailed,
    CallTimedOut,
    NoReply,
    RemoteError,
    RequestTooLarge,
    Unreachable,
)
from ._codec import (
    MAX_FRAME,
    FrameReader,
    FrameTooLarge,
    IncompleteFrame,
    PeerClosed,
    ProtocolError,
    encode_frame,
)
from ._messages import Error, ForgetProgress, Message
from ._text import lower_first

__all__ = [
    "PROGRESS",
    "Broken",
    "ClosedBetweenFrames",
    "ClosedMidFrame",
    "Event",
    "Exchange",
    "Phase",
    "Refused",
    "TimedOut",
    "Unreadable",
    "os_reason",
]

M = TypeVar("M", bound=Message)

PROGRESS: tuple[type[Message], ...] = (ForgetProgress,)
"""The kinds a role sends ahead of a long request's reply to say it is still at it."""

Phase = Literal["connect", "send", "reply", "next frame"]
"""Where an exchange is: connecting, sending the request, waiting for the reply, for more."""

_NOT_DONE: dict[Phase, str] = {
    "connect": "accept the connection",
    "send": "take the request",
    "reply": "answer",
    "next frame": "send its next frame",
}
"""What the role did not do in time, by the phase the deadline found the exchange in."""


@dataclass(frozen=True)
class Refused:
    """The connect failed: nothing listens at the path, or we may not connect to it."""

    error: OSError


@dataclass(frozen=True)
class Broken:
    """The connection broke under a send or a read (a reset, a broken pipe)."""

    reason: str


@dataclass(frozen=True)
class ClosedBetweenFrames:
    """The role closed the connection before the first byte of a frame."""


@dataclass(frozen=True)
class ClosedMidFrame:
    """The role closed the connection in the middle of a frame."""

    detail: str


@dataclass(frozen=True)
class Unreadable:
    """The role sent bytes that are not a frame (too large, not JSON, an unknown kind)."""

    error: ProtocolError


@dataclass(frozen=True)
class TimedOut:
    """The call's deadline of `seconds` passed (in the exchange's current phase)."""

    seconds: float


Event = Refused | Broken | ClosedBetweenFrames | ClosedMidFrame | Unreadable | TimedOut
"""What a driver saw go wrong, in its terms translated to ours."""


class Exchange:
    """One request to the socket at `path` and the frames that answer it, without I/O."""

    def __init__(self, path: Path, *, max_frame_bytes: int = MAX_FRAME) -> None:
        self.path = path
        self.phase: Phase = "connect"
        self._max_frame_bytes = max_frame_bytes
        self._frames = FrameReader(max_frame_bytes=max_frame_bytes)

    def request(self, message: Message) -> bytes:
        """`message` as the frame to send; call it before any I/O.

        Raises:
            RequestTooLarge: the frame would be over `max_frame_bytes`.
            BadRequest: `message` cannot be encoded (text that is not Unicode).
        """
        kind = message.__struct_config__.tag
        try:
            return encode_frame(message, max_frame_bytes=self._max_frame_bytes)
        except FrameTooLarge as exc:
            raise RequestTooLarge(self.path, str(kind), exc.size, exc.limit) from None
        except ProtocolError as exc:
            raise BadRequest(f"the {kind!r} request cannot be sent to {self.path}: {exc}") from None

    def connected(self) -> None:
        """The connection is made; the request goes out next."""
        self.phase = "send"

    def sent(self) -> None:
        """The request went out; its reply comes next."""
        self.phase = "reply"

    def wanted(self) -> int:
        """How many bytes to read next: no more than the frame under way needs."""
        return self._frames.wanted()

    def receive(self, data: bytes | bytearray) -> None:
        """What a read returned; `b""` says the role closed the connection."""
        self._frames.receive(data)

    def next_frame(self) -> Message | None:
        """The next frame from the role, or `None` while it needs more bytes.

        Raises:
            NoReply: the role closed the connection at a frame boundary.
            CallBroken: it closed the connection in the middle of a frame.
            BadReply: it sent bytes that are not a frame.
        """
        try:
            frame = self._frames.next_frame()
        except PeerClosed:
            raise self.failure(ClosedBetweenFrames()) from None
        except IncompleteFrame as exc:
            raise self.failure(ClosedMidFrame(str(exc))) from None
        except ProtocolError as exc:
            raise self.failure(Unreadable(exc)) from None
        if frame is not None:
            self.phase = "next frame"
        return frame

    def failure(self, event: Event) -> CallFailed:
        """The call's failure for `event`: the one table both clients fail by."""
        path = self.path
        match event:
            case Refused(error=error):
                return Unreachable(path, _refusal(error))
            case Broken(reason=reason):
                return CallBroken(f"the connection to {path} broke: {reason}")
            case ClosedBetweenFrames():
                return NoReply(f"{path} closed the connection without a reply")
            case ClosedMidFrame(detail=detail):
                return CallBroken(f"the connection to {path} broke mid-frame: {detail}")
            case Unreadable(error=error):
                return BadReply(f"{path} sent a reply that cannot be read: {error}")
            case TimedOut(seconds=seconds):
                not_done = _NOT_DONE[self.phase]
                return CallTimedOut(f"{path} did not {not_done} within {seconds:g} s", seconds)
            case _:
                assert_never(event)

    def expected(self, reply: Message, expect: type[M]) -> M:
        """`reply` when it is an `expect`; `RemoteError` for an error frame; else `BadReply`."""
        if isinstance(reply, Error):
            raise RemoteError(reply)
        if not isinstance(reply, expect):
            got = reply.__struct_config__.tag
            want = expect.__struct_config__.tag
            raise BadReply(f"expected a {want!r} reply from {self.path}, got {got!r}")
        return reply


def os_reason(error: OSError) -> str:
    """What went wrong in `error`, as words and without its class: `connection reset by peer`."""
    if error.strerror:
        return lower_first(error.strerror)
    if error.errno is not None and error.errno in errno.errorcode:
        return errno.errorcode[error.errno]
    return str(error) or type(error).__name__


def _refusal(error: OSError) -> str:
    """Why a connect was refused, said so that the owner can act on it."""
    if isinstance(error, FileNotFoundError):
        return "no such socket (is it running?)"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is it running?)"
    if isinstance(error, PermissionError):
        return (
            "permission denied (run as the owner's login; on a systemd install that login "
            "must be in the boxmaker-owner group: docs/install.md)"
        )
    return os_reason(error)
