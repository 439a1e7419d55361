"""A chat client that leaves mid-turn cancels the turn; the session goes on (issue 14)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
import trio
import trio.testing
from loopd_harness import Harness, open_session, say, start_harness
from scripted_model import Step, serve_scripted_model

import proto
from proto import ApprovalPending, TurnDone

CAP_S = 20
EDIT = '{"action": "add", "file": "memory", "text": "x"}'


def types_of(h: Harness, session: str) -> list[str]:
    text = (h.home / "sessions" / session / proto.LOG_FILE).read_text()
    return [json.loads(line)["type"] for line in text.splitlines()]


async def test_leaving_while_the_model_writes_cancels_the_turn(
    nursery: trio.Nursery, short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="loopd")
    token = trio.lowlevel.current_trio_token()
    writing = trio.Event()

    def respond(request: dict[str, object]) -> Step:  # in the model server's thread
        if len(model.requests) == 1:
            trio.from_thread.run_sync(writing.set, trio_token=token)
            time.sleep(5.0)  # a slow model
            return Step(text="a long story")
        return Step(text="Back again.")

    with serve_scripted_model() as model, trio.fail_after(CAP_S):
        model.respond = respond
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat)
        async with h.chat.open_call(proto.Say(session=opened.session, text="tell me")):
            await writing.wait()
        # left: the handler has ended, well before the model would have answered
        assert types_of(h, opened.session) == ["user"]
        assert f"chat client of {opened.session} left" in caplog.text
        frames = await say(h.chat, opened.session, "are you there?")
    assert frames[-1] == TurnDone(text="Back again.")
    assert types_of(h, opened.session) == ["user", "user", "assistant"]


async def test_leaving_during_an_approval_withdraws_it_and_records_the_call(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (Step(tool_calls=[("memory", EDIT)]), Step(text="Understood."))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.ask.add("memory")
        h.brokerd.decided = trio.Event()  # the owner has not decided
        opened = await open_session(h.chat)
        async with h.chat.open_call(proto.Say(session=opened.session, text="remember")) as turn:
            while not isinstance(await turn.receive(), ApprovalPending):
                pass
        await h.brokerd.withdrawn.wait()  # loopd hung up on brokerd, which settles it
        assert types_of(h, opened.session) == ["user", "assistant", "tool_result"]
        log = (h.home / "sessions" / opened.session / proto.LOG_FILE).read_text().splitlines()
        assert json.loads(log[2])["content"].startswith(
            "error: interrupted: this call did not finish (the owner cancelled the turn"
        )
        frames = await say(h.chat, opened.session, "never mind")
    assert frames[-1] == TurnDone(text="Understood.")
    assert model.refused == []


async def test_the_next_message_waits_for_the_cancelled_turn_to_finish(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """The owner who cancels and speaks again at once is answered, not `turn-in-progress`."""
    steps = (Step(tool_calls=[("recall", '{"query": "x"}')]), Step(text="Here."))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.gate = trio.Event()  # the tool call hangs in brokerd
        opened = await open_session(h.chat)
        client, server = trio.testing.memory_stream_pair()
        conn = proto.Connection(server, peer_pid=0, peer_uid=0)
        first: list[proto.Message] = []

        async def turn() -> None:
            first.append(await h.loopd.say(proto.Say(session=opened.session, text="a"), conn))

        nursery.start_soon(turn)
        await h.brokerd.arrived.wait()
        await client.aclose()  # Ctrl-C: the chat client leaves
        await trio.testing.wait_all_tasks_blocked()  # loopd saw it and is cancelling
        h.brokerd.gate.set()
        frames = await say(h.chat, opened.session, "b")
    assert frames[-1] == TurnDone(text="Here.")
    assert [f.code for f in first if isinstance(f, proto.Error)] == ["turn-cancelled"]
    assert h.loopd.sessions_in_use == 0  # neither the cancelled turn nor the waiter stayed


async def test_a_running_turn_still_refuses_a_second_one(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (Step(tool_calls=[("recall", '{"query": "x"}')]), Step(text="done"))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.gate = trio.Event()
        opened = await open_session(h.chat)
        async with trio.open_nursery() as inner:
            inner.start_soon(say, h.chat, opened.session, "one")
            await h.brokerd.arrived.wait()
            with trio.move_on_after(CAP_S):
                second = await say(h.chat, opened.session, "two")
            h.brokerd.gate.set()
    assert isinstance(second[-1], proto.Error)
    assert second[-1].code == "turn-in-progress"


async def test_sessions_no_longer_used_leave_nothing_behind(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    """A Mattermost thread is a session: loopd keeps nothing for one after its turns."""
    sessions = 12
    steps = [Step(text="hi")] * sessions + [Step(tool_calls=[("recall", '{"query": "x"}')])]
    with serve_scripted_model(*steps, Step(text="done")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        for _ in range(sessions):
            opened = await open_session(h.chat)
            assert (await say(h.chat, opened.session, "hello"))[-1] == TurnDone(text="hi")
        assert h.loopd.sessions_in_use == 0
        # a turn that runs, and a say refused beside it
        h.brokerd.gate = trio.Event()
        opened = await open_session(h.chat)
        async with trio.open_nursery() as inner:
            inner.start_soon(say, h.chat, opened.session, "one")
            await h.brokerd.arrived.wait()
            assert h.loopd.sessions_in_use == 1
            refused = await say(h.chat, opened.session, "two")
            h.brokerd.gate.set()
        assert isinstance(refused[-1], proto.Error)
        assert refused[-1].code == "turn-in-progress"
        assert h.loopd.sessions_in_use == 0
