"""What the owner reads when a message or a session does not fit the model's context.

Three cases told apart: the message alone is longer than the context (its size and the
limit, and nothing is written), the conversation so far leaves too little room for it
(a new session would take it), and the model server refusing a session's first request
for its context (its own words, not "the session is full", which a new one would repeat).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio
from loopd_harness import open_session, say, start_harness
from scripted_model import Step, serve_scripted_model

import proto
from proto import TurnDone

CAP_S = 20


def log_of(home: Path, session: str) -> list[dict[str, object]]:
    text = (home / "sessions" / session / proto.LOG_FILE).read_text()
    return [json.loads(line) for line in text.splitlines()]


def the_error(frames: list[proto.Message]) -> proto.Error:
    [error] = [f for f in frames if isinstance(f, proto.Error)]
    return error


async def test_a_message_longer_than_the_context_says_its_size_and_the_limit(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model(Step(text="Hello.")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url, context_tokens=8192, max_tokens=200)
        opened = await open_session(h.chat)
        refused = the_error(await say(h.chat, opened.session, "x" * 100_000))
        assert not (h.home / "sessions" / opened.session).exists()  # nothing written for it
        after = await say(h.chat, opened.session, "hi")  # and the session goes on
    assert refused.code == "message-too-long"
    assert re.fullmatch(
        r"this message is about 33,334 tokens; this session's model takes 8,192 \(the system "
        r"prompt and the conversation so far take [0-9,]+, and its answer up to 200\): "
        r"shorten it or split it",
        refused.message,
    ), refused.message
    assert after[-1] == TurnDone(text="Hello.")
    [request] = model.requests  # only the turn that went on
    assert b"xxxx" not in request


async def test_a_message_that_fits_a_new_session_but_not_this_one_says_how_much_room_is_left(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    with serve_scripted_model(Step(text="long", usage=3000)) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url, context_tokens=4096, max_tokens=200)
        opened = await open_session(h.chat)
        await say(h.chat, opened.session, "one")
        refused = the_error(await say(h.chat, opened.session, "x" * 3000))
    assert refused.code == "session-full"
    assert re.fullmatch(
        r"this message is about 1,000 tokens, and this session has room for about [0-9,]+ more "
        r"\(its model takes 4,096; the conversation so far takes [0-9,]+\): shorten it, or "
        r"start a new session",
        refused.message,
    ), refused.message
    assert [r["type"] for r in log_of(h.home, opened.session)] == ["user", "assistant"]


async def test_the_servers_refusal_of_a_first_turn_is_said_in_its_words(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    # loopd's config allows more than the server holds, and the server does not say its
    # size: only its refusal tells (as vLLM words it).
    with serve_scripted_model(Step(text="Short is fine.")) as model, trio.fail_after(CAP_S):
        model.context = 600  # in the bytes of a request over 4: a baseline and "hi" fit
        h = await start_harness(nursery, short_dir, model.url, max_tokens=10)
        opened = await open_session(h.chat)
        refused = the_error(await say(h.chat, opened.session, "y" * 2000))
        # taken back whole: no folder, no catalog line; the next message begins it
        assert not (h.home / "sessions" / opened.session).exists()
        assert opened.session not in (h.home / "sessions" / proto.CATALOG_FILE).read_text()
        after = await say(h.chat, opened.session, "hi")
    assert after[-1] == TurnDone(text="Short is fine.")
    assert [r["type"] for r in log_of(h.home, opened.session)] == ["user", "assistant"]
    assert refused.code == "context-refused"
    assert "This model's maximum context length is 600 tokens" in refused.message
    assert refused.message.startswith(
        "the model server refused this session's first message for its context: "
    )
    assert "session is full" not in refused.message
    assert model.refused


async def test_llama_cpps_error_event_on_a_first_turn_is_said_in_its_words(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    event = (
        b'error: {"code":400,"message":"the request exceeds the available context size, '
        b'try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,'
        b'"n_ctx":4096}\n\ndata: [DONE]\n\n'
    )
    step = Step(raw=event, raw_type="text/event-stream")
    with serve_scripted_model(step) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url, stream=True)
        opened = await open_session(h.chat)
        refused = the_error(await say(h.chat, opened.session, "hello"))
    assert refused.code == "context-refused"
    assert "the request exceeds the available context size, try increasing it" in refused.message
    assert "start a new one" not in refused.message
