"""Every core tool call's result, word for word: what the model reads and the log keeps.

The sentences are pinned here as the model has read them since issue 9; a change to how
loopd reads a call (`proto.parse_core_call`) must leave each one as it is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio
from loopd_harness import open_session, say, start_harness
from scripted_model import Step, serve_scripted_model

from proto import Class, Label, ToolCall, ToolResult, TurnDone

CAP_S = 20

READ_FILE = {
    "name": "read_file",
    "description": ("Read a text file from the owner's machine (only folders the owner granted)."),
    "parameters": {
        "type": "object",
        "properties": {
            "path": {
                "description": "absolute path",
                "type": "string",
                "maxLength": 4096,
                "minLength": 1,
            }
        },
        "required": ["path"],
        "additionalProperties": False,
    },
}

CALLS: list[tuple[tuple[str, str], str, str]] = [
    (("clock", "{}"), "ok", "<now>"),
    (("clock", "not json"), "ok", "<now>"),  # clock reads no arguments
    (("find_tool", '{"query": "read a file"}'), "ok", json.dumps([READ_FILE])),
    (
        ("find_tool", '{"query": "zzz"}'),
        "ok",
        "no tool matches 'zzz'; the tools are: read_file, list_dir, http_fetch",
    ),
    (
        ("find_tool", ""),
        "error",
        "error: find_tool arguments: object missing required field `query`",
    ),
    (
        ("find_tool", '{"query": "x", "k": 1}'),
        "error",
        "error: find_tool arguments: object contains unknown field `k`",
    ),
    (
        ("call_tool", "not json"),
        "error",
        "error: call_tool arguments: JSON is malformed: invalid character (byte 4)",
    ),
    (
        ("call_tool", '{"name": "rm_rf", "arguments": {}}'),
        "error",
        "error: no tool named 'rm_rf'; use find_tool (the tools are: read_file, list_dir, "
        "http_fetch)",
    ),
    (
        ("call_tool", '{"name": "recall", "arguments": {"query": "x"}}'),
        "error",
        "error: no tool named 'recall'; use find_tool (the tools are: read_file, list_dir, "
        "http_fetch)",
    ),
    (
        ("launch_missiles", "{}"),
        "error",
        "error: there is no tool named 'launch_missiles'; the tools are clock, recall, "
        "memory, find_tool, call_tool",
    ),
    (("recall", '{"query": "tea"}'), "ok", "green tea"),
    (("call_tool", '{"name": "read_file", "arguments": {"path": "/etc/x"}}'), "ok", "a file"),
]


def _compact(text: str) -> str:
    """`text` as JSON without spaces, the way msgspec writes it, if it is JSON."""
    try:
        return json.dumps(json.loads(text), separators=(",", ":"))
    except ValueError:
        return text


async def test_each_core_call_gets_its_result_word_for_word(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (Step(tool_calls=[call for call, _, _ in CALLS]), Step(text="ok"))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.answers["recall"] = ("green tea", Label(class_=Class.private))
        h.brokerd.answers["read_file"] = ("a file", Label(class_=Class.secret, untrusted=True))
        opened = await open_session(h.chat)
        frames = await say(h.chat, opened.session, "go")
    assert frames[-1] == TurnDone(text="ok")
    results = [f for f in frames if isinstance(f, ToolResult)]
    log = (h.home / "sessions" / opened.session / "0.jsonl").read_text().splitlines()
    recorded = [r for r in map(json.loads, log) if r["type"] == "tool_result"]
    assert len(results) == len(recorded) == len(CALLS)
    for (call, status, content), result, record in zip(CALLS, results, recorded, strict=True):
        assert (result.call.name, result.call.arguments) == call
        assert result.status == status
        if content == "<now>":
            assert re.fullmatch(
                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \([A-Z][a-z]+day\)", result.content
            )
        else:
            assert result.content == _compact(content)
        assert record["content"] == result.content
        assert (record["class"], record["untrusted"]) == (
            result.label.class_.value,
            result.label.untrusted,
        )
    # what loopd says itself is public; what brokerd answers keeps brokerd's label
    assert [r.label for r in results[:-2]] == [Label(class_=Class.public)] * (len(CALLS) - 2)
    assert results[-2].label == Label(class_=Class.private)
    assert results[-1].label == Label(class_=Class.secret, untrusted=True)
    # brokerd gets recall as the model made it, and call_tool's local tool under its id
    recall_id, wrapped_id = results[-2].call.id, results[-1].call.id
    assert [r.call for r in h.brokerd.requests] == [
        ToolCall(id=recall_id, name="recall", arguments='{"query": "tea"}'),
        ToolCall(id=wrapped_id, name="read_file", arguments='{"path":"/etc/x"}'),
    ]
