"""Issue 12, item 2: a model's tool-call id cannot carry text into brokerd's log.

loopd passes on an id of `[A-Za-z0-9_-]{1,64}`, unique in its message, and replaces any
other with one of its own; the replacement is what the session log records, what
brokerd is asked with, and what the model is sent back with the result.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio
from loopd_harness import open_session, say, start_harness
from scripted_model import Step, serve_scripted_model
from security.hostile import FORGED, SHORT_HOSTILE

from proto import ToolCalled

CAP_S = 20
OWN_ID = re.compile(r"call-[0-9a-f]{16}")
EVIL_ID = "call_1" + FORGED

CALLS: list[tuple[str | None, str]] = [
    (EVIL_ID, "recall"),  # newline, erase-line: replaced
    ("call_ok-1", "clock"),  # plain: kept
    ("call_ok-1", "clock"),  # the same again in one message: replaced
    ("c" * 65, "clock"),  # too long: replaced
    (None, "clock"),  # none: loopd's own
    (SHORT_HOSTILE, "clock"),  # controls, bidi, invisible: replaced
    ("c" * 64, "clock"),  # the longest plain one: kept
]
KEPT = {1: "call_ok-1", 6: "c" * 64}


def tool_call(i: int, call_id: str | None, name: str) -> dict[str, Any]:
    arguments = '{"query": "launch"}' if name == "recall" else "{}"
    call: dict[str, Any] = {"index": i, "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    if call_id is not None:
        call["id"] = call_id
    return call


def completion() -> bytes:
    calls = [tool_call(i, call_id, name) for i, (call_id, name) in enumerate(CALLS)]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


def events() -> bytes:
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [tool_call(i, call_id, name)]}}]}
        for i, (call_id, name) in enumerate(CALLS)
    ]
    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return data + b"data: [DONE]\n\n"


@pytest.mark.parametrize("stream", [True, False])
async def test_unusable_call_ids_are_replaced_and_the_replacement_is_used_throughout(
    nursery: trio.Nursery, short_dir: Path, stream: bool
) -> None:
    raw = events() if stream else completion()
    first = Step(raw=raw, raw_type="text/event-stream" if stream else "application/json")
    with serve_scripted_model(first, Step(text="done")) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url, stream=stream)
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "hi")
    log_path = h.home / "sessions" / opened.session / "0.jsonl"
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    ids = [call["id"] for call in records[1]["tool_calls"]]
    assert len(ids) == len(CALLS)
    for i, call_id in enumerate(ids):
        assert call_id == KEPT[i] if i in KEPT else OWN_ID.fullmatch(call_id), (i, call_id)
    assert len(set(ids)) == len(ids)
    # each result is recorded under the id the call was recorded with
    assert [r["call_id"] for r in records[2:-1]] == ids
    # brokerd was asked with it
    (request,) = h.brokerd.requests
    assert request.call.id == ids[0]
    # the chat client saw it
    assert [f.call.id for f in frames if isinstance(f, ToolCalled)] == ids
    # and the model is sent it back, with each result
    sent = model.request_json(1)["messages"]
    assert [c["id"] for c in sent[2]["tool_calls"]] == ids
    assert [m["tool_call_id"] for m in sent[3:]] == ids
