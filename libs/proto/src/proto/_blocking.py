"""A blocking client for one request and its one reply, without trio.

bxctl's one-request commands (`memory show`, `recall`, `approvals list`, …) use it so
that they start without importing trio: a command that answers in milliseconds should not
spend a fifth of a second loading an event loop. The frames are the same (`_codec`), and so
are the failures (`_calls`). The deadline covers the whole call.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path
from typing import TypeVar

from ._calls import CallBroken, CallTimedOut, NoReply, bad_reply, expected, unreachable
from ._codec import (
    HEADER_BYTES,
    MAX_FRAME,
    FrameTooLarge,
    IncompleteFrame,
    ProtocolError,
    decode_body,
    encode_frame,
)
from ._messages import Message

__all__ = ["call_blocking"]

M = TypeVar("M", bound=Message)


def call_blocking(
    path: Path,
    request: Message,
    expect: type[M],
    *,
    deadline_s: float,
    max_frame_bytes: int = MAX_FRAME,
) -> M:
    """Send `request` to `path` and return its one reply, which must be an `expect`.

    Raises:
        CallFailed: as the trio client's `call`: `Unreachable`, `CallTimedOut` (no whole
            reply within `deadline_s`), `RemoteError`, `NoReply`, `CallBroken`, `BadReply`.
    """
    end = time.monotonic() + deadline_s
    with _connected(path, end, deadline_s) as sock:
        try:
            sock.sendall(encode_frame(request, max_frame_bytes=max_frame_bytes))
            header = _receive(sock, HEADER_BYTES, end, path, at_boundary=True)
            size = int.from_bytes(header, "big")
            if size > max_frame_bytes:
                raise FrameTooLarge(size, max_frame_bytes)
            reply = decode_body(_receive(sock, size, end, path))
        except TimeoutError:
            raise CallTimedOut(
                f"{path} did not answer within {deadline_s:g} s", deadline_s
            ) from None
        except IncompleteFrame as exc:
            raise CallBroken(f"the connection to {path} broke mid-frame: {exc}") from None
        except ProtocolError as exc:
            raise bad_reply(path, exc) from None
        except OSError as exc:
            raise CallBroken(f"the connection to {path} broke: {exc}") from None
    return expected(path, reply, expect)


def _connected(path: Path, end: float, deadline_s: float) -> socket.socket:
    """A connection to `path`, waiting while its listen backlog is full, until `end`.

    A Unix socket has no connect in progress: with the backlog full, a connect with a
    timeout (a non-blocking one underneath) fails at once with EAGAIN. So the connect
    is a blocking one, and the kernel waits for room for at most the send timeout
    (`SO_SNDTIMEO`), which is what is left of the deadline; then it says EAGAIN.

    Raises:
        Unreachable: nothing listens there.
        CallTimedOut: nothing accepted the connection before `end`.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    left = max(end - time.monotonic(), 0.001)
    seconds = int(left)
    sock.setsockopt(
        socket.SOL_SOCKET,
        socket.SO_SNDTIMEO,
        struct.pack("ll", seconds, int((left - seconds) * 1_000_000)),
    )
    try:
        sock.connect(os.fspath(path))
    except BlockingIOError:
        sock.close()
        raise _not_accepted(path, deadline_s) from None
    except OSError as exc:
        sock.close()
        raise unreachable(path, exc) from None
    sock.settimeout(max(end - time.monotonic(), 0.001))  # for the request's send
    return sock


def _not_accepted(path: Path, deadline_s: float) -> CallTimedOut:
    return CallTimedOut(f"{path} did not accept the connection within {deadline_s:g} s", deadline_s)


def _receive(
    sock: socket.socket, n: int, end: float, path: Path, *, at_boundary: bool = False
) -> bytes:
    buffer = bytearray()
    while len(buffer) < n:
        left = end - time.monotonic()
        if left <= 0:
            # settimeout(0) would make the socket non-blocking: a read then fails with
            # EAGAIN, which is the deadline, not a broken connection
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(n - len(buffer))
        if not chunk:
            if at_boundary and not buffer:
                raise NoReply(f"{path} closed the connection without a reply")
            raise IncompleteFrame(f"peer closed after {len(buffer)} of {n} bytes")
        buffer += chunk
    return bytes(buffer)
