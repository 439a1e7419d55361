"""proto.open_turn against a stub loopd on a real Unix socket: a turn's frames and its ends."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from stubsocket import Answer, hold, replying, serve_stub

import proto
from proto import (
    ApprovalPending,
    AssistantText,
    Error,
    Label,
    Message,
    Ok,
    PendingApproval,
    Say,
    ToolCall,
    ToolCalled,
    ToolResult,
    TurnDone,
    TurnFollow,
)

CAP_S = 10  # every test here fails instead of hanging
SESSION = "chat-turns001"

_CALL = ToolCall(id="c1", name="read_file", arguments='{"path": "notes.md"}')
EVENTS: list[Message] = [
    AssistantText(text="Let me look."),
    ToolCalled(call=_CALL),
    ToolResult(call=_CALL, status="ok", content="the notes", label=Label()),
    ApprovalPending(
        approval=PendingApproval(
            id="a1",
            session=SESSION,
            call_id="c2",
            tool="http_fetch",
            arguments='{"url": "https://example.com"}',
            taint=Label(),
            time="2026-12-01T22:47:16Z",
        )
    ),
]
DONE = TurnDone(text="All read.")


async def _read_turn(
    path: Path,
    request: Say | TurnFollow,
    idle_s: float = CAP_S,
    got: list[Message] | None = None,
) -> list[Message]:
    """Every item of the turn; `got` collects them as they come (for a turn that fails)."""
    items = [] if got is None else got
    async with proto.open_turn(path, request, idle_s=idle_s) as turn:
        async for item in turn:
            items.append(item)
    return items


@pytest.mark.parametrize(
    "request_",
    [Say(session=SESSION, text="read my notes"), TurnFollow(session=SESSION, ref="mm:p1")],
    ids=["say", "turn_follow"],
)
async def test_a_turn_yields_its_events_in_order_then_its_turn_done(
    nursery: trio.Nursery, short_dir: Path, request_: Say | TurnFollow
) -> None:
    path = short_dir / "chat.sock"
    received: list[Message] = []

    async def loopd(stream: trio.SocketStream) -> None:
        received.append(await proto.read_frame(stream))
        for event in [*EVENTS, DONE]:
            await proto.write_frame(stream, event)
        # a frame after the turn's end must not be read: the turn is over
        await proto.write_frame(stream, AssistantText(text="after the end"))
        await trio.sleep_forever()

    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, loopd)
        async with proto.open_turn(path, request_, idle_s=CAP_S * 10) as turn:
            items = [item async for item in turn]
            assert turn.done == DONE
    assert items == [*EVENTS, DONE]
    assert received == [request_]


async def test_the_idle_deadline_is_per_frame_not_per_turn(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "chat.sock"

    async def slow_loopd(stream: trio.SocketStream) -> None:
        await proto.read_frame(stream)
        for event in [*EVENTS, DONE]:
            await trio.sleep(3)
            await proto.write_frame(stream, event)

    with trio.fail_after(CAP_S * 100):
        await serve_stub(nursery, path, slow_loopd)
        started = trio.current_time()
        items = await _read_turn(path, Say(session=SESSION, text="hi"), idle_s=5)
        took = trio.current_time() - started
    assert items == [*EVENTS, DONE]
    assert took == pytest.approx(15)  # longer than idle_s in all, never idle for 5 s


async def test_an_error_frame_ends_the_turn_as_a_remote_error_with_its_code(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "chat.sock"
    refusal = Error(code="model-timeout", message="the model did not answer", runbook="model")
    got: list[Message] = []
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, replying(EVENTS[0], refusal, then=hold))
        with pytest.raises(proto.RemoteError) as failed:
            await _read_turn(path, Say(session=SESSION, text="hi"), got=got)
    assert got == [EVENTS[0]]
    assert failed.value.code == "model-timeout"
    assert failed.value.error == refusal


@pytest.mark.parametrize(
    ("answer", "failure", "says"),
    [
        pytest.param(replying(EVENTS[0]), proto.NoReply, "without its answer", id="closed"),
        pytest.param(
            replying(EVENTS[0], b"\x00\x00\x00\x40{"), proto.CallBroken, "mid-frame", id="torn"
        ),
        pytest.param(
            replying(EVENTS[0], Ok(), then=hold), proto.BadReply, "'ok' frame", id="another-kind"
        ),
    ],
)
async def test_a_turn_that_ends_without_its_turn_done_fails_in_the_family(
    nursery: trio.Nursery,
    short_dir: Path,
    answer: Answer,
    failure: type[proto.CallFailed],
    says: str,
) -> None:
    path = short_dir / "chat.sock"
    got: list[Message] = []
    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, answer)
        with pytest.raises(proto.CallFailed, match=says) as failed:
            await _read_turn(path, Say(session=SESSION, text="hi"), got=got)
    assert type(failed.value) is failure  # exactly: a clean close is not a torn frame
    assert got == [EVENTS[0]]  # what came before the failure was read


async def test_silence_for_idle_s_is_a_timeout(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "chat.sock"
    with trio.fail_after(CAP_S * 100):
        await serve_stub(nursery, path, replying(EVENTS[0], then=hold))
        async with proto.open_turn(path, Say(session=SESSION, text="hi"), idle_s=42) as turn:
            assert await turn.__anext__() == EVENTS[0]
            started = trio.current_time()
            with pytest.raises(proto.CallTimedOut) as failed:
                await turn.__anext__()
            waited = trio.current_time() - started
    assert failed.value.seconds == 42
    assert waited == pytest.approx(42)


async def test_leaving_the_block_early_closes_the_connection(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "chat.sock"
    left_the_loop = trio.Event()
    hung_up = trio.Event()

    async def loopd(stream: trio.SocketStream) -> None:
        await proto.read_frame(stream)
        await proto.write_frame(stream, EVENTS[0])
        await left_the_loop.wait()
        await proto.write_frame(stream, EVENTS[1])  # reaches a client still connected only
        while await stream.receive_some(100):
            pass
        hung_up.set()  # EOF: loopd would now cancel the turn

    with trio.fail_after(CAP_S):
        await serve_stub(nursery, path, loopd)
        async with proto.open_turn(path, Say(session=SESSION, text="hi")) as turn:
            async for item in turn:
                assert item == EVENTS[0]
                break
            left_the_loop.set()
            # still open while the block runs: what loopd sends after the break arrives
            assert await turn.__anext__() == EVENTS[1]
            assert not hung_up.is_set()
        await hung_up.wait()


async def test_no_loopd_is_unreachable(short_dir: Path) -> None:
    with trio.fail_after(CAP_S), pytest.raises(proto.Unreachable, match="no such socket"):
        await _read_turn(short_dir / "chat.sock", Say(session=SESSION, text="hi"))
