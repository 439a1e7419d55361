"""loopd against a scripted model and test doubles of memoryd and brokerd."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
import trio
from loopd_harness import BLOCK, open_session, say, start_harness
from scripted_model import Step, serve_scripted_model

import proto
from proto import ApprovalPending, AssistantText, Baseline, Class, Label, ToolResult, TurnDone

CAP_S = 20


def baseline_of(home: Path, session: str) -> bytes:
    return (home / "sessions" / session / "0.baseline.json").read_bytes()


def log_of(home: Path, session: str) -> list[dict[str, object]]:
    text = (home / "sessions" / session / "0.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.mark.parametrize("stream", [True, False])
async def test_a_plain_turn_streams_text_and_notifies_memoryd(
    nursery: trio.Nursery, short_dir: Path, stream: bool
) -> None:
    with serve_scripted_model(Step(text="Hello, owner. How can I help?")) as model:
        with trio.fail_after(CAP_S):
            h = await start_harness(nursery, short_dir, model.url, stream=stream)
            opened = await open_session(h.chat)
            frames = await say(h.chat, opened.session, "hi")
    assert opened.created
    deltas = [f.text for f in frames if isinstance(f, AssistantText)]
    assert "".join(deltas) == "Hello, owner. How can I help?"
    assert frames[-1] == TurnDone(text="Hello, owner. How can I help?")
    assert h.memoryd.updated == [opened.session]
    records = log_of(h.home, opened.session)
    assert [r["type"] for r in records] == ["user", "assistant"]
    assert records[1]["content"] == "Hello, owner. How can I help?"
    sent = model.request_json(0)
    assert sent["messages"][0] == {"role": "system", "content": "You are boxmaker.\n\n" + BLOCK}
    assert sent["messages"][1] == {"role": "user", "content": "hi"}
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "clock",
        "recall",
        "memory",
        "find_tool",
        "call_tool",
    ]
    assert sent["stream"] is stream


async def test_baseline_holds_system_md_a_blank_line_and_the_block(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model() as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat, "mm-y73sxj3popgwumyccptb56p1ah")
        again = await open_session(h.chat, "mm-y73sxj3popgwumyccptb56p1ah")
    baseline = msgspec.json.decode(baseline_of(h.home, opened.session), type=Baseline)
    assert (opened.created, again.created) == (True, False)
    assert baseline.system == "You are boxmaker.\n\n" + BLOCK
    assert baseline.session == opened.session
    assert [t["function"]["name"] for t in baseline.tools] == [  # type: ignore[index]
        "clock",
        "recall",
        "memory",
        "find_tool",
        "call_tool",
    ]


async def test_memoryd_refusing_fails_the_new_session_and_creates_nothing(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model() as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.memoryd.block = None
        with pytest.raises(proto.RemoteError) as refused:
            await open_session(h.chat)
    assert refused.value.error.code == "memory-unavailable"
    assert refused.value.error.runbook == "memory-unavailable"
    assert "2,300 of 2,200" in refused.value.error.message
    assert not (h.home / "sessions").exists() or list((h.home / "sessions").iterdir()) == []


async def test_memoryd_down_fails_the_new_session_with_the_pointer(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model() as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.loopd.settings.memory_socket.unlink()
        with pytest.raises(proto.RemoteError) as refused:
            await open_session(h.chat)
    assert refused.value.error.runbook == "memory-unavailable"
    assert "memoryd did not answer" in refused.value.error.message


async def test_tool_turn_records_results_with_labels_and_requests_extend(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (
        Step(tool_calls=[("recall", '{"query": "launch"}')]),
        Step(tool_calls=[("call_tool", '{"name": "http_fetch", "arguments": {"url": "u"}}')]),
        Step(text="The launch moved to Thursday."),
    )
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.answers["recall"] = ("[1] session mm-8ass9m…", Label(class_=Class.secret))
        h.brokerd.answers["http_fetch"] = (
            "<html>page</html>",
            Label(class_=Class.public, untrusted=True),
        )
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "when is the launch?")
    assert frames[-1] == TurnDone(text="The launch moved to Thursday.")
    records = log_of(h.home, opened.session)
    assert [r["type"] for r in records] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert (records[2]["class"], records[2]["untrusted"]) == ("secret", False)
    assert (records[4]["class"], records[4]["untrusted"]) == ("public", True)
    # call_tool was unwrapped: brokerd decided on http_fetch and its own arguments
    fetched = h.brokerd.requests[1]
    assert (fetched.call.name, json.loads(fetched.call.arguments)) == ("http_fetch", {"url": "u"})
    # the session's taint travels with each call: private from the start (the owner's
    # words), then secret after the recall's secret result
    assert h.brokerd.requests[0].taint == Label(class_=Class.private, untrusted=False)
    assert h.brokerd.requests[1].taint == Label(class_=Class.secret, untrusted=False)
    # every request is a byte-wise extension of the one before
    for earlier, later in zip(model.requests, model.requests[1:], strict=False):
        assert later.startswith(earlier[:-2])
    assert h.memoryd.updated == [opened.session]  # once, after the finished turn
    results = [f for f in frames if isinstance(f, ToolResult)]
    assert results[1].label == Label(class_=Class.public, untrusted=True)


async def test_no_session_updated_after_a_turn_that_fails_after_tool_calls(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (
        Step(tool_calls=[("clock", "{}")]),
        Step(status=500, text="out of memory"),
    )
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "time?")
    assert isinstance(frames[-1], proto.Error)
    assert frames[-1].code == "model-error"
    assert "HTTP 500: out of memory" in frames[-1].message
    assert h.memoryd.updated == []
    assert [r["type"] for r in log_of(h.home, opened.session)] == [
        "user",
        "assistant",
        "tool_result",
    ]


async def test_approval_pending_reaches_the_chat_client(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    edit = '{"action": "add", "file": "memory", "text": "UTC, always."}'
    steps = (Step(tool_calls=[("memory", edit)]), Step(text="Proposed."))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.ask.add("memory")
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "remember UTC")
    pending = [f for f in frames if isinstance(f, ApprovalPending)]
    assert len(pending) == 1
    assert pending[0].approval.id == "ap1"


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (("launch_missiles", "{}"), "there is no tool named 'launch_missiles'"),
        (("call_tool", "not json"), "call_tool arguments: JSON is malformed"),
        (("call_tool", '{"name": "rm_rf", "arguments": {}}'), "no tool named 'rm_rf'"),
        (("find_tool", '{"query": "read a file"}'), '"name":"read_file"'),
    ],
)
async def test_bad_tool_calls_become_results_the_model_can_act_on(
    nursery: trio.Nursery, short_dir: Path, call: tuple[str, str], says: str
) -> None:
    with serve_scripted_model(Step(tool_calls=[call]), Step(text="ok")) as model:
        with trio.fail_after(CAP_S):
            h = await start_harness(nursery, short_dir, model.url)
            opened = await open_session(h.chat)
            frames = await say(h.chat, opened.session, "go")
    assert frames[-1] == TurnDone(text="ok")
    result = log_of(h.home, opened.session)[2]
    assert says in str(result["content"])
    assert h.brokerd.requests == []


@pytest.mark.parametrize(
    ("step", "says"),
    [
        (Step(raw=b"<html>502 bad gateway</html>"), "not a chat completion"),
        (Step(raw=b'{"choices": []}'), "no choices"),
    ],
)
async def test_malformed_model_replies_end_the_turn_and_keep_the_session(
    nursery: trio.Nursery, short_dir: Path, step: Step, says: str
) -> None:
    with serve_scripted_model(step, Step(text="back")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url, stream=False)
        opened = await open_session(h.chat)
        first = await say(h.chat, opened.session, "one")
        second = await say(h.chat, opened.session, "two")
    assert isinstance(first[-1], proto.Error)
    assert says in first[-1].message
    assert second[-1] == TurnDone(text="back")
    assert [r["type"] for r in log_of(h.home, opened.session)] == ["user", "user", "assistant"]


async def test_model_server_down_names_the_cause(nursery: trio.Nursery, short_dir: Path) -> None:
    with trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, "http://127.0.0.1:9/v1")
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "hello?")
    assert isinstance(frames[-1], proto.Error)
    assert "cannot reach the model server at http://127.0.0.1:9/v1" in frames[-1].message
    assert frames[-1].code == "model-unreachable"
    assert frames[-1].runbook == "model-unavailable"


async def test_a_full_session_refuses_the_turn(nursery: trio.Nursery, short_dir: Path) -> None:
    with serve_scripted_model(Step(text="long", usage=3900)) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url, context_tokens=4096, max_tokens=200)
        opened = await open_session(h.chat)
        first = await say(h.chat, opened.session, "one")
        second = await say(h.chat, opened.session, "two")
    assert first[-1] == TurnDone(text="long")
    assert second[-1] == proto.Error(
        code="session-full", message="this session is full; start a new one"
    )
    assert [r["type"] for r in log_of(h.home, opened.session)] == ["user", "assistant"]


async def test_a_resumed_session_replays_its_baseline_bytes(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model(Step(text="a"), Step(text="b")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat)
        await say(h.chat, opened.session, "one")
        before = baseline_of(h.home, opened.session)
        h.memoryd.block = "# soul.md\nA different soul now."
        await say(h.chat, opened.session, "two")
    assert baseline_of(h.home, opened.session) == before
    assert model.request_json(1)["messages"][0] == model.request_json(0)["messages"][0]


async def test_one_turn_at_a_time_per_session(nursery: trio.Nursery, short_dir: Path) -> None:
    with serve_scripted_model(
        Step(tool_calls=[("memory", '{"action":"add","file":"memory","text":"x"}')]),
        Step(text="done"),
    ) as model:
        with trio.fail_after(CAP_S):
            h = await start_harness(nursery, short_dir, model.url)
            opened = await open_session(h.chat)
            release = trio.Event()
            h.brokerd.gate = release
            results: list[list[proto.Message]] = []

            async def first() -> None:
                results.append(await say(h.chat, opened.session, "one"))

            async with trio.open_nursery() as inner:
                inner.start_soon(first)
                await h.brokerd.arrived.wait()  # the first turn is inside its tool call
                second = await say(h.chat, opened.session, "two")
                release.set()
    assert isinstance(second[-1], proto.Error)
    assert second[-1].code == "turn-in-progress"
    assert results[0][-1] == TurnDone(text="done")


async def test_say_to_an_unknown_or_tricky_session_is_refused(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model() as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        unknown = await say(h.chat, "chat-nosuchsession00", "hi")
    assert isinstance(unknown[-1], proto.Error)
    assert unknown[-1].code == "no-session"


async def test_baseline_preview_is_what_a_new_session_gets(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model() as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        preview = await h.chat.call(proto.BaselinePreview(), proto.BaselinePreviewReply)
        opened = await open_session(h.chat)
    baseline = msgspec.json.decode(baseline_of(h.home, opened.session), type=Baseline)
    assert (preview.system, preview.tools) == (baseline.system, baseline.tools)
    assert preview.model_url == model.url
    made = sorted(p.name for p in (h.home / "sessions").iterdir() if not p.name.startswith("."))
    assert made == [opened.session]  # the catalog (a dot file) is loopd's, not a session


async def test_a_connection_reset_mid_stream_ends_the_turn_with_the_cause(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (Step(text="This answer will be cut off halfway through.", cut=True), Step(text="ok"))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat)
        first = await say(h.chat, opened.session, "one")
        second = await say(h.chat, opened.session, "two")
    assert isinstance(first[-1], proto.Error)
    assert "broke during its answer" in first[-1].message
    assert second[-1] == TurnDone(text="ok")  # the session is still usable
    assert [r["type"] for r in log_of(h.home, opened.session)] == ["user", "user", "assistant"]


async def test_a_reply_with_reasoning_only_finishes_the_turn_empty(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model(Step(reasoning="thinking…")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "hm")
    assert frames[-1] == TurnDone(text="")
    record = log_of(h.home, opened.session)[1]
    assert (record["content"], record["reasoning_content"]) == (None, "thinking…")
    assert h.memoryd.updated == [opened.session]
    # reasoning is kept in the log but never sent back to the model
    assert "thinking" not in json.dumps(model.request_json(0)["messages"])


async def test_a_slow_model_server_times_out_with_the_cause(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (Step(text="late", delay_s=1.5), Step(text="on time"))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url, timeout_s=0.5)
        opened = await open_session(h.chat)
        first = await say(h.chat, opened.session, "one")
        second = await say(h.chat, opened.session, "two")
    assert isinstance(first[-1], proto.Error)
    assert first[-1].message == (f"the model server at {model.url} did not answer within 0.5 s")
    assert (first[-1].code, first[-1].runbook) == ("model-timeout", "model-unavailable")
    assert second[-1] == TurnDone(text="on time")


async def test_html_escaped_arguments_are_an_error_the_model_sees(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    escaped = "{&quot;name&quot;: &quot;read_file&quot;, &quot;arguments&quot;: {}}"
    steps = (Step(tool_calls=[("call_tool", escaped)]), Step(text="sorry"))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "read it")
    assert frames[-1] == TurnDone(text="sorry")
    result = log_of(h.home, opened.session)[2]
    assert str(result["content"]).startswith("error: call_tool arguments: JSON is malformed")
    assert h.brokerd.requests == []


async def test_a_session_taken_back_is_written_again_with_memory_as_it_is_after_a_forget(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    # Its first message too long, the session is taken back; its next one writes it
    # again with a baseline made then. A forget applying meanwhile holds that write
    # back, and a baseline made before it applied is made again after it.
    steps = (Step(text="ok"),)
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url, context_tokens=4096)
        opened = await open_session(h.chat)
        (refused,) = await say(h.chat, opened.session, "x" * 20_000)
        assert isinstance(refused, proto.Error)
        assert refused.code == "message-too-long"
        assert not (h.home / "sessions" / opened.session).exists()
        h.memoryd.block = "The locker code is 4417."
        h.memoryd.served = trio.Event()
        forgetter = h.loopd.forget
        async with trio.open_nursery() as turn, forgetter.writing:  # as a forget's apply
            turn.start_soon(say, h.chat, opened.session, "hello")
            await h.memoryd.served.wait()  # its baseline is made: the code is in it
            forgetter.applied += 1
            h.memoryd.block = "The locker code is [forgotten]."
    written = baseline_of(h.home, opened.session)
    assert b"4417" not in written
    assert b"The locker code is [forgotten]." in written
    assert [r["type"] for r in log_of(h.home, opened.session)] == ["user", "assistant"]
    catalog = (h.home / "sessions" / proto.CATALOG_FILE).read_text()
    assert catalog.count(opened.session) == 1
