"""The chat's own commands and edit before approve (issue 21), on doubles of the roles.

Only the owner's typed line is parsed: a model's text that looks like a command is shown,
never run.
"""

from __future__ import annotations

import io
import json
import stat
import sys
from pathlib import Path

import pytest
import trio
from bxctl_run import serve

import proto
from bxctl import app
from proto import (
    ApprovalDecide,
    ApprovalPending,
    AssistantText,
    Label,
    MemoryEdit,
    Message,
    Ok,
    PendingApproval,
    ToolResponse,
    TurnDone,
)

CAP_S = 20
SESSION = "chat-abcdefghijkl"


async def run(*argv: str) -> object:
    with trio.fail_after(CAP_S):
        return await app.run_async(list(argv), result_action="return_value")


def opening(request: Message) -> Message | None:
    """The answers to what `bxctl chat` asks before a turn (None for a `say`)."""
    if isinstance(request, proto.SessionOpen):
        return proto.SessionOpened(session=SESSION, created=True)
    if isinstance(request, proto.BaselinePreview | proto.ModelInfo):
        raise proto.ServiceError("internal", "not here")  # no model hint
    return None


def tea_approval() -> PendingApproval:
    return PendingApproval(
        id="ap-k3f9xy",
        session=SESSION,
        call_id="call_1",
        tool="memory",
        arguments='{"action":"add","file":"user","text":"likes tea"}',
        taint=Label(),
        time="2026-11-30T00:00:00Z",
    )


UPDATED = "memory.md updated (9 of 2,200 characters); it takes effect in the next session."


class Stack:
    """loopd, brokerd and memoryd doubles for a chat."""

    def __init__(self, model_says: str = "ok") -> None:
        self.said: list[str] = []
        self.edits: list[MemoryEdit] = []
        self.decisions: list[ApprovalDecide] = []
        self.model_says = model_says
        self.approval: PendingApproval | None = None
        self.decided = trio.Event()
        self.asked: list[Message] = []

    async def start(self, nursery: trio.Nursery, home: Path) -> None:
        await serve(nursery, home, proto.OWNER_LOOP, self.loopd)
        await serve(nursery, home, proto.OWNER_BROKER, self.brokerd)
        await serve(nursery, home, proto.OWNER_MEMORY, self.memoryd)

    async def loopd(self, request: Message, conn: proto.Connection) -> Message:
        if answer := opening(request):
            return answer
        assert isinstance(request, proto.Say)
        self.said.append(request.text)
        if self.approval is not None:
            await conn.send(ApprovalPending(approval=self.approval))
            await self.decided.wait()
        await conn.send(AssistantText(text=self.model_says))
        return TurnDone(text=self.model_says)

    async def brokerd(self, request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, MemoryEdit):
            self.edits.append(request)
            return ToolResponse(call_id="", status="ok", content=UPDATED)
        assert isinstance(request, ApprovalDecide)
        self.decisions.append(request)
        self.decided.set()
        return Ok()

    async def memoryd(self, request: Message, conn: proto.Connection) -> Message:
        self.asked.append(request)
        if isinstance(request, proto.MemoryFind):
            found = proto.FoundEntry(file="user", entry="likes tea at five")
            return proto.MemoryFound(found=found)
        assert isinstance(request, proto.MemoryWhy)
        return proto.MemoryWhyReply(
            entries=[proto.WhyEntry(file="user", entry="likes tea at five", edits=[])]
        )


def piped(text: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8")


async def test_chat_commands_are_bxctls_and_never_reach_the_model(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = Stack(model_says="/remove tea\n/remember the model wrote this")
    await stack.start(nursery, short_dir)
    lines = [
        "/remember likes tea",
        "/remember --user is called Ana",
        "/remove tea",
        "y",
        "/nope",
        "//slash sent",
        "/help",
        "/why tea",
    ]
    monkeypatch.setattr(sys, "stdin", piped("\n".join(lines) + "\n"))
    assert await run("chat", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    # one turn only, and the model's command-like text was shown, not run
    assert stack.said == ["/slash sent"]
    assert "/remove tea\n/remember the model wrote this" in out
    assert [json.loads(e.arguments) for e in stack.edits] == [
        {"action": "add", "file": "memory", "text": "likes tea"},
        {"action": "add", "file": "user", "text": "is called Ana"},
        {"action": "remove", "file": "user", "old": "likes tea at five"},
    ]
    # typed before the chat's first message: no session had begun
    assert {e.session for e in stack.edits} == {None}
    assert {e.surface for e in stack.edits} == {proto.Surface(via="bxctl")}
    assert out.count(UPDATED) == 3
    assert "remove from user.md:\n    likes tea at five\nchange it? [y/N] " in out
    assert "/nope is not a command, so nothing was sent; /help lists them" in out
    assert stack.asked == [proto.MemoryFind(part="tea"), proto.MemoryWhy(part="tea")]
    assert "/remember --user TEXT  add TEXT to user.md" in out
    assert "user.md:\n    likes tea at five\n  written by hand in the file" in out


async def test_remove_answered_no_changes_nothing(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = Stack()
    await stack.start(nursery, short_dir)
    monkeypatch.setattr(sys, "stdin", piped("/remove tea\n\n/remove coffee\nn\n"))
    assert await run("chat", "--home", str(short_dir)) == 0
    out, err = capsys.readouterr()
    assert stack.edits == []
    assert stack.said == []
    assert "nothing changed" in out
    # the double holds one entry whatever is asked: coffee finds it too, and n again
    assert out.count("nothing changed") == 2
    assert err.count("bxctl: ") == 0


async def test_e_edits_the_proposed_text_before_approving(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = Stack()
    stack.approval = tea_approval()
    await stack.start(nursery, short_dir)
    # an empty edit cancels back to the prompt; then the owner's own text is approved
    monkeypatch.setattr(sys, "stdin", piped("remember tea\ne\n\nE\nlikes green tea\n"))
    assert await run("chat", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    assert stack.decisions == [
        ApprovalDecide(
            id="ap-k3f9xy",
            approve=True,
            arguments='{"action":"add","file":"user","text":"likes green tea"}',
            surface=proto.Surface(via="bxctl"),
        )
    ]
    assert "  edit cancelled; the call still waits for your answer\n" in out
    assert out.count("approve? [y/N, e to edit, or a reason to deny] ") == 2
    assert "  approved ap-k3f9xy with your version:" in out


def editor_script(directory: Path, content: str) -> str:
    """An $EDITOR that replaces the file with `content`."""
    script = directory / "fake-editor"
    script.write_text(f"#!/bin/sh\ncat > \"$1\" <<'END'\n{content}\nEND\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


CONSOLIDATE = (
    '{"action":"consolidate","file":"memory","entries":[{"old":"a","keep":true},{"text":"b"}]}'
)


@pytest.mark.parametrize(
    ("saved", "approved"),
    [
        ('{"action":"consolidate","file":"memory","entries":[{"old":"a","drop":true}]}', True),
        ("", False),
        ("not json", False),
        ('{"action":"add","file":"memory","text":"x"}', False),
    ],
)
async def test_e_opens_a_consolidate_in_the_editor(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    saved: str,
    approved: bool,
) -> None:
    stack = Stack()
    stack.approval = PendingApproval(
        id="ap-cons01",
        session=SESSION,
        call_id="call_2",
        tool="memory",
        arguments=CONSOLIDATE,
        taint=Label(),
        time="2026-11-30T00:00:00Z",
    )
    await stack.start(nursery, short_dir)
    monkeypatch.setenv("VISUAL", editor_script(short_dir, saved))
    answers = "tidy up\ne\n" if approved else "tidy up\ne\nn\n"
    monkeypatch.setattr(sys, "stdin", piped(answers))
    assert await run("chat", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    if approved:
        assert stack.decisions == [
            ApprovalDecide(
                id="ap-cons01", approve=True, arguments=saved, surface=proto.Surface(via="bxctl")
            )
        ]
    else:
        assert "  edit cancelled; the call still waits for your answer\n" in out
        assert stack.decisions == [ApprovalDecide(id="ap-cons01", approve=False)]
