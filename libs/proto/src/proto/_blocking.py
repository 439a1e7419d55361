"""A blocking client for one request and its one reply, without trio.

bxctl's one-request commands (`memory show`, `recall`, `approvals list`, …) use it so
that they start without importing trio: a command that answers in milliseconds should not
spend a fifth of a second loading an event loop. It drives the same `Exchange` as the trio
client and only says what its socket raised as the exchange's events, so its failures are
the trio client's, class and sentence. The deadline covers the whole call.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ._codec import MAX_FRAME
from ._exchange import PROGRESS, Broken, Exchange, Refused, TimedOut, os_reason
from ._messages import Message

__all__ = ["call_blocking"]

M = TypeVar("M", bound=Message)


def call_blocking(
    path: Path,
    request: Message,
    expect: type[M],
    *,
    deadline_s: float | None = None,
    max_frame_bytes: int = MAX_FRAME,
    on_progress: Callable[[Message], None] | None = None,
) -> M:
    """Send `request` to `path` and return its one reply, which must be an `expect`.

    A progress frame (`PROGRESS`) goes to `on_progress`, and restarts the deadline.

    Raises:
        CallFailed: as the trio client's `call`, the same failure for the same cause.
    """
    exchange = Exchange(path, max_frame_bytes=max_frame_bytes)
    frame = exchange.request(request)
    clock = _Clock(deadline_s)
    with _connected(exchange, clock) as sock:
        try:
            sock.settimeout(clock.left())
            sock.sendall(frame)
            exchange.sent()
            while True:
                while (reply := exchange.next_frame()) is None:
                    sock.settimeout(clock.left())
                    exchange.receive(sock.recv(exchange.wanted()))
                if not isinstance(reply, PROGRESS):
                    break
                if on_progress is not None:
                    on_progress(reply)
                clock = _Clock(deadline_s)
        except OSError as exc:
            raise exchange.failure(clock.timed_out(exc) or Broken(os_reason(exc))) from None
    return exchange.expected(reply, expect)


class _Clock:
    """The time left of a call's deadline (`deadline_s`; `None`: no deadline)."""

    def __init__(self, deadline_s: float | None) -> None:
        self.deadline_s = deadline_s
        self._end = None if deadline_s is None else time.monotonic() + deadline_s

    def left(self) -> float | None:
        """Seconds left for the next step; `TimeoutError` when none are."""
        if self._end is None:
            return None
        left = self._end - time.monotonic()
        if left <= 0:
            # settimeout(0) would make the socket non-blocking: a read then fails with
            # EAGAIN, which is the deadline, not a broken connection
            raise TimeoutError
        return left

    def timed_out(self, exc: OSError) -> TimedOut | None:
        """The deadline, if that is what `exc` says.

        That is a socket's own timeout (it has no errno; a kernel's ETIMEDOUT is not
        ours), or EAGAIN from a connect given `SO_SNDTIMEO`.
        """
        if self.deadline_s is None:
            return None
        if isinstance(exc, TimeoutError) and exc.errno is None:
            return TimedOut(self.deadline_s)
        if isinstance(exc, BlockingIOError):
            return TimedOut(self.deadline_s)
        return None


def _connected(exchange: Exchange, clock: _Clock) -> socket.socket:
    """A connection to the exchange's socket, waiting while its listen backlog is full.

    A Unix socket has no connect in progress: with the backlog full, a connect with a
    timeout (a non-blocking one underneath) fails at once with EAGAIN. So the connect
    is a blocking one, and the kernel waits for room for at most the send timeout
    (`SO_SNDTIMEO`), which is what is left of the deadline; then it says EAGAIN.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        left = clock.left()
        if left is not None:
            seconds = int(left)
            microseconds = max(int((left - seconds) * 1_000_000), 1)
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, microseconds)
            )
        sock.connect(os.fspath(exchange.path))
    except OSError as exc:
        sock.close()
        raise exchange.failure(clock.timed_out(exc) or Refused(exc)) from None
    exchange.connected()
    return sock
