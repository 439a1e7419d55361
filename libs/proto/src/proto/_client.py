"""The trio client: connect, send one request, read the reply frame or frames, close.

It drives an `Exchange` (`_exchange`), which decides what every failure is: this module
only says what trio told it (a refused connect, a `BrokenResourceError`, a cancel scope
that reached the deadline) as the exchange's events, so a caller never sees an
`OSError`, a `trio.BrokenResourceError` or a `trio.TooSlowError` from a call, and sees
the same failure as from the blocking client. A deadline is the caller's to choose and is
given as `deadline_s`, so that its expiry can be said as what it is (`CallTimedOut`,
naming the socket, the seconds and what the role did not do in them) rather than as a
`TooSlowError` from somewhere; an enclosing cancel scope still cancels a call as usual.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TypeVar

import trio

from ._backoff import Backoff
from ._calls import NoReply
from ._codec import MAX_FRAME
from ._exchange import PROGRESS, Broken, Exchange, Refused, TimedOut, os_reason
from ._messages import Message

BACKLOG_FIRST_WAIT_S = 0.002
"""How long a client first waits to connect again to a socket whose backlog is full."""
BACKLOG_LONGEST_WAIT_S = 0.05
"""The longest it waits between two tries (`Backoff`: each doubles the last, jittered)."""

__all__ = ["Conversation", "call", "open_call"]

M = TypeVar("M", bound=Message)


class Conversation:
    """One request's conversation: the frames the server sends back, in order."""

    def __init__(self, exchange: Exchange, stream: trio.abc.ReceiveStream) -> None:
        self._exchange = exchange
        self._stream = stream

    @property
    def path(self) -> Path:
        """The socket the request went to."""
        return self._exchange.path

    async def receive(self, *, deadline_s: float | None = None) -> Message:
        """The next frame from the server.

        Raises:
            NoReply: the server closed the connection at a frame boundary.
            CallFailed: any other failure (`CallTimedOut` after `deadline_s`).
        """
        with _within(self._exchange, deadline_s):
            return await _next_frame(self._exchange, self._stream)
        raise AssertionError("unreachable: _within raised")  # pragma: no cover

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[Message]:
        while True:
            try:
                yield await self.receive()
            except NoReply:
                return


@asynccontextmanager
async def open_call(
    path: Path,
    request: Message,
    *,
    deadline_s: float | None = None,
    max_frame_bytes: int = MAX_FRAME,
) -> AsyncIterator[Conversation]:
    """Connect to `path`, send `request`, and yield the conversation for its replies.

    `deadline_s` covers connecting and sending; each `receive` takes its own.
    """
    exchange = Exchange(path, max_frame_bytes=max_frame_bytes)
    frame = exchange.request(request)
    deadline = _deadline(deadline_s)
    with _within(exchange, deadline_s, deadline):
        stream = await _connect(exchange)
    async with stream:
        with _within(exchange, deadline_s, deadline):
            await stream.send_all(frame)
        exchange.sent()
        yield Conversation(exchange, stream)


async def call(
    path: Path,
    request: Message,
    expect: type[M],
    *,
    deadline_s: float | None = None,
    max_frame_bytes: int = MAX_FRAME,
    on_progress: Callable[[Message], Awaitable[None] | None] | None = None,
) -> M:
    """Send `request` to `path` and return its one reply, which must be an `expect`.

    `deadline_s` covers the whole call; a progress frame (`PROGRESS`) goes to
    `on_progress` and starts it again.

    Raises:
        CallFailed: the call got no `expect` reply; `RemoteError` for an `error` frame,
            `RequestTooLarge` (before anything is sent) for a request over the frame limit.
    """
    exchange = Exchange(path, max_frame_bytes=max_frame_bytes)
    frame = exchange.request(request)
    deadline = _deadline(deadline_s)
    with _within(exchange, deadline_s, deadline):
        stream = await _connect(exchange)
    async with stream:
        with _within(exchange, deadline_s, deadline):
            await stream.send_all(frame)
            exchange.sent()
        while True:
            with _within(exchange, deadline_s, deadline):
                reply = await _next_frame(exchange, stream)
            if not isinstance(reply, PROGRESS):
                return exchange.expected(reply, expect)
            told = None if on_progress is None else on_progress(reply)
            if told is not None:
                await told
            deadline = _deadline(deadline_s)


def _deadline(deadline_s: float | None) -> float:
    return math.inf if deadline_s is None else trio.current_time() + deadline_s


@contextmanager
def _within(
    exchange: Exchange, deadline_s: float | None, deadline: float | None = None
) -> Iterator[None]:
    """Run the body until `deadline` (by default `deadline_s` from now).

    What trio raises in it, and the deadline passing, become the exchange's failures.
    """
    with trio.move_on_at(_deadline(deadline_s) if deadline is None else deadline) as scope:
        try:
            yield
        except trio.BrokenResourceError as exc:
            raise exchange.failure(Broken(_broken_reason(exc))) from None
        except trio.ClosedResourceError:
            raise exchange.failure(Broken("the connection was already closed")) from None
    if scope.cancelled_caught:
        assert deadline_s is not None
        raise exchange.failure(TimedOut(deadline_s))


def _broken_reason(exc: trio.BrokenResourceError) -> str:
    # a socket stream's BrokenResourceError carries the OSError it stands for
    if isinstance(exc.__cause__, OSError):
        return os_reason(exc.__cause__)
    return str(exc) or "the other end is gone"


async def _next_frame(exchange: Exchange, stream: trio.abc.ReceiveStream) -> Message:
    while (frame := exchange.next_frame()) is None:
        exchange.receive(await stream.receive_some(exchange.wanted()))
    return frame


async def _connect(exchange: Exchange) -> trio.SocketStream:
    """A connection to the exchange's Unix socket, waiting while its listen backlog is full.

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
            sock.connect(os.fspath(exchange.path))
        except BlockingIOError:
            sock.close()
            await trio.sleep(backoff.next())
            continue
        except OSError as exc:
            sock.close()
            raise exchange.failure(Refused(exc)) from None
        exchange.connected()
        return trio.SocketStream(trio.socket.from_stdlib_socket(sock))
