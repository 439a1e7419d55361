"""serve_stream over memory streams: one request, every failure a defined answer."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from inmemory import answer, open_exchange

import proto
from proto import (
    LOOP_MEMORY,
    Connection,
    Error,
    MemoryBlock,
    MemoryBlockReply,
    Message,
    Ok,
    Peer,
    ServiceError,
    SessionUpdated,
)

CAP_S = 10


async def _handler(request: Message, conn: Connection) -> Message:
    if isinstance(request, MemoryBlock):
        await conn.send(MemoryBlockReply(text="ahead of the reply"))
        return MemoryBlockReply(text=f"hello pid {conn.peer_pid} uid {conn.peer_uid}")
    assert isinstance(request, SessionUpdated)
    if request.session == "chat-refused1":
        raise ServiceError("nope", "refused on purpose", runbook="memory-unavailable")
    if request.session == "chat-crashes1":
        raise RuntimeError("a handler bug")
    return Ok()


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


async def test_the_reply_comes_after_the_frames_sent_ahead_and_names_the_peer() -> None:
    with trio.fail_after(CAP_S):
        frames = await answer(LOOP_MEMORY, _handler, MemoryBlock(), peer=Peer(pid=42, uid=1234))
    assert frames == [
        MemoryBlockReply(text="ahead of the reply"),
        MemoryBlockReply(text="hello pid 42 uid 1234"),
    ]


async def test_service_error_and_handler_crash_become_error_frames() -> None:
    with trio.fail_after(CAP_S):
        refused = await answer(LOOP_MEMORY, _handler, SessionUpdated(session="chat-refused1"))
        crashed = await answer(LOOP_MEMORY, _handler, SessionUpdated(session="chat-crashes1"))
        fine = await answer(LOOP_MEMORY, _handler, SessionUpdated(session="chat-fine0001"))
    assert refused == [
        Error(code="nope", message="refused on purpose", runbook="memory-unavailable")
    ]
    (internal,) = crashed
    assert isinstance(internal, Error)
    assert internal.code == "internal"
    assert internal.message == "memoryd failed to answer 'session_updated'; its log says why"
    assert fine == [Ok()]


@pytest.mark.parametrize(
    ("sent", "code"),
    [
        (_frame(b"hello"), "bad-frame"),
        (_frame(b'{"kind":"launch_missiles"}'), "bad-frame"),
        (_frame(b'{"kind":"session_updated","session":"../../etc"}'), "bad-frame"),
        (b"\xff\xff\xff\xff", "frame-too-large"),  # answered without reading a body
    ],
)
async def test_bad_frames_are_answered_with_their_error(sent: bytes, code: str) -> None:
    with trio.fail_after(CAP_S):
        (reply,) = await answer(LOOP_MEMORY, _handler, sent)
    assert isinstance(reply, Error)
    assert reply.code == code


async def test_a_kind_of_another_socket_is_refused() -> None:
    with trio.fail_after(CAP_S):
        (reply,) = await answer(LOOP_MEMORY, _handler, proto.Reindex())
    assert reply == Error(
        code="wrong-socket", message="'reindex' is not accepted on the loop-memory socket"
    )


@pytest.mark.parametrize("sent", [b"", b"\x00\x00"], ids=["nothing", "half-a-header"])
async def test_a_peer_that_sends_no_request_is_closed_at_the_read_deadline(
    autojump_clock: trio.testing.MockClock, sent: bytes
) -> None:
    with trio.fail_after(CAP_S):
        started = trio.current_time()
        frames = await answer(LOOP_MEMORY, _handler, sent, read_timeout_s=7.5)
        waited = trio.current_time() - started
    assert frames == []  # closed without a word
    assert waited == pytest.approx(7.5)


async def test_wait_peer_gone_returns_when_the_peer_hangs_up() -> None:
    noticed = trio.Event()

    async def waits_for_hang_up(request: Message, conn: Connection) -> Message:
        await conn.send(MemoryBlockReply(text="waiting"))
        await conn.wait_peer_gone()
        noticed.set()
        return Ok()

    with trio.fail_after(CAP_S):
        async with open_exchange(LOOP_MEMORY, waits_for_hang_up, MemoryBlock()) as conversation:
            assert await conversation.receive() == MemoryBlockReply(text="waiting")
            assert not noticed.is_set()
        # open_exchange hung up, then waited for the handler
    assert noticed.is_set()
