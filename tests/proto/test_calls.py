"""proto.call and proto.call_blocking over real Unix sockets: one outcome for one cause.

A stub server (tests/stubsocket.py) misbehaves in each way a role can. Every test puts
both clients to it at once and requires the same outcome of them: the same reply, or the
same member of the family (exactly: a reset is `CallBroken`, a clean close `NoReply`, its
subclass) with the same sentence and the same details. Then it checks that outcome.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from stubsocket import Answer, frame, hold, replying, serve_stub

import proto
from proto import Error, MemoryBlock, MemoryBlockReply, Message, Ok, Say

CAP_S = 10  # every test here fails instead of hanging
SESSION = "chat-abcdefghijkl"


@dataclass(frozen=True)
class Failed:
    """A call that raised: its class, its sentence, and its own attributes."""

    kind: type[proto.CallFailed]
    message: str
    details: dict[str, object]


Outcome = Message | Failed
"""What a call ended in: its reply, or how it failed."""


@dataclass(frozen=True)
class Compared:
    """The one outcome both clients came to, and how long each took to it."""

    outcome: Outcome
    waited_s: tuple[float, float]


Client = Callable[[Path, Message, type[Message], float, int], Awaitable[Message]]


async def _trio_client(
    path: Path, request: Message, expect: type[Message], deadline_s: float, max_frame_bytes: int
) -> Message:
    return await proto.call(
        path, request, expect, deadline_s=deadline_s, max_frame_bytes=max_frame_bytes
    )


async def _blocking_client(
    path: Path, request: Message, expect: type[Message], deadline_s: float, max_frame_bytes: int
) -> Message:
    run = partial(
        proto.call_blocking,
        path,
        request,
        expect,
        deadline_s=deadline_s,
        max_frame_bytes=max_frame_bytes,
    )
    return await trio.to_thread.run_sync(run)


CLIENTS: dict[str, Client] = {"trio": _trio_client, "blocking": _blocking_client}


async def outcome(
    client: Client,
    path: Path,
    *,
    request: Message = MemoryBlock(),  # noqa: B008  (frozen)
    expect: type[Message] = Ok,
    deadline_s: float = CAP_S,
    max_frame_bytes: int = proto.MAX_FRAME,
) -> Outcome:
    """What `client` ends in: anything outside the family fails the test."""
    try:
        return await client(path, request, expect, deadline_s, max_frame_bytes)
    except proto.CallFailed as exc:
        return Failed(type(exc), str(exc), dict(vars(exc)))


async def both(
    path: Path,
    *,
    request: Message = MemoryBlock(),  # noqa: B008  (frozen)
    expect: type[Message] = Ok,
    deadline_s: float = CAP_S,
    max_frame_bytes: int = proto.MAX_FRAME,
) -> Compared:
    """Both clients' outcome, called at once; they must be the same."""
    got: dict[str, tuple[Outcome, float]] = {}

    async def one(name: str, client: Client) -> None:
        started = trio.current_time()
        ended = await outcome(
            client,
            path,
            request=request,
            expect=expect,
            deadline_s=deadline_s,
            max_frame_bytes=max_frame_bytes,
        )
        got[name] = (ended, trio.current_time() - started)

    async with trio.open_nursery() as nursery:
        for name, client in CLIENTS.items():
            nursery.start_soon(one, name, client)
    (trio_outcome, trio_s), (blocking_outcome, blocking_s) = got["trio"], got["blocking"]
    assert trio_outcome == blocking_outcome
    return Compared(trio_outcome, (trio_s, blocking_s))


async def _resets(stream: trio.SocketStream) -> None:
    # Close with the request still unread: the kernel resets the peer (ECONNRESET).
    assert await stream.receive_some(1)


async def test_an_ok_reply_is_returned(nursery: trio.Nursery, short_dir: Path) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(Ok()))
        assert (await both(path)).outcome == Ok()


async def test_no_socket_file_is_unreachable(short_dir: Path) -> None:
    path = short_dir / "nobody.sock"
    with trio.fail_after(CAP_S):
        compared = await both(path)
    reason = "no such socket (is it running?)"
    assert compared.outcome == Failed(
        proto.Unreachable, f"cannot connect to {path}: {reason}", {"path": path, "reason": reason}
    )


async def test_a_socket_nobody_listens_on_is_unreachable(short_dir: Path) -> None:
    path = short_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
        bound.bind(os.fspath(path))  # bound, never listening: a crashed role's leftover
        with trio.fail_after(CAP_S):
            compared = await both(path)
    assert isinstance(compared.outcome, Failed)
    assert compared.outcome.kind is proto.Unreachable
    assert compared.outcome.details["reason"] == "connection refused (is it running?)"


@pytest.mark.parametrize(
    ("answer", "failure", "says"),
    [
        pytest.param(
            replying(), proto.NoReply, "{path} closed the connection without a reply", id="closes"
        ),
        pytest.param(
            replying(b'\x00\x00\x00\x10{"kin'),
            proto.CallBroken,
            "the connection to {path} broke mid-frame: peer closed after 5 of 16 bytes",
            id="half-a-frame",
        ),
        pytest.param(
            replying(b"\x00\x00"),
            proto.CallBroken,
            "the connection to {path} broke mid-frame: peer closed after 2 of 4 bytes",
            id="half-a-header",
        ),
        pytest.param(
            _resets,
            proto.CallBroken,
            "the connection to {path} broke: connection reset by peer",
            id="reset",
        ),
        pytest.param(
            replying(frame(b"hello")),
            proto.BadReply,
            "{path} sent a reply that cannot be read: JSON is malformed: invalid character "
            "(byte 0)",
            id="garbage",
        ),
        pytest.param(
            replying(frame(b'{"kind":"launch_missiles"}')),
            proto.BadReply,
            "{path} sent a reply that cannot be read: invalid value 'launch_missiles' - at "
            "`$.kind`",
            id="unknown-kind",
        ),
        pytest.param(
            replying(MemoryBlockReply(text="hi")),
            proto.BadReply,
            "expected a 'ok' reply from {path}, got 'memory_block_reply'",
            id="another-kind",
        ),
        pytest.param(
            replying(b"\xff\xff\xff\xff", then=hold),
            proto.BadReply,
            "{path} sent a reply that cannot be read: frame of 4,294,967,295 bytes exceeds "
            "the limit of 1,048,576",
            id="too-large-header",
        ),
    ],
)
async def test_a_misbehaving_server_is_one_failure_of_the_family(
    nursery: trio.Nursery,
    short_dir: Path,
    answer: Answer,
    failure: type[proto.CallFailed],
    says: str,
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, answer)
        compared = await both(path)
    assert compared.outcome == Failed(failure, says.format(path=path), {})


async def test_a_frame_over_the_callers_limit_is_a_bad_reply(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(MemoryBlockReply(text="x" * 100), then=hold))
        small = await both(path, expect=MemoryBlockReply, max_frame_bytes=64)
        # the same frame fits the default limit
        default = await both(path, expect=MemoryBlockReply)
    assert small.outcome == Failed(
        proto.BadReply,
        f"{path} sent a reply that cannot be read: frame of 139 bytes exceeds the limit of 64",
        {},
    )
    assert default.outcome == MemoryBlockReply(text="x" * 100)


async def test_an_error_frame_is_a_remote_error_with_its_code(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    refusal = Error(code="session-full", message="too long", runbook="session-full")
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(refusal))
        compared = await both(path)
    assert compared.outcome == Failed(proto.RemoteError, "too long", {"error": refusal})


async def test_our_own_request_over_the_frame_limit_is_refused_before_any_io(
    short_dir: Path,
) -> None:
    # nothing listens at the path: a connect would be Unreachable, so none was tried
    path = short_dir / "nobody.sock"
    request = Say(session=SESSION, text="x" * proto.MAX_FRAME)
    with trio.fail_after(CAP_S):
        compared = await both(path, request=request)
    size = len(proto.encode_frame(request, max_frame_bytes=2 * proto.MAX_FRAME)) - 4
    assert compared.outcome == Failed(
        proto.RequestTooLarge,
        f"the 'say' request is {size:,} bytes, over the 1 MiB a frame holds: not sent to {path}",
        {"path": path, "kind": "say", "size": size, "limit": proto.MAX_FRAME},
    )
    assert isinstance(compared.outcome, Failed)
    assert issubclass(compared.outcome.kind, proto.BadRequest)  # not a BadReply
    assert proto.RequestTooLarge(path, "say", 1, 1).code == "request-too-large"


async def test_a_request_over_a_smaller_limit_says_that_limit(short_dir: Path) -> None:
    path = short_dir / "nobody.sock"
    request = Say(session=SESSION, text="x" * 100)
    with trio.fail_after(CAP_S):
        compared = await both(path, request=request, max_frame_bytes=64)
    assert isinstance(compared.outcome, Failed)
    assert compared.outcome.message.endswith(f"over the 64 bytes a frame holds: not sent to {path}")


async def test_a_request_that_is_not_unicode_is_a_bad_request_not_a_bad_reply(
    short_dir: Path,
) -> None:
    path = short_dir / "nobody.sock"
    with trio.fail_after(CAP_S):
        compared = await both(path, request=Say(session=SESSION, text="caf\udce9"))
    assert isinstance(compared.outcome, Failed)
    assert compared.outcome.kind is proto.BadRequest
    assert compared.outcome.message.startswith(
        f"the 'say' request cannot be sent to {path}: a Say holds text that is not Unicode"
    )


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


async def test_a_full_backlog_is_waited_on_until_the_deadline(short_dir: Path) -> None:
    """Not `Unreachable` (it listens) nor `CallBroken` (nothing was connected)."""
    path = short_dir / "busy.sock"
    listener, waiting = _full_backlog(path)
    try:
        with trio.fail_after(CAP_S):
            compared = await both(path, deadline_s=0.4)
    finally:
        for sock in [listener, *waiting]:
            sock.close()
    assert compared.outcome == Failed(
        proto.CallTimedOut, f"{path} did not accept the connection within 0.4 s", {"seconds": 0.4}
    )
    assert min(compared.waited_s) >= 0.35


async def test_a_call_goes_through_once_the_backlog_has_room(
    nursery: trio.Nursery, short_dir: Path
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
            compared = await both(path)  # both wait at once, on the same full backlog
    finally:
        nursery.cancel_scope.cancel()  # the waiting connection's answer never gets a request
        for sock in waiting:
            sock.close()
        accepting.close()
    assert compared.outcome == Ok()
    assert min(compared.waited_s) >= 0.15


@pytest.mark.parametrize(
    "answer",
    [replying(then=hold), replying(b"\x00\x00\x00\x10{", then=hold)],
    ids=["silent", "torn"],
)
async def test_a_held_connection_is_a_timeout_at_the_deadline(
    nursery: trio.Nursery, short_dir: Path, answer: Answer
) -> None:
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, answer)
        compared = await both(path, deadline_s=0.2)
    assert compared.outcome == Failed(
        proto.CallTimedOut, f"{path} did not answer within 0.2 s", {"seconds": 0.2}
    )
    assert all(0.15 <= waited < 5 for waited in compared.waited_s)


async def test_a_server_that_does_not_read_a_large_request_is_a_timeout_in_sending(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    request = Say(session=SESSION, text="x" * (proto.MAX_FRAME - 100))  # over the socket buffer

    async def never_reads(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, never_reads)
        compared = await both(path, request=request, deadline_s=0.3)
    assert compared.outcome == Failed(
        proto.CallTimedOut, f"{path} did not take the request within 0.3 s", {"seconds": 0.3}
    )


async def test_a_server_that_leaves_in_the_middle_of_a_large_request_broke_it(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "r.sock"
    request = Say(session=SESSION, text="x" * (proto.MAX_FRAME - 100))
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, _resets)
        compared = await both(path, request=request)
    assert isinstance(compared.outcome, Failed)
    assert compared.outcome.kind is proto.CallBroken
    assert compared.outcome.message.startswith(f"the connection to {path} broke: ")


async def test_a_held_connection_times_out_at_the_deadline_exactly(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, short_dir: Path
) -> None:
    # the trio client alone: the blocking one keeps real time, which the clock cannot jump
    path = short_dir / "r.sock"
    with trio.fail_after(CAP_S * 100):
        await serve_stub(nursery, path, replying(then=hold))
        started = trio.current_time()
        with pytest.raises(proto.CallTimedOut) as failed:
            await proto.call(path, MemoryBlock(), Ok, deadline_s=7.5)
        waited = trio.current_time() - started
    assert failed.value.seconds == 7.5
    assert failed.value.code == "timeout"
    assert waited == pytest.approx(7.5)


class _LateAfter:
    """A clock for `proto._blocking` that is past the deadline from its `n`th reading on."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def monotonic(self) -> float:
        self.calls += 1
        return 0.0 if self.calls < self.n else 60.0


@pytest.mark.parametrize(
    ("late_from", "not_done"),
    [(2, "accept the connection"), (3, "take the request"), (4, "answer")],
    ids=["before-connecting", "before-sending", "before-reading"],
)
async def test_the_blocking_client_out_of_time_between_steps_is_a_timeout(
    nursery: trio.Nursery,
    short_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    late_from: int,
    not_done: str,
) -> None:
    # The deadline can run out between two steps (a slow send): that is the deadline, said
    # for the step it stopped, not a broken connection (a socket with no time left
    # would be non-blocking and fail with EAGAIN). Its readings: the start, then one
    # before connecting, one before sending, one before each read.
    path = short_dir / "r.sock"
    monkeypatch.setattr(proto._blocking, "time", _LateAfter(late_from))
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(then=hold))
        got = await outcome(_blocking_client, path, deadline_s=1)
    assert got == Failed(
        proto.CallTimedOut, f"{path} did not {not_done} within 1 s", {"seconds": 1}
    )


def test_a_kernels_timeout_is_a_broken_connection_and_a_sockets_own_the_deadline() -> None:
    clock = proto._blocking._Clock(1.0)
    assert clock.timed_out(TimeoutError("timed out")) == proto._exchange.TimedOut(1.0)
    assert clock.timed_out(TimeoutError(errno.ETIMEDOUT, "Connection timed out")) is None
    assert proto._blocking._Clock(None).timed_out(TimeoutError("timed out")) is None


def test_every_failure_has_a_distinct_stable_code() -> None:
    codes: dict[type[proto.CallFailed], str] = {
        proto.CallFailed: "call-failed",
        proto.BadRequest: "bad-request",
        proto.RequestTooLarge: "request-too-large",
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


# -- whatever a server answers, to whatever request ---------------------------------------

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
_answers = st.one_of(_a_frame, _answers)  # a whole frame, often
_requests = st.one_of(
    st.just(MemoryBlock()), st.text(max_size=100).map(lambda text: Say(session=SESSION, text=text))
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    answered=_answers,
    holds=st.booleans(),
    reads=st.booleans(),
    request=_requests,
    max_frame_bytes=st.sampled_from([64, proto.MAX_FRAME, proto.MAX_FRAME]),
)
async def test_whatever_the_server_answers_both_clients_come_to_the_same_outcome(
    answered: bytes, holds: bool, reads: bool, request: Message, max_frame_bytes: int
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
                compared = await both(
                    path, request=request, deadline_s=0.2, max_frame_bytes=max_frame_bytes
                )
                nursery.cancel_scope.cancel()
    event(compared.outcome.kind.__name__ if isinstance(compared.outcome, Failed) else "ok")
    if not isinstance(compared.outcome, Failed):
        assert compared.outcome == Ok()
        assert answered.startswith(proto.encode_frame(Ok()))
