"""A turn that outlives its client (`keep_going`) and is followed by its ref (issue 15).

The Mattermost bridge says each post with `ref` and `keep_going`; restarted, it follows
the turn of a post it may have said: every event of that turn from its start (the running
turn's as they come, a finished one's rebuilt from the session's records) and its end, or
"turn-not-found" when the say never arrived (issue 20: tool lines survive a restart).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing
from loopd_harness import Harness, open_session, start_harness
from scripted_model import Step, serve_scripted_model

import proto
from loopd._outbox import joined
from proto import (
    AssistantText,
    Error,
    Label,
    Peer,
    Say,
    ToolCalled,
    ToolResult,
    TurnDone,
    TurnFollow,
)

CAP_S = 20


def records(h: Harness, session: str) -> list[dict[str, object]]:
    text = (h.home / "sessions" / session / proto.LOG_FILE).read_text()
    return [json.loads(line) for line in text.splitlines()]


async def collect(h: Harness, request: proto.Message) -> list[proto.Message]:
    frames: list[proto.Message] = []
    async with h.chat.open_call(request) as conversation:
        async for frame in conversation:
            frames.append(frame)
    return frames


async def test_a_kept_turn_finishes_without_its_client_and_is_found_by_its_ref(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    token = trio.lowlevel.current_trio_token()
    writing = trio.Event()
    left = trio.Event()

    def respond(request: dict[str, object]) -> Step:  # in the model server's thread
        trio.from_thread.run_sync(writing.set, trio_token=token)
        trio.from_thread.run(left.wait, trio_token=token)  # it answers after the client left
        return Step(text="Kept.")

    with serve_scripted_model() as model, trio.fail_after(CAP_S):
        model.respond = respond
        h = await start_harness(nursery, short_dir, model.url)
        session = (await open_session(h.chat)).session
        said = Say(session=session, text="hello", ref="mm:aaaa", keep_going=True)
        # The exchange by hand (as `h.chat.open_call`), to hang up while the model writes.
        client, server = trio.testing.memory_stream_pair()
        serve = partial(
            proto.serve_stream,
            proto.OWNER_LOOP,
            h.loopd.handle_chat,
            server,
            peer=Peer.this_process(),
        )
        async with trio.open_nursery() as handler:
            handler.start_soon(serve)
            await proto.write_frame(client, said)
            await writing.wait()
            await client.aclose()  # the client left; the turn goes on to its end
            left.set()
        # (the handler has returned: the kept turn has ended)
        assert records(h, session)[0]["ref"] == "mm:aaaa"
        frames = await collect(h, TurnFollow(session=session, ref="mm:aaaa"))
    assert frames == [AssistantText(text="Kept."), TurnDone(text="Kept.")]


async def test_a_follower_gets_a_running_turn_from_its_start(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    token = trio.lowlevel.current_trio_token()
    first_call = trio.Event()
    go_on = trio.Event()

    def respond(request: dict[str, object]) -> Step:
        if len(model.requests) == 1:
            return Step(text="Let me look.", tool_calls=[("recall", '{"query": "tea"}')])
        trio.from_thread.run_sync(first_call.set, trio_token=token)
        trio.from_thread.run(go_on.wait, trio_token=token)
        return Step(text="You like green tea.")

    with serve_scripted_model() as model, trio.fail_after(CAP_S):
        model.respond = respond
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.answers["recall"] = ("green tea", Label())
        session = (await open_session(h.chat)).session
        said = Say(session=session, text="tea?", ref="mm:bbbb", keep_going=True)
        followed: list[proto.Message] = []
        async with trio.open_nursery() as both:

            async def leave_early() -> None:
                # (leaving the exchange waits for the handler: the kept turn's end)
                async with h.chat.open_call(said):
                    await first_call.wait()  # the tool ran; the model is writing its answer

            both.start_soon(leave_early)
            await first_call.wait()
            async with h.chat.open_call(TurnFollow(session=session, ref="mm:bbbb")) as follow:
                # what happened before the follower came, then (only then) the rest
                while not isinstance(frame := await follow.receive(), ToolResult):
                    followed.append(frame)
                followed.append(frame)
                go_on.set()
                async for frame in follow:
                    followed.append(frame)
    call = followed[1].call if isinstance(followed[1], ToolCalled) else None
    assert call is not None
    assert joined([f for f in followed if not isinstance(f, TurnDone)]) == [  # type: ignore[misc]
        AssistantText(text="Let me look."),
        ToolCalled(call=call),
        ToolResult(call=call, status="ok", content="green tea", label=Label()),
        AssistantText(text="You like green tea."),
    ]
    assert followed[-1] == TurnDone(text="You like green tea.")


async def test_a_finished_turns_events_are_rebuilt_from_its_records(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (
        Step(text="Looking.", tool_calls=[("recall", '{"query": "tea"}'), ("nosuch", "{}")]),
        Step(tool_calls=[("clock", "{}")]),
        Step(text="Green tea."),
    )
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.answers["recall"] = ("green tea", Label(class_=proto.Class.private))
        session = (await open_session(h.chat)).session
        live = await collect(h, Say(session=session, text="tea?", ref="mm:ffff"))
        await collect(h, Say(session=session, text="and?", ref="mm:gggg"))
        followed = await collect(h, TurnFollow(session=session, ref="mm:ffff"))
    # the records tell what the live stream told, text joined
    assert followed == [*joined(live[:-1]), live[-1]]  # type: ignore[arg-type]
    statuses = [f.status for f in followed if isinstance(f, ToolResult)]
    assert statuses == ["ok", "error", "ok"]
    assert live[-1] == TurnDone(text="Green tea.")


async def test_following_a_message_that_never_arrived_says_so(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model(Step(text="Hi.")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        session = (await open_session(h.chat)).session
        await collect(h, Say(session=session, text="hi", ref="mm:cccc"))
        frames = await collect(h, TurnFollow(session=session, ref="mm:dddd"))
        again = await collect(h, TurnFollow(session=session, ref="mm:cccc"))
    assert len(frames) == 1
    assert isinstance(frames[0], Error)
    assert frames[0].code == "turn-not-found"
    assert again == [AssistantText(text="Hi."), TurnDone(text="Hi.")]


async def test_a_turn_that_stopped_before_its_answer_is_interrupted(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    # the model fails: the user record stays, with no answer after it
    with serve_scripted_model(Step(status=500)) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        session = (await open_session(h.chat)).session
        first = await collect(h, Say(session=session, text="hi", ref="mm:eeee"))
        frames = await collect(h, TurnFollow(session=session, ref="mm:eeee"))
    assert isinstance(first[-1], Error)
    assert len(frames) == 1
    assert isinstance(frames[0], Error)
    assert frames[0].code == "turn-interrupted"


async def test_a_user_record_without_a_ref_is_written_as_before(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model(Step(text="Hi.")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        session = (await open_session(h.chat)).session
        await collect(h, Say(session=session, text="hi"))
    assert set(records(h, session)[0]) == {"type", "time", "content"}


def test_a_ref_longer_than_64_characters_is_a_bad_frame() -> None:
    frame = json.dumps({"kind": "turn_follow", "session": "chat-abcdefgh", "ref": "x" * 65})
    with pytest.raises(proto.ProtocolError, match="64"):
        proto.decode_body(frame.encode())
