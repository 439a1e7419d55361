"""Connection.send: a frame ahead of the reply, or PeerGone when the peer left or stopped."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import proto
from proto import AssistantText, Connection, MemoryBlockReply

CAP_S = 10  # every test here fails instead of hanging


def _connection(stream: trio.abc.Stream) -> Connection:
    return Connection(stream, peer_pid=1, peer_uid=1000)


async def _socket_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    a, b = trio.socket.socketpair()
    return trio.SocketStream(a), trio.SocketStream(b)


async def test_a_frame_sent_reaches_the_peer() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    with trio.fail_after(CAP_S):
        await _connection(ours).send(AssistantText(text="ahead"))
        assert await proto.read_frame(theirs) == AssistantText(text="ahead")


async def test_send_to_a_closed_memory_stream_is_peer_gone() -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    await theirs.aclose()
    with trio.fail_after(CAP_S), pytest.raises(proto.PeerGone, match="closed the connection"):
        await _connection(ours).send(AssistantText(text="anyone?"))


async def test_send_to_a_closed_socket_is_peer_gone() -> None:
    ours, theirs = await _socket_pair()
    async with ours:
        await theirs.aclose()
        with trio.fail_after(CAP_S), pytest.raises(proto.PeerGone, match="closed the connection"):
            await _connection(ours).send(AssistantText(text="anyone?"))


async def test_send_on_our_own_closed_stream_is_peer_gone() -> None:
    # a handler still sending after its stream was closed under it (the server shutting down)
    ours, _theirs = trio.testing.memory_stream_pair()
    await ours.aclose()
    with trio.fail_after(CAP_S), pytest.raises(proto.PeerGone):
        await _connection(ours).send(AssistantText(text="late"))


async def test_a_peer_that_stops_reading_is_gone_after_the_write_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, _theirs = trio.testing.lockstep_stream_pair()  # a write waits for its reader
    started = trio.current_time()
    with trio.fail_after(CAP_S * 100), pytest.raises(proto.PeerGone, match="stopped reading"):
        await _connection(ours).send(AssistantText(text="are you there?"))
    assert trio.current_time() - started == pytest.approx(proto._connection.WRITE_DEADLINE_S)


async def test_a_socket_peer_that_stops_reading_is_gone_after_the_write_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = await _socket_pair()
    big = MemoryBlockReply(text="x" * (proto.MAX_FRAME - 100))  # more than the socket buffers
    async with ours, theirs:
        started = trio.current_time()
        with trio.fail_after(CAP_S * 100), pytest.raises(proto.PeerGone, match="10 s"):
            await _connection(ours).send(big)
        waited = trio.current_time() - started
    assert waited == pytest.approx(proto._connection.WRITE_DEADLINE_S)


async def test_a_slow_reader_within_the_deadline_is_not_gone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()
    got: list[proto.Message] = []

    async def slow_reader() -> None:
        await trio.sleep(proto._connection.WRITE_DEADLINE_S - 1)
        got.append(await proto.read_frame(theirs))

    with trio.fail_after(CAP_S * 100):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_reader)
            await _connection(ours).send(AssistantText(text="take your time"))
    assert got == [AssistantText(text="take your time")]


async def test_the_write_deadline_is_read_when_sending(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proto._connection, "WRITE_DEADLINE_S", 0.5)
    ours, _theirs = trio.testing.lockstep_stream_pair()
    started = trio.current_time()
    with trio.fail_after(CAP_S), pytest.raises(proto.PeerGone, match=r"0\.5 s"):
        await _connection(ours).send(AssistantText(text="are you there?"))
    assert trio.current_time() - started == pytest.approx(0.5)
