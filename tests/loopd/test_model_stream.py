"""loopd's reading of a streamed (SSE) answer, against the scripted model over HTTP."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import httpx
import pytest
import trio
from loopd_harness import open_session, say, start_harness
from scripted_model import Step, serve_scripted_model

import proto
from loopd._config import ModelSection
from loopd._model import (
    ContextExceeded,
    ModelClient,
    ModelError,
    ModelReply,
    ModelTimeout,
    ModelUnreachable,
)
from proto import ToolCall, TurnDone

CAP_S = 20
EMPTY = (
    "the model server sent an empty stream; if it cannot stream with tools, "
    "set [model] stream = false in loopd.toml"
)


async def ask(url: str) -> tuple[ModelReply, list[str]]:
    """One streamed call; the reply and the text deltas passed on."""
    deltas: list[str] = []

    async def on_text(text: str) -> None:
        deltas.append(text)

    client = ModelClient(ModelSection(url=url, stream=True))
    try:
        reply = await client.complete([{"role": "user", "content": "hi"}], [], on_text)
    finally:
        await client.aclose()
    return reply, deltas


async def test_an_event_split_over_several_data_lines_still_parses() -> None:
    text = 'Grüße, owner: a "quoted" word,\na second line and a \\ backslash.'
    calls = [("clock", "{}"), ("recall", '{"query": "launch\\nday"}')]
    step = Step(text=text, reasoning="thinking…", tool_calls=calls, usage=1234)
    multiline = Step(**{**step.__dict__, "multiline": True})
    with serve_scripted_model(step, multiline) as model, trio.fail_after(CAP_S):
        plain, plain_deltas = await ask(model.url)
        split, split_deltas = await ask(model.url)
    assert split == plain
    assert split_deltas == plain_deltas
    assert "".join(split_deltas) == text
    assert split == ModelReply(
        content=text,
        reasoning="thinking…",
        tool_calls=[
            ToolCall(id="call_0_clock", name="clock", arguments="{}"),
            ToolCall(id="call_1_recall", name="recall", arguments='{"query": "launch\\nday"}'),
        ],
        total_tokens=1234,
    )


async def test_a_turn_over_multiline_events_runs_its_tools_and_finishes(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (
        Step(tool_calls=[("clock", "{}")], multiline=True),
        Step(text="It is late.", multiline=True),
    )
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "time?")
    assert frames[-1] == TurnDone(text="It is late.")
    text = (h.home / "sessions" / opened.session / "0.jsonl").read_text()
    records = [json.loads(line) for line in text.splitlines() if line]
    assert [r["type"] for r in records] == ["user", "assistant", "tool_result", "assistant"]


@pytest.mark.parametrize(
    ("raw", "raw_type", "says"),
    [
        pytest.param(
            b'data: {"choices": [\ndata: oops\n\n',
            "text/event-stream",
            "the model server sent a malformed stream chunk: ",
            id="malformed",
        ),
        pytest.param(
            b": keep-alive\n\nid: 1\n\n\nretry: 10\n\nevent: done\ndata: [DONE]\n\n",
            "text/event-stream",
            EMPTY,
            id="no-chunks",
        ),
        pytest.param(b"", "text/event-stream; charset=utf-8", EMPTY, id="empty-body"),
        pytest.param(
            b'data: {"choices": [{"delta": {"content": "cut"}}]}',
            "text/event-stream",
            EMPTY,
            id="event-without-its-blank-line",
        ),
        pytest.param(
            b"<html><body>502 Bad Gateway\x1b[2J</body></html>",
            "text/html",
            "the model server answered a streamed request with text/html, neither an event "
            "stream nor a chat completion: <html><body>502 Bad Gateway\\x1b[2J</body></html>; "
            "if it cannot stream, set [model] stream = false in loopd.toml",
            id="neither-a-stream-nor-a-completion",
        ),
        pytest.param(b"", "application/json", EMPTY, id="an-empty-json-body"),
    ],
)
async def test_streams_without_a_usable_chunk_say_why(raw: bytes, raw_type: str, says: str) -> None:
    step = Step(raw=raw, raw_type=raw_type)
    with (
        serve_scripted_model(step) as model,
        trio.fail_after(CAP_S),
        pytest.raises(ModelError) as failed,
    ):
        await ask(model.url)
    assert str(failed.value).startswith(says)


@pytest.mark.parametrize(
    ("error", "says"),
    [
        pytest.param(
            b'data: {"error": {"code": 500, "message": "slot unavailable"}}\n\n',
            "the model server failed during its answer: slot unavailable "
            "(the text shown so far is not kept)",
            id="llama.cpp",
        ),
        pytest.param(
            b'data: {"object": "error", "message": "engine dead", "code": 500}\n\n',
            "the model server failed during its answer: engine dead "
            "(the text shown so far is not kept)",
            id="vllm",
        ),
        pytest.param(
            b"event: error\ndata: " + json.dumps({"error": "overloaded"}).encode() + b"\n\n",
            "the model server failed during its answer: overloaded "
            "(the text shown so far is not kept)",
            id="error-event",
        ),
    ],
)
async def test_an_error_chunk_after_some_text_fails_the_answer(error: bytes, says: str) -> None:
    text = b'data: {"choices": [{"index": 0, "delta": {"content": "The launch is on"}}]}\n\n'
    step = Step(raw=text + error + b"data: [DONE]\n\n", raw_type="text/event-stream")
    with (
        serve_scripted_model(step) as model,
        trio.fail_after(CAP_S),
        pytest.raises(ModelError) as failed,
    ):
        await ask(model.url)
    assert str(failed.value) == says


async def test_an_error_chunk_about_the_context_is_a_full_session() -> None:
    refusal = b'data: {"error": {"message": "the request exceeds the available context size"}}\n\n'
    step = Step(raw=refusal, raw_type="text/event-stream")
    with (
        serve_scripted_model(step) as model,
        trio.fail_after(CAP_S),
        pytest.raises(ContextExceeded),
    ):
        await ask(model.url)


async def test_a_turn_whose_stream_fails_keeps_no_half_answer(short_dir: Path) -> None:
    text = b'data: {"choices": [{"index": 0, "delta": {"content": "half an ans"}}]}\n\n'
    error = b'data: {"error": {"message": "out of memory"}}\n\n'
    steps = (Step(raw=text + error, raw_type="text/event-stream"), Step(text="Whole answer."))
    async with trio.open_nursery() as nursery:
        with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
            h = await start_harness(nursery, short_dir, model.url, stream=True)
            opened = await open_session(h.chat)
            failed = await say(h.chat, opened.session, "when is the launch?")
            again = await say(h.chat, opened.session, "again?")
        nursery.cancel_scope.cancel()
    assert isinstance(failed[-1], proto.Error)
    assert "out of memory" in failed[-1].message
    assert again[-1] == TurnDone(text="Whole answer.")
    log = (h.home / "sessions" / opened.session / proto.LOG_FILE).read_text()
    assert "half an ans" not in log


async def test_a_streamed_request_answered_with_one_json_completion_uses_it() -> None:
    """A server that ignores `"stream": true` (llama-cpp-python's server with some chat
    handlers answers one `application/json` completion): the answer is whole, so it is used."""
    message = {
        "role": "assistant",
        "content": "It is noon.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
        ],
    }
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    step = Step(raw=json.dumps(body).encode(), raw_type="application/json")
    with serve_scripted_model(step) as model, trio.fail_after(CAP_S):
        reply, deltas = await ask(model.url)
    assert reply.content == "It is noon."
    assert reply.tool_calls == [ToolCall(id="call_1", name="clock", arguments="{}")]
    assert deltas == ["It is noon."]


async def test_a_stream_that_ends_without_a_finish_reason_or_done_is_cut_off() -> None:
    """Ollama (server/routes.go streams `{"error": …}` after its runner dies; the openai
    middleware turns it into one empty chunk and never writes `[DONE]`)."""
    text = b'data: {"choices":[{"index":0,"delta":{"content":"The launch is"}}]}\n\n'
    empty = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    step = Step(raw=text + empty, raw_type="text/event-stream")
    with (
        serve_scripted_model(step) as model,
        trio.fail_after(CAP_S),
        pytest.raises(ModelError) as failed,
    ):
        await ask(model.url)
    assert str(failed.value) == (
        "the model server's stream ended before its answer did (no finish_reason and no "
        "[DONE]: the server or its model runner stopped mid-answer); the text shown so far "
        "is not kept; its log says why; send the message again once it runs"
    )
    assert failed.value.code == "model-error"


@pytest.mark.parametrize(
    "end",
    [
        pytest.param(b"data: [DONE]\n\n", id="done-without-a-finish-reason"),
        pytest.param(
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
            id="a-finish-reason-without-done",
        ),
    ],
)
async def test_a_stream_with_either_end_mark_is_whole(end: bytes) -> None:
    text = b'data: {"choices":[{"index":0,"delta":{"content":"Done."}}]}\n\n'
    step = Step(raw=text + end, raw_type="text/event-stream")
    with serve_scripted_model(step) as model, trio.fail_after(CAP_S):
        reply, _ = await ask(model.url)
    assert reply.content == "Done."


async def test_an_error_field_is_the_servers_words_and_a_context_error_is_a_full_session() -> None:
    """llama.cpp (tools/server/server.cpp, builds of 2025: `server_sent_event(sink, "error",
    error_data)` writes `error: {…}`, then `data: [DONE]`)."""
    other = b'error: {"code":500,"message":"slot \\u001b[31mbusy","type":"server_error"}\n\n'
    full = (
        b'error: {"code":400,"message":"the request exceeds the available context size, '
        b'try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,'
        b'"n_ctx":4096}\n\n'
    )
    steps = [Step(raw=e + b"data: [DONE]\n\n", raw_type="text/event-stream") for e in (other, full)]
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        with pytest.raises(ModelError) as failed:
            await ask(model.url)
        with pytest.raises(ContextExceeded):
            await ask(model.url)
    assert str(failed.value) == "the model server failed during its answer: slot \\x1b[31mbusy"


async def test_the_codes_say_timeout_unreachable_or_error() -> None:
    client = ModelClient(ModelSection(url="http://127.0.0.1:9/v1", stream=True))
    try:
        with trio.fail_after(CAP_S), pytest.raises(ModelUnreachable) as unreachable:
            await client.complete([{"role": "user", "content": "hi"}], [], _ignore)
    finally:
        await client.aclose()
    assert unreachable.value.code == "model-unreachable"
    with serve_scripted_model(Step(text="late", delay_s=1.0)) as model:
        slow = ModelClient(ModelSection(url=model.url, stream=True, timeout_s=0.2))
        try:
            with trio.fail_after(CAP_S), pytest.raises(ModelTimeout) as timed_out:
                await slow.complete([{"role": "user", "content": "hi"}], [], _ignore)
        finally:
            await slow.aclose()
    assert timed_out.value.code == "model-timeout"
    assert "did not answer within 0.2 s" in str(timed_out.value)
    assert ModelError.code == ContextExceeded.code == "model-error"


async def _ignore(text: str) -> None:
    pass


@pytest.mark.parametrize("encoding", [None, "gzip", "deflate"])
async def test_a_content_encoded_stream_is_decoded_and_a_plain_one_read_as_it_comes(
    encoding: str | None,
) -> None:
    # A plain body is read from the response's stream itself, an encoded one through
    # httpx's decoding: both give the same answer, piece by piece.
    events = b"".join(
        b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % word
        for word in (b"One", b" two", b" three.")
    )
    events += b'data: {"choices":[],"usage":{"total_tokens":7}}\n\ndata: [DONE]\n\n'
    headers = {"content-type": "text/event-stream"}
    body = events
    if encoding == "gzip":
        body, headers["content-encoding"] = gzip.compress(events), encoding
    elif encoding == "deflate":
        body, headers["content-encoding"] = zlib.compress(events), encoding

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers, content=body)

    client = ModelClient(ModelSection(url="http://model.invalid/v1", stream=True))
    await client.aclose()
    client._http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    deltas: list[str] = []

    async def on_text(text: str) -> None:
        deltas.append(text)

    try:
        with trio.fail_after(CAP_S):
            reply = await client.complete([{"role": "user", "content": "hi"}], [], on_text)
    finally:
        await client.aclose()
    assert reply == ModelReply(
        content="One two three.", reasoning=None, tool_calls=[], total_tokens=7
    )
    assert "".join(deltas) == "One two three."
