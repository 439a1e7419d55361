"""proto.call and proto.call_blocking over real Unix sockets: every failure is a CallFailed.

A stub server (tests/stubsocket.py) misbehaves in each way a role can, and both clients
must say it as the same member of the family, exactly (a reset is `CallBroken`, a clean
close `NoReply`, its subclass), so that callers that tell them apart keep working.
"""

from __future__ import annotations

import os
import socket
import tempfile
from functools import partial
from pathlib import Path
from typing import Protocol

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stubsocket import Answer, frame, hold, replying, serve_stub

import proto
from proto import Error, MemoryBlock, MemoryBlockReply, Message, Ok

CAP_S = 10  # every test here fails instead of hanging


class Client(Protocol):
    async def __call__(
        self,
        path: Path,
        expect: type[Message],
        *,
        deadline_s: float = CAP_S,
        max_frame_bytes: int = proto.MAX_FRAME,
    ) -> Message: ...


async def _trio_client(
    path: Path,
    expect: type[Message],
    *,
    deadline_s: float = CAP_S,
    max_frame_bytes: int = proto.MAX_FRAME,
) -> Message:
    return await proto.call(
        path, MemoryBlock(), expect, deadline_s=deadline_s, max_frame_bytes=max_frame_bytes
    )


async def _blocking_client(
    path: Path,
    expect: type[Message],
    *,
    deadline_s: float = CAP_S,
    max_frame_bytes: int = proto.MAX_FRAME,
) -> Message:
    run = partial(
        proto.call_blocking,
        path,
        MemoryBlock(),
        expect,
        deadline_s=deadline_s,
        max_frame_bytes=max_frame_bytes,
    )
    return await trio.to_thread.run_sync(run)


@pytest.fixture(params=["trio", "blocking"])
def client(request: pytest.FixtureRequest) -> Client:
    """Each test runs against both clients: they must fail alike."""
    return _trio_client if request.param == "trio" else _blocking_client


async def _resets(stream: trio.SocketStream) -> None:
    # Close with the request still unread: the kernel resets the peer (ECONNRESET).
    assert await stream.receive_some(1)


async def test_an_ok_reply_is_returned(
    client: Client, nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(Ok()))
        assert await client(path, Ok) == Ok()


async def test_no_socket_file_is_unreachable(client: Client, short_dir: Path) -> None:
    path = short_dir / "nobody.sock"
    with trio.fail_after(CAP_S), pytest.raises(proto.Unreachable) as failed:
        await client(path, Ok)
    assert failed.value.path == path
    assert failed.value.reason == "no such socket (is it running?)"


async def test_a_socket_nobody_listens_on_is_unreachable(client: Client, short_dir: Path) -> None:
    path = short_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(os.fspath(path))  # bound, never listening: a crashed role's leftover
        with trio.fail_after(CAP_S), pytest.raises(proto.Unreachable) as failed:
            await client(path, Ok)
    assert failed.value.reason == "connection refused (is it running?)"


@pytest.mark.parametrize(
    ("answer", "failure", "says"),
    [
        pytest.param(replying(), proto.NoReply, "without a reply", id="closes-without-reply"),
        pytest.param(
            replying(b'\x00\x00\x00\x10{"kin'), proto.CallBroken, "mid-frame", id="half-a-frame"
        ),
        pytest.param(replying(b"\x00\x00"), proto.CallBroken, "mid-frame", id="half-a-header"),
        pytest.param(_resets, proto.CallBroken, "broke", id="reset"),
        pytest.param(replying(frame(b"hello")), proto.BadReply, "cannot be read", id="garbage"),
        pytest.param(
            replying(frame(b'{"kind":"launch_missiles"}')),
            proto.BadReply,
            "cannot be read",
            id="unknown-kind",
        ),
        pytest.param(
            replying(MemoryBlockReply(text="hi")),
            proto.BadReply,
            "expected a 'ok' reply from .*, got 'memory_block_reply'",
            id="another-kind",
        ),
        pytest.param(
            replying(b"\xff\xff\xff\xff", then=hold),
            proto.BadReply,
            "exceeds the limit",
            id="too-large-header",
        ),
    ],
)
async def test_a_misbehaving_server_is_one_failure_of_the_family(
    client: Client,
    nursery: trio.Nursery,
    short_dir: Path,
    answer: Answer,
    failure: type[proto.CallFailed],
    says: str,
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, answer)
        with pytest.raises(proto.CallFailed, match=says) as failed:
            await client(path, Ok)
    assert type(failed.value) is failure  # exactly: NoReply is not any CallBroken
    assert str(path) in str(failed.value)


async def test_a_frame_over_the_callers_limit_is_a_bad_reply(
    client: Client, nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(MemoryBlockReply(text="x" * 100), then=hold))
        with pytest.raises(proto.BadReply, match="exceeds the limit of 64"):
            await client(path, MemoryBlockReply, max_frame_bytes=64)
        # the same frame fits the default limit
        assert await client(path, MemoryBlockReply) == MemoryBlockReply(text="x" * 100)


async def test_an_error_frame_is_a_remote_error_with_its_code(
    client: Client, nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    refusal = Error(code="session-full", message="too long", runbook="session-full")
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(refusal))
        with pytest.raises(proto.RemoteError) as failed:
            await client(path, Ok)
    assert failed.value.code == "session-full"
    assert failed.value.error == refusal
    assert str(failed.value) == "too long"


def _full_backlog(path: Path) -> tuple[socket.socket, list[socket.socket]]:
    """A listener at `path` whose backlog is full (one connection waits, unaccepted)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.fspath(path))
    listener.listen(0)  # Linux lets one connection wait
    waiting: list[socket.socket] = []
    while True:
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        other.setblocking(False)
        try:
            other.connect(os.fspath(path))
        except BlockingIOError:
            other.close()
            return listener, waiting
        waiting.append(other)


async def test_a_full_backlog_is_waited_on_until_the_deadline(
    client: Client, short_dir: Path
) -> None:
    """Not `Unreachable` (it listens) nor `CallBroken` (nothing was connected)."""
    path = short_dir / "busy.sock"
    listener, waiting = _full_backlog(path)
    try:
        started = trio.current_time()
        with trio.fail_after(CAP_S), pytest.raises(proto.CallTimedOut):
            await client(path, Ok, deadline_s=0.4)
        assert trio.current_time() - started >= 0.35
    finally:
        for sock in [listener, *waiting]:
            sock.close()


async def test_a_call_goes_through_once_the_backlog_has_room(
    client: Client, nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "busy.sock"
    listener, waiting = _full_backlog(path)
    accepting = trio.socket.from_stdlib_socket(listener)

    async def answer(conn: trio.socket.SocketType) -> None:
        async with trio.SocketStream(conn) as stream:
            await replying(Ok())(stream)

    async def accept_later() -> None:
        await trio.sleep(0.2)
        while True:
            conn, _ = await accepting.accept()
            nursery.start_soon(answer, conn)

    try:
        nursery.start_soon(accept_later)
        with trio.fail_after(CAP_S):
            assert await client(path, Ok, deadline_s=CAP_S) == Ok()
    finally:
        nursery.cancel_scope.cancel()  # the waiting connection's answer never gets a request
        for sock in waiting:
            sock.close()
        accepting.close()


async def test_a_held_connection_times_out_at_the_deadline(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S * 100):
        await serve_stub(nursery, path, replying(then=hold))
        started = trio.current_time()
        with pytest.raises(proto.CallTimedOut) as failed:
            await _trio_client(path, Ok, deadline_s=7.5)
        waited = trio.current_time() - started
    assert failed.value.seconds == 7.5
    assert failed.value.code == "timeout"
    assert str(path) in str(failed.value)
    assert waited == pytest.approx(7.5)


async def test_a_torn_reply_held_open_times_out_too(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S * 100):
        await serve_stub(nursery, path, replying(b"\x00\x00\x00\x10{", then=hold))
        with pytest.raises(proto.CallTimedOut) as failed:
            await _trio_client(path, Ok, deadline_s=3)
    assert failed.value.seconds == 3


@pytest.mark.parametrize(
    "answer",
    [replying(then=hold), replying(b"\x00\x00\x00\x10{", then=hold)],
    ids=["silent", "torn"],
)
async def test_the_blocking_client_times_out_at_its_deadline(
    nursery: trio.Nursery, short_dir: Path, answer: Answer
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, answer)
        started = trio.current_time()
        with pytest.raises(proto.CallTimedOut) as failed:
            await _blocking_client(path, Ok, deadline_s=0.2)
        waited = trio.current_time() - started
    assert failed.value.seconds == 0.2
    assert str(path) in str(failed.value)
    assert 0.15 <= waited < 5


class _Late:
    """A clock for `proto._blocking` that is past the deadline once the request is sent."""

    def __init__(self) -> None:
        self.calls = 0

    def monotonic(self) -> float:
        self.calls += 1
        return 0.0 if self.calls == 1 else 60.0


async def test_the_blocking_client_out_of_time_before_reading_is_a_timeout(
    nursery: trio.Nursery, short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deadline can run out between sending the request and reading the reply (a slow
    # send): that is the deadline, not a broken connection.
    path = short_dir / "r.sock"
    monkeypatch.setattr(proto._blocking, "time", _Late())
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(then=hold))
        with pytest.raises(proto.CallTimedOut) as failed:
            await _blocking_client(path, Ok, deadline_s=1)
    assert failed.value.seconds == 1


def test_every_failure_has_a_distinct_stable_code() -> None:
    codes: dict[type[proto.CallFailed], str] = {
        proto.CallFailed: "call-failed",
        proto.Unreachable: "unreachable",
        proto.CallBroken: "broken",
        proto.NoReply: "no-reply",
        proto.BadReply: "bad-reply",
        proto.CallTimedOut: "timeout",
    }

    def family(cls: type[proto.CallFailed]) -> set[type[proto.CallFailed]]:
        return {cls}.union(*(family(sub) for sub in cls.__subclasses__()))

    # every kind is named here (a new one must get its code), and RemoteError's is the role's
    assert family(proto.CallFailed) == {*codes, proto.RemoteError}
    assert {cls: cls.code for cls in codes} == codes
    assert len(set(codes.values())) == len(codes)
    remote = proto.RemoteError(Error(code="session-full", message="m"))
    assert remote.code == "session-full"
    assert proto.Unreachable(Path("/x"), "r").code == "unreachable"
    assert proto.CallTimedOut("m", 1.0).code == "timeout"


# -- whatever a server answers -----------------------------------------------------------

_messages = st.sampled_from(
    [
        Ok(),
        Error(code="nope", message="refused"),
        MemoryBlockReply(text="hello"),
        proto.TurnDone(text="done"),
    ]
)
_a_frame = _messages.map(proto.encode_frame)
_answers = st.lists(
    st.one_of(
        st.binary(max_size=40),
        _a_frame,
        _a_frame.flatmap(lambda f: st.integers(0, len(f)).map(lambda n: f[:n])),  # torn
        st.binary(max_size=40).map(frame),
        st.integers(0, 2**32 - 1).map(lambda n: n.to_bytes(4, "big")),  # any header
    ),
    max_size=3,
).map(b"".join)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(answered=_answers, holds=st.booleans(), reads=st.booleans())
async def test_whatever_the_server_answers_the_call_returns_or_fails_in_the_family(
    answered: bytes, holds: bool, reads: bool
) -> None:
    async def answer(stream: trio.SocketStream) -> None:
        if reads:
            await proto.read_frame(stream)
        else:
            await stream.receive_some(1)  # the rest unread: a close resets the peer
        await stream.send_all(answered)
        if holds:
            await trio.sleep_forever()

    with tempfile.TemporaryDirectory(prefix="bx", dir="/tmp") as short:
        path = Path(short) / "r.sock"
        with trio.fail_after(CAP_S):
            async with trio.open_nursery() as nursery:
                await serve_stub(nursery, path, answer)
                for client in (_trio_client, _blocking_client):
                    try:
                        reply = await client(path, Ok, deadline_s=0.05)
                    except proto.CallFailed:
                        pass  # anything else (OSError, TooSlowError, …) fails the test
                    else:
                        assert reply == Ok()
                        assert answered.startswith(proto.encode_frame(Ok()))
                nursery.cancel_scope.cancel()
