"""A stub role on a real Unix socket: each connection is answered by a test's own function.

The clients' tests (`proto.call`, `proto.call_blocking`, `proto.open_turn`) need a server
that misbehaves on purpose: one that closes without a reply, tears a frame, resets the
connection, answers garbage or holds the connection. `serve_stub` accepts on `path` and
runs `answer(stream)` for each connection, then closes it; a client that left early (the
stream broken under the answer) is not the stub's failure.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

import proto
from proto import Message

Answer = Callable[[trio.SocketStream], Awaitable[None]]


async def serve_stub(nursery: trio.Nursery, path: Path, answer: Answer) -> None:
    """Listen on `path` in `nursery` and answer every connection with `answer`."""
    # bound here, not with trio's `bind`, which binds in a thread: the autojump clock
    # would jump past every deadline while it waits for that thread
    plain = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    plain.bind(os.fspath(path))
    sock = trio.socket.from_stdlib_socket(plain)
    sock.listen(8)

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await answer(stream)

    await nursery.start(trio.serve_listeners, handle, [trio.SocketListener(sock)])


def frame(body: bytes) -> bytes:
    """`body` behind its length prefix, whatever it holds."""
    return len(body).to_bytes(proto.HEADER_BYTES, "big") + body


def replying(*messages: Message | bytes, then: Answer | None = None) -> Answer:
    """An answer that reads the request, sends `messages` (frames, or raw bytes as they
    are), then does `then` (by default nothing: it closes)."""

    async def answer(stream: trio.SocketStream) -> None:
        await proto.read_frame(stream)
        for message in messages:
            if isinstance(message, bytes):
                await stream.send_all(message)
            else:
                await proto.write_frame(stream, message)
        if then is not None:
            await then(stream)

    return answer


async def hold(stream: trio.SocketStream) -> None:
    """Keep the connection open and say nothing more."""
    await trio.sleep_forever()
