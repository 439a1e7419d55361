"""The client side: connect, send one request, read the reply frame or frames, close.

Every failure is one of `_calls`' family (`CallFailed`), translated here once: a caller
never sees an `OSError`, a `trio.BrokenResourceError` or a `trio.TooSlowError` from a
call. A deadline is the caller's to choose and is given as `deadline_s`, so that its
expiry can be said as what it is (`CallTimedOut`, naming the socket and the seconds)
rather than as a `TooSlowError` from somewhere; an enclosing cancel scope still
cancels a call as usual.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TypeVar

import trio

from ._backoff import Backoff
from ._calls import (
    BadReply,
    CallBroken,
    CallFailed,
    CallTimedOut,
    NoReply,
    RemoteError,
    Unreachable,
    bad_reply,
    expected,
    unreachable,
)
from ._codec import MAX_FRAME, IncompleteFrame, PeerClosed, ProtocolError, read_frame, write_frame
from ._messages import Message

BACKLOG_FIRST_WAIT_S = 0.002
"""How long a client first waits to connect again to a socket whose backlog is full."""
BACKLOG_LONGEST_WAIT_S = 0.05
"""The longest it waits between two tries (`Backoff`: each doubles the last, jittered)."""

__all__ = [
    "BadReply",
    "Call",
    "CallBroken",
    "CallFailed",
    "CallTimedOut",
    "NoReply",
    "RemoteError",
    "Unreachable",
    "call",
    "open_call",
]

M = TypeVar("M", bound=Message)


@contextmanager
def _translated(path: Path, deadline_s: float | None, what: str) -> Iterator[None]:
    """Run the body under `deadline_s` (if any); its stream failures become `CallFailed`."""
    with trio.move_on_after(deadline_s if deadline_s is not None else float("inf")) as scope:
        try:
            yield
        except IncompleteFrame as exc:
            raise CallBroken(f"the connection to {path} broke mid-frame: {exc}") from None
        except ProtocolError as exc:
            raise bad_reply(path, exc) from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            reason = str(exc) or type(exc).__name__
            raise CallBroken(f"the connection to {path} broke: {reason}") from None
    if scope.cancelled_caught:
        assert deadline_s is not None
        raise CallTimedOut(f"{path} did not {what} within {deadline_s:g} s", deadline_s)


class Call:
    """One request's conversation: the frames the server sends back, in order."""

    def __init__(self, path: Path, stream: trio.abc.ReceiveStream, max_frame_bytes: int) -> None:
        self.path = path
        self._stream = stream
        self._max_frame_bytes = max_frame_bytes

    async def receive(self, *, deadline_s: float | None = None) -> Message:
        """The next frame from the server.

        Raises:
            NoReply: the server closed the connection at a frame boundary.
            CallFailed: any other failure (`CallTimedOut` after `deadline_s`).
        """
        with _translated(self.path, deadline_s, "send its next frame"):
            try:
                return await read_frame(self._stream, max_frame_bytes=self._max_frame_bytes)
            except PeerClosed:
                raise NoReply(f"{self.path} closed the connection without a reply") from None
        raise AssertionError("unreachable: _translated raised")  # pragma: no cover

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[Message]:
        while True:
            try:
                yield await self.receive()
            except NoReply:
                return


async def _connect(path: Path, deadline_s: float | None) -> trio.SocketStream:
    with trio.move_on_after(deadline_s if deadline_s is not None else float("inf")) as scope:
        return await _open_unix(path)
    assert scope.cancelled_caught
    assert deadline_s is not None
    raise CallTimedOut(f"{path} did not accept the connection within {deadline_s:g} s", deadline_s)


async def _open_unix(path: Path) -> trio.SocketStream:
    """A connection to the Unix socket `path`, waiting while its listen backlog is full.

    A Unix socket has no connect in progress: with the backlog full, a non-blocking
    connect fails with EAGAIN. `trio.open_unix_socket` takes that for a connection made,
    and the first send then fails as if the server had dropped it; here the connect is
    tried again, ever less often, until the caller's deadline.
    """
    backoff = Backoff(BACKLOG_FIRST_WAIT_S, BACKLOG_LONGEST_WAIT_S)
    while True:
        await trio.lowlevel.checkpoint_if_cancelled()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            sock.connect(os.fspath(path))
        except BlockingIOError:
            sock.close()
            await trio.sleep(backoff.next())
            continue
        except OSError as exc:
            sock.close()
            raise unreachable(path, exc) from None
        return trio.SocketStream(trio.socket.from_stdlib_socket(sock))


@asynccontextmanager
async def open_call(
    path: Path,
    request: Message,
    *,
    deadline_s: float | None = None,
    max_frame_bytes: int = MAX_FRAME,
) -> AsyncIterator[Call]:
    """Connect to `path`, send `request`, and yield the conversation for its replies.

    `deadline_s` covers connecting and sending; each `receive` takes its own.
    """
    stream = await _connect(path, deadline_s)
    async with stream:
        with _translated(path, deadline_s, "take the request"):
            await write_frame(stream, request, max_frame_bytes=max_frame_bytes)
        yield Call(path, stream, max_frame_bytes)


async def call(
    path: Path,
    request: Message,
    expect: type[M],
    *,
    deadline_s: float | None = None,
    max_frame_bytes: int = MAX_FRAME,
) -> M:
    """Send `request` to `path` and return its one reply, which must be an `expect`.

    `deadline_s` covers the whole call.

    Raises:
        CallFailed: the call got no `expect` reply; `RemoteError` for an `error` frame.
    """
    with _translated(path, deadline_s, "answer"):
        async with open_call(path, request, max_frame_bytes=max_frame_bytes) as conversation:
            reply = await conversation.receive()
    return expected(path, reply, expect)
