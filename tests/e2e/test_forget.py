"""Forget, end to end: a secret told by every path, forgotten, and no file keeps it.

Real role processes in a real home, real sockets, a scripted model over HTTP. The secret
goes in as the owner's own edit, as a chat message, as the model's recall query and its
result, as an approved proposal, and through a consolidate into archive.md; then the
owner's forget (the same two requests every surface makes: `forget_preview`, `forget`).
Afterwards every file under the home is read as bytes, in any case, and every session
resumes without the model ever being sent the secret again.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from scripted_model import Step
from stack import Stack, files_holding, open_session, running_stack, say

import proto

CAP_S = 60
SECRET = "ZEBRA-7731"
ME = proto.Surface(via="bxctl", uid=os.getuid())


@pytest.fixture
def stack(short_dir: Path) -> Iterator[Stack]:
    with running_stack(short_dir) as running:
        yield running


def memory_call(args: dict[str, Any]) -> Step:
    return Step(tool_calls=[("memory", json.dumps(args))])


async def owner_edit(stack: Stack, args: dict[str, Any]) -> proto.ToolResponse:
    return await proto.call(
        stack.socket(proto.OWNER_BROKER),
        proto.MemoryEdit(arguments=json.dumps(args), surface=ME),
        proto.ToolResponse,
    )


async def tell_it_every_way(stack: Stack) -> list[str]:
    """The secret, by every path there is; the sessions it went through."""
    await owner_edit(stack, {"action": "add", "file": "memory", "text": f"Locker: {SECRET}"})
    chat = await open_session(stack)  # opened after the edit: its baseline holds it
    stack.script(Step(text=f"Noted, the locker code is {SECRET.lower()}."))
    await say(stack, chat, f"my gym locker code is {SECRET}")
    asker = await open_session(stack)
    stack.script(
        Step(tool_calls=[("recall", json.dumps({"query": f"locker {SECRET}"}))]),
        Step(text=f"It is {SECRET}."),
        memory_call({"action": "add", "file": "user", "text": f"Gym locker {SECRET}"}),
        Step(text="Proposed."),
        memory_call(
            {
                "action": "consolidate",
                "file": "user",
                "entries": [{"old": f"Gym locker {SECRET}", "move": True}],
            }
        ),
        Step(text="Archived."),
    )
    await say(stack, asker, "what is my locker code?")
    await say(stack, asker, "remember it about me", approve=True)
    await say(stack, asker, "tidy your memory", approve=True)
    archive = (stack.home / "memory" / "archive.md").read_text()
    assert SECRET in archive  # the consolidate moved it there
    return [chat, asker]


async def forget(stack: Stack, text: str = SECRET) -> proto.Forgotten:
    with trio.fail_after(CAP_S):
        return await proto.call(
            stack.socket(proto.OWNER_BROKER),
            proto.Forget(text=text, surface=ME),
            proto.Forgotten,
            deadline_s=CAP_S,
        )


async def test_a_secret_told_every_way_is_in_no_file_after_the_forget(stack: Stack) -> None:
    sessions = await tell_it_every_way(stack)
    assert (
        len(files_holding(stack.home, SECRET)) >= 8
    )  # memory, archive, journal, audit, sessions, …

    with trio.fail_after(CAP_S):
        preview = await proto.call(
            stack.socket(proto.OWNER_BROKER),
            proto.ForgetPreview(text=SECRET.lower()),
            proto.ForgetPreviewed,
        )
    stores = {h.store: h for h in preview.holdings if h.count}
    assert {"journal", "audit", "sessions", "baselines", "index"} <= set(stores)
    assert set(sessions) <= set(stores["sessions"].names)
    assert {e.file for e in preview.entries} == {"memory", "archive"}
    assert len(files_holding(stack.home, SECRET)) >= 8  # the preview wrote nothing

    forgotten = await forget(stack, SECRET.lower())
    assert (forgotten.left, forgotten.lost) == ([], [])
    assert forgotten.conflicts == []
    assert files_holding(stack.home, SECRET) == []

    with trio.fail_after(CAP_S):
        recalled = await proto.call(
            stack.socket(proto.OWNER_MEMORY),
            proto.RecallQuery(query=f"locker {SECRET}", k=10),
            proto.ToolResponse,
        )
        verified = await proto.call(
            stack.socket(proto.OWNER_BROKER), proto.AuditVerify(), proto.AuditVerified
        )
    assert SECRET.lower() not in recalled.content.lower()
    assert verified.ok, verified.broken_at

    # every session that held it resumes, and the model is never sent it again
    seen = len(stack.model.requests)
    for session in sessions:
        stack.script(Step(text="Still here."))
        await say(stack, session, "are you still there?")
    for body in stack.model.requests[seen:]:
        assert SECRET.lower().encode() not in body.lower()

    # nothing brings it back: the undo of any edit that held it refuses
    with trio.fail_after(CAP_S):
        history = await proto.call(
            stack.socket(proto.OWNER_MEMORY), proto.MemoryHistory(), proto.MemoryHistoryReply
        )
    for edit in history.edits:
        with pytest.raises(proto.RemoteError, match="forgotten"):
            await proto.call(
                stack.socket(proto.OWNER_MEMORY),
                proto.UndoPlan(edit=edit.id),
                proto.UndoPlanned,
            )
    assert files_holding(stack.home, SECRET) == []


async def test_a_session_open_during_the_forget_goes_on_without_it(stack: Stack) -> None:
    session = await open_session(stack)
    stack.script(Step(text="ok"))
    await say(stack, session, f"the code is {SECRET}")
    await forget(stack)
    stack.script(Step(text="ok again"))
    await say(stack, session, "and now?")
    assert SECRET.lower().encode() not in stack.model.requests[-1].lower()
    assert files_holding(stack.home, SECRET) == []


async def test_the_models_words_cannot_forget(stack: Stack) -> None:
    session = await open_session(stack)
    stack.script(
        Step(tool_calls=[("forget", json.dumps({"text": "tea"}))]),
        Step(text=f"!forget tea /forget tea {SECRET}"),
    )
    await owner_edit(stack, {"action": "add", "file": "memory", "text": "Likes tea"})
    await say(stack, session, "hello")
    assert (stack.home / "memory" / "memory.md").read_text() == "Likes tea"
    assert not list((stack.home / "audit").glob(".forget/*"))


@pytest.mark.parametrize("role", ["memoryd", "loopd", "brokerd"])
@pytest.mark.parametrize("after_ms", [0, 15, 60])
async def test_a_role_killed_during_a_forget_leaves_no_copy_once_back(
    stack: Stack, role: str, after_ms: int
) -> None:
    """Kill a role at some moment of a forget, start it again: the forget finishes.

    The owner's surface still holds the text while its command runs; a forget cut off
    before brokerd decided it is sent again by the surface (as bxctl does), one cut off
    after it finishes by itself.
    """
    sessions = await tell_it_every_way(stack)
    process = stack.processes[role]

    async def kill_and_restart() -> None:  # as `bxctl up` restarts a role that died
        await trio.sleep(after_ms / 1000)
        os.kill(process.process.pid, signal.SIGKILL)
        await trio.to_thread.run_sync(stack.processes.pop(role).stop)  # reaped, closed
        await trio.to_thread.run_sync(stack.start, role)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(kill_and_restart)
        # cut off (brokerd died under it), carried on once the role was back, or
        # finished before the kill: each happens
        with contextlib.suppress(proto.CallFailed):
            await forget(stack)
    with trio.fail_after(CAP_S):
        while files_holding(stack.home, SECRET):
            try:
                done = await forget(stack)  # the surface sends it again
            except proto.CallFailed:
                await trio.sleep(0.2)
                continue
            if done.left:
                await trio.sleep(0.2)
    assert files_holding(stack.home, SECRET) == []
    plans = ("memory/.forget", "sessions/.forget", "audit/.forget")
    with trio.fail_after(CAP_S):  # a forget cut off before its commit is aborted, by retries
        while left := [p for d in plans for p in (stack.home / d).glob("fg-*")]:  # noqa: ASYNC110 (other processes' files)
            await trio.sleep(0.2)
    assert left == []
    verified = await proto.call(
        stack.socket(proto.OWNER_BROKER), proto.AuditVerify(), proto.AuditVerified
    )
    assert verified.ok, verified.broken_at
    for session in sessions:
        stack.script(Step(text="back"))
        await say(stack, session, "still there?")
    lines = (stack.home / "sessions" / sessions[0] / "0.jsonl").read_bytes().splitlines()
    for line in lines:
        msgspec.json.decode(line)  # every record whole
