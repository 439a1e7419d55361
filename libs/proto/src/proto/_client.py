"""The client side: connect, send one request, read the reply frame or frames, close.

No function here takes a timeout: the caller sets the deadline (`trio.fail_after`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import trio

from ._codec import MAX_FRAME, PeerClosed, ProtocolError, read_frame, write_frame
from ._messages import Error, Message

__all__ = ["Call", "NoReply", "RemoteError", "Unreachable", "call", "open_call"]

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


class Call:
    """One request's conversation: the frames the server sends back, in order."""

    def __init__(self, stream: trio.abc.ReceiveStream, max_frame_bytes: int) -> None:
        self._stream = stream
        self._max_frame_bytes = max_frame_bytes

    async def receive(self) -> Message:
        """The next frame from the server; `PeerClosed` when it has said everything."""
        return await read_frame(self._stream, max_frame_bytes=self._max_frame_bytes)

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[Message]:
        while True:
            try:
                yield await self.receive()
            except PeerClosed:
                return


async def _connect(path: Path) -> trio.SocketStream:
    try:
        return await trio.open_unix_socket(os.fspath(path))
    except FileNotFoundError:
        raise Unreachable(path, "no such socket (is it running?)") from None
    except ConnectionRefusedError:
        raise Unreachable(path, "connection refused (is it running?)") from None
    except PermissionError:
        raise Unreachable(path, "permission denied (run as the owner's user)") from None
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise Unreachable(path, reason) from None


@asynccontextmanager
async def open_call(
    path: Path, request: Message, *, max_frame_bytes: int = MAX_FRAME
) -> AsyncIterator[Call]:
    """Connect to `path`, send `request`, and yield the conversation for its replies."""
    stream = await _connect(path)
    async with stream:
        await write_frame(stream, request, max_frame_bytes=max_frame_bytes)
        yield Call(stream, max_frame_bytes)


async def call(
    path: Path, request: Message, expect: type[M], *, max_frame_bytes: int = MAX_FRAME
) -> M:
    """Send `request` to `path` and return its one reply, which must be an `expect`.

    Raises:
        Unreachable: nobody answers on `path`.
        RemoteError: the server answered with an `error` frame.
        ProtocolError: the reply was malformed, missing, or of another kind.
    """
    async with open_call(path, request, max_frame_bytes=max_frame_bytes) as conversation:
        try:
            reply = await conversation.receive()
        except PeerClosed:
            raise NoReply(f"{path} closed the connection without a reply") from None
    if isinstance(reply, Error):
        raise RemoteError(reply)
    if not isinstance(reply, expect):
        got = type(reply).__struct_config__.tag
        want = expect.__struct_config__.tag
        raise ProtocolError(f"expected a {want!r} reply from {path}, got {got!r}")
    return reply
