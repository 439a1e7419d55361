"""Roles killed at bad moments, with real processes: the turn says what happened, and the
session goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from scripted_model import Step
from stack import running_stack

import proto
from proto import ApprovalPending, Say, SessionOpen, SessionOpened, TurnDone

CAP_S = 60


async def test_brokerd_killed_while_an_approval_waits_ends_the_call_not_the_turn(
    short_dir: Path,
) -> None:
    edit = json.dumps({"action": "add", "file": "memory", "text": "x"})
    steps = (Step(tool_calls=[("memory", edit)]), Step(text="Noted."), Step(text="Still here."))
    with running_stack(short_dir, *steps) as stack, trio.fail_after(CAP_S):
        chat = stack.socket(proto.OWNER_LOOP)
        opened = await proto.call(chat, SessionOpen(origin="e2e"), SessionOpened)
        frames: list[Any] = []
        async with proto.open_call(chat, Say(session=opened.session, text="remember x")) as turn:
            async for frame in turn:
                frames.append(frame)
                if isinstance(frame, ApprovalPending):
                    stack.processes.pop("brokerd").kill()  # SIGKILL, the owner not asked yet
        # The turn ends as turns end: the call's result says brokerd went away.
        assert frames[-1] == TurnDone(text="Noted.")
        results = [f for f in frames if isinstance(f, proto.ToolResult)]
        assert [r.status for r in results] == ["error"]
        assert "brokerd closed the call without an answer" in results[0].content
        stack.start("brokerd")
        async with proto.open_call(chat, Say(session=opened.session, text="go on")) as turn:
            next_turn = [frame async for frame in turn]
        assert next_turn[-1] == TurnDone(text="Still here.")
    assert "Traceback" not in stack.log("loopd")
