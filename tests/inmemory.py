"""A role's handler answering one request over `trio.testing.memory_stream_pair()`.

The server side runs `proto.serve_stream`, exactly what `serve_unix` runs for each
accepted socket, so the read deadline, the socket's allow-list and the error policy are
the real ones; only the socket (its path, its peer credentials) is left out. The client
side mirrors `proto.open_call` and `proto.call`: the same `proto.Conversation`, the
same `RemoteError` for an `error` frame.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TypeVar

import trio
import trio.testing

import proto
from proto import Handler, Message, Peer, Socket

M = TypeVar("M", bound=Message)
R = TypeVar("R", bound=Message)


@asynccontextmanager
async def open_exchange(
    spec: Socket[R],
    handler: Handler[R],
    request: Message | bytes,
    *,
    peer: Peer | None = None,
    read_timeout_s: float = 10.0,
    max_frame_bytes: int = proto.MAX_FRAME,
) -> AsyncIterator[proto.Conversation]:
    """Send `request` (a message, or raw bytes as they are) to `handler` behind `spec`.

    Yields the conversation for the frames it answers. Leaving the block hangs up, as a
    client closing its socket does, and then waits for the handler to finish: whatever
    it does about the hang-up (brokerd withdrawing an approval) has happened by then.
    """
    client, server = trio.testing.memory_stream_pair()
    serve = partial(
        proto.serve_stream,
        spec,
        handler,
        server,
        peer=peer or Peer.this_process(),
        read_timeout_s=read_timeout_s,
        max_frame_bytes=max_frame_bytes,
    )
    exchange = proto.Exchange(Path("memory-stream"), max_frame_bytes=max_frame_bytes)
    frame = request if isinstance(request, bytes) else exchange.request(request)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        try:
            async with client:
                await client.send_all(frame)
                exchange.sent()
                yield proto.Conversation(exchange, client)
        except BaseException:
            nursery.cancel_scope.cancel()  # a failed test does not wait for the handler
            raise


async def answer(
    spec: Socket[R],
    handler: Handler[R],
    request: Message | bytes,
    *,
    peer: Peer | None = None,
    read_timeout_s: float = 10.0,
) -> list[Message]:
    """Every frame `handler` answers to `request`, in order (the reply is the last)."""
    async with open_exchange(
        spec, handler, request, peer=peer, read_timeout_s=read_timeout_s
    ) as conversation:
        return [frame async for frame in conversation]


async def call(spec: Socket[R], handler: Handler[R], request: Message, expect: type[M]) -> M:
    """`proto.call`, in memory: the one reply, which must be an `expect`.

    Raises:
        proto.RemoteError: the handler answered with an `error` frame.
    """
    frames = await answer(spec, handler, request)
    assert len(frames) == 1, frames
    (reply,) = frames
    if isinstance(reply, proto.Error):
        raise proto.RemoteError(reply)
    assert isinstance(reply, expect), reply
    return reply
