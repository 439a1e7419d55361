"""Every stream shape of `server_streams` through a real turn: loopd, brokerd and memoryd
as processes, the scripted model replaying the server's bytes exactly.

A shape that is an answer must give exactly its assistant record (text, reasoning, calls
joined, the server's token count) and run its calls through the roles; a shape that is a
failure must end the turn with its code and the server's words, and keep nothing of the
answer: the session log holds the user record only.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from scripted_model import Step
from server_streams import SHAPES, Answer, Fails, Shape
from stack import Stack, running_stack

import proto
from proto import Say, SessionOpen, SessionOpened, TurnDone

CAP_S = 60


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """One boxmaker for the whole corpus: each shape gets a session of its own."""
    directory = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    try:
        with running_stack(directory) as running:
            yield running
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def turn(stack: Stack, text: str) -> tuple[str, list[Any]]:
    """Open a session and say `text`; the session and every frame of the turn."""
    frames: list[Any] = []
    with trio.fail_after(CAP_S):
        opened = await proto.call(
            stack.socket(proto.OWNER_LOOP), SessionOpen(origin="e2e"), SessionOpened
        )
        async with proto.open_call(
            stack.socket(proto.OWNER_LOOP), Say(session=opened.session, text=text)
        ) as conversation:
            async for frame in conversation:
                frames.append(frame)
    return opened.session, frames


def records(stack: Stack, session: str) -> list[dict[str, Any]]:
    text = (stack.home / "sessions" / session / proto.LOG_FILE).read_text()
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.id for shape in SHAPES])
async def test_a_real_servers_stream_through_a_real_turn(stack: Stack, shape: Shape) -> None:
    first = Step(raw=shape.raw, raw_type=shape.content_type, split_at=shape.split_at)
    calls = shape.expect.calls if isinstance(shape.expect, Answer) else []
    stack.script(first, *([Step(text="All done.")] if calls else []))
    session, frames = await turn(stack, "when is the launch?")
    match shape.expect:
        case Answer() as answer:
            kept = records(stack, session)
            assert isinstance(frames[-1], TurnDone), frames[-1]
            assistant = kept[1]
            assert assistant["type"] == "assistant"
            assert assistant["content"] == answer.content
            assert assistant["reasoning_content"] == answer.reasoning
            made = [(c["name"], c["arguments"]) for c in assistant["tool_calls"]]
            assert made == answer.calls
            if answer.tokens is not None:
                assert assistant["tokens"] == answer.tokens
            results = [r for r in kept if r["type"] == "tool_result"]
            assert [r["name"] for r in results] == [name for name, _ in answer.calls]
            assert frames[-1] == TurnDone(text="All done." if calls else answer.content or "")
        case Fails() as fails:
            assert isinstance(frames[-1], proto.Error), frames[-1]
            assert frames[-1].code == fails.code
            assert fails.says in frames[-1].message
            if fails.code == "context-refused":  # its only message refused: taken back
                assert not (stack.home / "sessions" / session).exists()
            else:
                assert [r["type"] for r in records(stack, session)] == ["user"]
    assert not stack.model.steps  # every step played: the next shape starts clean
