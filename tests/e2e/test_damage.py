"""Session files damaged by hand, with real processes: a precise refusal, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from scripted_model import Step
from stack import Stack, running_stack

import proto
from proto import Say, SessionOpen, SessionOpened, TurnDone

CAP_S = 60


async def say(stack: Stack, session: str, text: str) -> list[Any]:
    with trio.fail_after(CAP_S):
        async with proto.open_call(
            stack.socket(proto.OWNER_LOOP), Say(session=session, text=text)
        ) as turn:
            return [frame async for frame in turn]


async def test_a_damaged_baseline_refuses_the_turn_saying_which_file(short_dir: Path) -> None:
    with running_stack(short_dir, Step(text="Hello."), Step(text="Again.")) as stack:
        opened = await proto.call(
            stack.socket(proto.OWNER_LOOP), SessionOpen(origin="e2e"), SessionOpened
        )
        assert (await say(stack, opened.session, "hi"))[-1] == TurnDone(text="Hello.")
        stack.restart("loopd")  # the session is read from its files again
        directory = stack.home / "sessions" / opened.session
        baseline = directory / proto.BASELINE_FILE
        whole = baseline.read_bytes()
        baseline.write_bytes(whole[:100])  # an editor cut it short
        log = (directory / proto.LOG_FILE).read_bytes()
        [refused] = await say(stack, opened.session, "still there?")
        assert isinstance(refused, proto.Error)
        assert refused.code == "session-damaged"
        assert refused.runbook == "session-damaged"
        assert refused.message.startswith(
            f"session {opened.session} cannot go on: {baseline} is not a session baseline: "
        )
        assert refused.message.endswith("Nothing was written to it; start a new session")
        assert (directory / proto.LOG_FILE).read_bytes() == log
        baseline.write_bytes(whole)
        (directory / proto.LOG_FILE).unlink()
        (directory / proto.LOG_FILE).mkdir()  # a log that cannot be read: the same refusal
        [refused] = await say(stack, opened.session, "still there?")
        assert isinstance(refused, proto.Error)
        assert refused.code == "session-damaged"
        assert str(directory / proto.LOG_FILE) in refused.message
    assert "Traceback" not in stack.log("loopd")
