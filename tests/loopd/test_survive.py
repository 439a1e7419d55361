"""Sessions that survive (issue 13, item 1): every tool call answered, right after it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from loopd_harness import open_session, say, start_harness
from scripted_model import ScriptedModel, Step, _refusal, serve_scripted_model

import proto
from loopd._history import History
from loopd._sessions import SessionStore
from proto import AssistantRecord, ToolCall, ToolResultRecord, TurnDone, UserRecord

CAP_S = 20
_encoder = msgspec.json.Encoder()

IDS = st.sampled_from(["a", "b", "call_0", "call_1"])
CALLS = st.lists(IDS, max_size=3, unique=True)


def user(text: str = "hi") -> UserRecord:
    return UserRecord(time="t", content=text)


def assistant(*ids: str) -> AssistantRecord:
    return AssistantRecord(
        time="t", content=None, tool_calls=[ToolCall(id=i, name="x", arguments="{}") for i in ids]
    )


def result(call_id: str) -> ToolResultRecord:
    return ToolResultRecord(time="t", call_id=call_id, name="x", content="r")


@st.composite
def healthy_logs(draw: st.DrawFn) -> list[proto.SessionRecord]:
    """Logs as loopd writes them without interruption: each call's result right after it."""
    records: list[proto.SessionRecord] = []
    for _ in range(draw(st.integers(0, 5))):
        records.append(user())
        for ids in draw(st.lists(CALLS, max_size=3)):
            records.append(assistant(*ids))
            records.extend(result(i) for i in ids)
        records.append(assistant())
    return records


@st.composite
def damaged_logs(draw: st.DrawFn) -> list[proto.SessionRecord]:
    """Logs a crash, a kill or a shutdown can leave: results missing, owners' words after."""
    records: list[proto.SessionRecord] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "result"]))
        if kind == "user":
            records.append(user())
        elif kind == "assistant":
            records.append(assistant(*draw(CALLS)))
        else:
            records.append(result(draw(IDS)))
    return records


def pair(records: list[proto.SessionRecord]) -> list[proto.SessionRecord]:
    """The records in the order loopd sends them."""
    return list(History("sys", records, null_content=False).paired())


def unanswered(records: list[proto.SessionRecord]) -> list[ToolCall]:
    """The calls loopd records a result for before it asks the model again."""
    return History("sys", records, null_content=False).unanswered()


def body(records: list[proto.SessionRecord]) -> bytes:
    """The request body loopd sends for these records (options left out)."""
    return History("sys", records, null_content=False).body(b'{"messages":')


@settings(max_examples=300, deadline=None)
@given(records=healthy_logs())
def test_a_log_written_without_interruption_is_sent_as_it_is(
    records: list[proto.SessionRecord],
) -> None:
    assert pair(records) == records
    assert unanswered(records) == []
    assert _refusal(ScriptedModel(), body(records)) is None


@settings(max_examples=300, deadline=None)
@given(records=damaged_logs())
def test_any_log_once_its_calls_are_answered_is_what_a_strict_server_accepts(
    records: list[proto.SessionRecord],
) -> None:
    answered = [*records, *(result(call.id) for call in unanswered(records))]
    assert unanswered(answered) == []
    assert _refusal(ScriptedModel(), body(answered)) is None
    # and answering is all it takes: a prefix that was accepted stays a prefix
    kept = [r for r in pair(answered) if not isinstance(r, ToolResultRecord)]
    assert kept == [r for r in answered if not isinstance(r, ToolResultRecord)]


@pytest.mark.parametrize(
    ("state", "fate"),
    [
        (
            proto.CallStateReply(state="finished", status="ok"),
            "it ran (its status: ok), but its result was lost",
        ),
        (
            proto.CallStateReply(state="unknown"),
            "brokerd has no record of running it, so it did not run",
        ),
    ],
)
async def test_a_bricked_session_goes_on_with_a_strict_server(
    nursery: trio.Nursery, short_dir: Path, state: proto.CallStateReply, fate: str
) -> None:
    # A session as a kill left it: a memory call waiting for approval, never answered,
    # and then two of the owner's messages whose turns failed (HTTP 400 each).
    with serve_scripted_model(Step(text="Back again.")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat)
        h.brokerd.states["call_0"] = state
        store = SessionStore(h.home / "sessions")
        session = store.load(opened.session)
        session.append(user("remember UTC"))
        session.append(assistant("call_0"))
        session.append(user("hello?"))
        session.append(user("are you there?"))
        frames = await say(h.chat, opened.session, "one more try")
    assert frames[-1] == TurnDone(text="Back again.")
    assert model.refused == []
    sent = model.request_json(0)["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "tool", "user", "user", "user"]
    assert sent[3]["tool_call_id"] == "call_0"
    assert sent[3]["content"] == (
        "error: interrupted: this call did not finish (the owner cancelled the turn, or "
        f"boxmaker stopped or a role restarted, before its result came back); {fate}"
    )
    log = (h.home / "sessions" / opened.session / proto.LOG_FILE).read_text().splitlines()
    recorded = json.loads(log[4])
    assert (recorded["type"], recorded["call_id"]) == ("tool_result", "call_0")


async def test_a_turn_cancelled_mid_call_records_the_call_as_interrupted(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (Step(tool_calls=[("recall", '{"query": "x"}')]), Step(text="Done."))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.gate = trio.Event()  # the tool call hangs in brokerd
        opened = await open_session(h.chat)
        with trio.move_on_after(CAP_S) as scope:
            async with trio.open_nursery() as turn:
                turn.start_soon(say, h.chat, opened.session, "find x")
                await h.brokerd.arrived.wait()
                turn.cancel_scope.cancel()  # the drain deadline, or the owner's Ctrl-C
        assert not scope.cancelled_caught
        log = (h.home / "sessions" / opened.session / proto.LOG_FILE).read_text().splitlines()
        assert [json.loads(line)["type"] for line in log] == ["user", "assistant", "tool_result"]
        assert "interrupted" in json.loads(log[2])["content"]
        h.brokerd.gate.set()
        frames = await say(h.chat, opened.session, "again")  # and the session goes on
    assert frames[-1] == TurnDone(text="Done.")
    assert model.refused == []


async def test_the_servers_smaller_context_is_used_before_sending(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    # loopd.toml says 8,192 tokens; the server (llama.cpp, /props) holds 1,200.
    with serve_scripted_model(Step(text="ok")) as model, trio.fail_after(CAP_S):
        model.context, model.report_context = 1200, "llama.cpp"
        h = await start_harness(nursery, short_dir, model.url, context_tokens=8192, max_tokens=100)
        opened = await open_session(h.chat)
        assert (await say(h.chat, opened.session, "hi"))[-1] == TurnDone(text="ok")
        assert h.loopd.model.context_tokens == 1200
        frames = await say(h.chat, opened.session, "x" * 3000)  # would not fit
    [error] = [f for f in frames if isinstance(f, proto.Error)]
    assert error.code == "message-too-long"
    assert "this message is about 1,000 tokens; this session's model takes 1,200 " in error.message
    assert model.refused == []  # loopd knew before sending


async def test_a_servers_context_refusal_after_the_first_turn_is_a_full_session(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    # A server that does not say its context, and refuses a long request as vLLM does.
    with serve_scripted_model(Step(text="ok"), Step(text="never sent")) as model:
        with trio.fail_after(CAP_S):
            model.context = 800
            h = await start_harness(nursery, short_dir, model.url, max_tokens=10)
            opened = await open_session(h.chat)
            assert (await say(h.chat, opened.session, "hi"))[-1] == TurnDone(text="ok")
            frames = await say(h.chat, opened.session, "y" * 4000)
    [error] = [f for f in frames if isinstance(f, proto.Error)]
    assert (error.code, error.message) == ("session-full", "this session is full; start a new one")
    assert model.refused
    assert "maximum context length" in model.refused[0]


async def test_stopping_does_not_wait_for_an_owner_who_is_away(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    edit = '{"action": "add", "file": "memory", "text": "x"}'
    steps = (Step(tool_calls=[("memory", edit)]), Step(text="Understood."))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.ask.add("memory")
        h.brokerd.decided = trio.Event()  # the owner never decides
        opened = await open_session(h.chat)
        frames: list[proto.Message] = []
        said = proto.Say(session=opened.session, text="remember x")
        async with h.chat.open_call(said) as turn:
            # the owner is asked: loopd is waiting for the decision
            while not isinstance(frame := await turn.receive(), proto.ApprovalPending):
                frames.append(frame)
            h.loopd.shutdown.set()  # loopd stops (SIGTERM)
            async for frame in turn:
                frames.append(frame)
    assert frames[-1] == TurnDone(text="Understood.")
    log = (h.home / "sessions" / opened.session / proto.LOG_FILE).read_text().splitlines()
    result = json.loads(log[2])
    assert result["content"] == (
        "denied: the owner did not decide before boxmaker stopped; the call did not run"
    )
