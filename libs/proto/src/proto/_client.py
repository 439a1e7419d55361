"""The client side: connect, send one request, read the reply frame or frames, close.

No function here takes a timeout: the caller sets the deadline (`trio.fail_after`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import trio

from ._calls import NoReply, RemoteError, Unreachable, expected, unreachable
from ._codec import MAX_FRAME, PeerClosed, read_frame, write_frame
from ._messages import Message

__all__ = ["Call", "NoReply", "RemoteError", "Unreachable", "call", "open_call"]

M = TypeVar("M", bound=Message)


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
    except OSError as exc:
        raise unreachable(path, exc) from None


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
    return expected(path, reply, expect)
