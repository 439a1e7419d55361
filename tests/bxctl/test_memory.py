"""The owner's levers on the command line (issue 21), against test doubles of brokerd and memoryd.

`memory add|replace|remove|why|undo`, `approvals approve --text` and `sessions show
--baseline`: what each sends, and each sentence it prints.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import msgspec
import pytest
import trio
from bxctl_run import run, serve, write_session

import proto
from bxctl import CommandError, app
from proto import (
    AppliedEdit,
    ApprovalDecide,
    Approvals,
    FoundEntry,
    HandChange,
    HistoryEdit,
    Label,
    MemoryAmbiguous,
    MemoryEdit,
    MemoryFind,
    MemoryFound,
    MemoryHistoryReply,
    MemoryNotFound,
    MemoryWhy,
    MemoryWhyReply,
    Message,
    NoSuchEdit,
    Ok,
    OwnerApproved,
    OwnerEdit,
    PendingApproval,
    Surface,
    ToolResponse,
    UndoHandChange,
    UndoPlan,
    UndoPlanned,
    WhyEdit,
    WhyEntry,
)

UPDATED = "memory.md updated (31 of 2,200 characters); it takes effect in the next session."
BXCTL = Surface(via="bxctl")


class Roles:
    """brokerd and memoryd doubles: canned answers to what bxctl asks, and what it sent."""

    def __init__(self, *, answer: str = UPDATED) -> None:
        self.answer = answer
        self.status: proto.Status = "ok"
        self.edits: list[MemoryEdit] = []
        self.asked: list[Message] = []
        self.found: Message = MemoryNotFound()
        self.why: list[WhyEntry] = []
        self.plan: Message = NoSuchEdit()
        self.journal: list[proto.JournalLine] = []

    async def start(self, nursery: trio.Nursery, home: Path) -> None:
        await serve(nursery, home, proto.OWNER_BROKER, self.brokerd)
        await serve(nursery, home, proto.OWNER_MEMORY, self.memoryd)

    async def brokerd(self, request: Message, conn: proto.Connection) -> Message:
        assert isinstance(request, MemoryEdit)
        self.edits.append(request)
        return ToolResponse(call_id="", status=self.status, content=self.answer)

    async def memoryd(self, request: Message, conn: proto.Connection) -> Message:
        self.asked.append(request)
        match request:
            case proto.MemoryHistory(before=before):
                # pages of 10 from the end, as memoryd pages a frame's worth
                end = len(self.journal) if before is None else before
                start = max(0, end - 10)
                page = self.journal[start:end]
                edits = [HistoryEdit(id=proto.edit_id(j), line=j) for j in page]
                return MemoryHistoryReply(edits=edits, older=start)
            case MemoryFind():
                return self.found
            case proto.UndoPlan():
                return self.plan
            case MemoryWhy():
                return MemoryWhyReply(entries=self.why)
        raise AssertionError(f"unexpected {request!r}")


def found(text: str, file: proto.MemoryFile = "memory") -> MemoryFound:
    return MemoryFound(found=FoundEntry(file=file, entry=text))


def entry(text: str, file: str = "memory", edits: list[WhyEdit] | None = None) -> WhyEntry:
    return WhyEntry(file=file, entry=text, edits=edits or [])  # type: ignore[arg-type]


def sent(edit: MemoryEdit) -> dict[str, object]:
    decoded: dict[str, object] = json.loads(edit.arguments)
    return decoded


async def test_add_sends_the_owners_edit_and_prints_the_spec_sentence(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    await roles.start(nursery, short_dir)
    assert await run("memory", "add", "I prefer answers in UTC", "--home", str(short_dir)) == 0
    assert roles.edits == [
        MemoryEdit(
            arguments='{"action":"add","file":"memory","text":"I prefer answers in UTC"}',
            surface=BXCTL,
        )
    ]
    assert capsys.readouterr().out == UPDATED + "\n"
    assert await run("memory", "add", "likes tea", "--file", "user", "--home", str(short_dir)) == 0
    assert sent(roles.edits[-1]) == {"action": "add", "file": "user", "text": "likes tea"}


async def test_a_refused_edit_prints_the_sentence_and_exits_1(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    over = (
        "memory.md would be 2,350 of 2,200 characters; "
        "use consolidate to move entries to the archive."
    )
    roles = Roles(answer=over)
    roles.status = "error"
    await roles.start(nursery, short_dir)
    assert await run("memory", "add", "x" * 300, "--home", str(short_dir)) == 1
    assert capsys.readouterr().out == over + "\n"


async def test_remove_names_the_whole_entry_memoryd_found(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    roles.found = found("Owner prefers answers in UTC.\nAlways.")
    await roles.start(nursery, short_dir)
    assert await run("memory", "remove", " in UTC ", "--yes", "--home", str(short_dir)) == 0
    assert roles.asked == [MemoryFind(part="in UTC")]
    assert sent(roles.edits[0]) == {
        "action": "remove",
        "file": "memory",
        "old": "Owner prefers answers in UTC.\nAlways.",
    }
    out = capsys.readouterr().out
    assert "remove from memory.md:\n    Owner prefers answers in UTC.\n    Always.\n" in out
    assert out.endswith(UPDATED + "\n")
    home = ("--home", str(short_dir))
    assert await run("memory", "remove", "x", "--file", "user", "--yes", *home) == 0
    assert roles.asked[-1] == MemoryFind(part="x", file="user")


async def test_remove_without_a_terminal_or_yes_changes_nothing_and_says_how(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    roles = Roles()
    roles.found = found("Owner prefers answers in UTC.")
    await roles.start(nursery, short_dir)
    with pytest.raises(CommandError) as refused:
        await run("memory", "remove", "UTC", "--home", str(short_dir))
    assert "standard input is not a terminal; nothing was changed" in str(refused.value)
    assert "--yes" in str(refused.value)
    assert roles.edits == []


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "changed"), [("y\n", True), ("\n", False), ("no\n", False)])
async def test_replace_asks_y_n_on_a_terminal(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    changed: bool,
) -> None:
    roles = Roles()
    roles.found = found("likes tea", "user")
    await roles.start(nursery, short_dir)
    monkeypatch.setattr(sys, "stdin", Tty(answer))
    code = await run("memory", "replace", "tea", "likes green tea", "--home", str(short_dir))
    out = capsys.readouterr().out
    assert "replace in user.md:\n    likes tea\nwith:\n    likes green tea\n" in out
    if changed:
        assert code == 0
        assert sent(roles.edits[0]) == {
            "action": "replace",
            "file": "user",
            "old": "likes tea",
            "text": "likes green tea",
        }
    else:
        assert code == 1
        assert roles.edits == []
        assert out.endswith("nothing changed\n")


async def test_no_match_or_several_list_the_candidates_rendered_and_exit_1(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    roles.found = MemoryAmbiguous(
        entries=[
            FoundEntry(file="memory", entry="likes tea\u202e"),
            FoundEntry(file="user", entry="tea at 5"),
        ]
    )
    await roles.start(nursery, short_dir)
    assert await run("memory", "remove", "tea", "--yes", "--home", str(short_dir)) == 1
    assert capsys.readouterr().out.splitlines() == [
        "2 entries hold tea; give more of the one you mean:",
        "  memory.md:",
        "      likes tea\\u{202e}",
        "  user.md:",
        "      tea at 5",
    ]
    roles.found = MemoryNotFound()
    assert await run("memory", "remove", "coffee", "--yes", "--home", str(short_dir)) == 1
    assert capsys.readouterr().out == (
        "no entry of memory.md or user.md holds coffee; bxctl memory show shows them all\n"
    )
    assert roles.edits == []


async def test_a_part_too_long_to_name_an_entry_is_refused_before_asking(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    roles = Roles()
    await roles.start(nursery, short_dir)
    for command in ("remove", "why"):
        with pytest.raises(
            CommandError, match="at most 2,000 characters of it; that part is 2,001"
        ):
            await run("memory", command, "x" * 2001, "--home", str(short_dir))
    assert roles.asked == []


def why_edit(**changes: object) -> WhyEdit:
    base = WhyEdit(
        id="ed-abc234",
        time="2026-11-30T08:00:00Z",
        action="add",
        file="user.md",
        session="mm-abcdefghij",
        call="call_1",
        approval="ap-k3f9xy",
        decided=OwnerApproved(surface=Surface(via="mattermost", user="alice", post="p0st1d")),
        taint=Label(untrusted=True),
        owner_said="remember I like tea\u202e",
        previous=None,
    )
    return msgspec.structs.replace(base, **changes)


async def test_why_tells_where_each_entry_came_from(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    roles.why = [
        entry(
            "likes green tea",
            "user",
            [
                why_edit(
                    id="ed-new234",
                    action="replace",
                    session=proto.OWNER_SESSION,
                    call="owner-1",
                    approval=None,
                    decided=OwnerEdit(surface=Surface(via="bxctl", uid=1000)),
                    taint=None,
                    owner_said=None,
                    previous="likes tea",
                ),
                why_edit(),
                why_edit(id="ed-old234", decided=None, taint=None, owner_said=None),
            ],
        ),
        entry("tea by hand"),
    ]
    await roles.start(nursery, short_dir)
    assert await run("memory", "why", "tea", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    assert roles.asked == [MemoryWhy(part="tea")]
    assert "user.md:\n    likes green tea\n" in out
    assert "  ed-new234  2026-11-30T08:00:00Z  replace user.md  outside any session" in out
    assert "    your own edit, in the terminal (uid 1000)\n" in out
    assert "    before this edit it read:\n      likes tea\n" in out
    assert (
        "  ed-abc234  2026-11-30T08:00:00Z  add user.md  session mm-abcdefghij  call call_1" in out
    )
    assert "    approved by you on Mattermost (@alice, post p0st1d)  (approval ap-k3f9xy)\n" in out
    assert "    the session's label when decided: private, untrusted\n" in out
    assert "    ! the session had read untrusted content" in out
    assert "    you had said:\n      remember I like tea\\u{202e}\n" in out
    assert "    decided before boxmaker recorded who decided" in out
    assert "memory.md:\n    tea by hand\n  written by hand in the file (no edit recorded)" in out
    assert await run("memory", "why", "tea", "--json", "--home", str(short_dir)) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed[1] == {"file": "memory", "entry": "tea by hand", "edits": []}
    roles.why = []
    assert await run("memory", "why", "coffee", "--home", str(short_dir)) == 1
    assert "no entry of memory.md, user.md or archive.md holds coffee" in capsys.readouterr().out


def applied(action: str, before: list[str], after: list[str], **more: object) -> AppliedEdit:
    return AppliedEdit(
        time=str(more.pop("time", "2026-11-30T08:00:00Z")),
        session=str(more.pop("session", "chat-abcdefghij")),
        call="c1",
        approval="ap1",
        action=action,  # type: ignore[arg-type]
        file=more.pop("file", "memory.md"),  # type: ignore[arg-type]
        before=before,
        after=after,
        **more,  # type: ignore[arg-type]
    )


async def test_undo_shows_memoryds_plan_and_sends_it_naming_the_edit(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    last = applied("add", ["a", "c"], ["a", "c", "likes tea"])
    undo = proto.MemoryRemove(file="memory", old="likes tea")
    roles.plan = UndoPlanned(id=proto.edit_id(last), edit=last, undo=undo)
    await roles.start(nursery, short_dir)
    assert await run("memory", "undo", "--yes", "--home", str(short_dir)) == 0
    assert roles.asked == [UndoPlan()]
    assert roles.edits[-1] == MemoryEdit(
        arguments='{"action":"remove","file":"memory","old":"likes tea"}',
        surface=BXCTL,
        undoes=proto.edit_id(last),
    )
    out = capsys.readouterr().out
    assert f"edit {proto.edit_id(last)}: add memory.md" in out
    assert "its undo would:\nremove from memory.md:\n    likes tea\n" in out
    assert out.endswith(UPDATED + "\n")
    assert await run("memory", "undo", " ed-abcdef ", "--yes", "--home", str(short_dir)) == 0
    assert roles.asked[-1] == UndoPlan(edit="ed-abcdef")
    with pytest.raises(CommandError, match=r"'ed-nope' is not an edit id"):
        await run("memory", "undo", "ed-nope", "--yes", "--home", str(short_dir))


async def test_a_stale_undo_prints_the_refusal_and_exits_1(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = (
        'memory.md has no entry "likes tea"; the file may have changed since the edit was '
        "proposed, so nothing was changed."
    )
    roles = Roles(answer=stale)
    roles.status = "error"
    last = applied("add", [], ["likes tea"])
    roles.plan = UndoPlanned(
        id=proto.edit_id(last), edit=last, undo=proto.MemoryRemove(file="memory", old="likes tea")
    )
    await roles.start(nursery, short_dir)
    assert await run("memory", "undo", "--yes", "--home", str(short_dir)) == 1
    assert capsys.readouterr().out.endswith(stale + "\n")


async def test_undo_of_a_hand_change_or_of_nothing_says_what_to_do(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    await roles.start(nursery, short_dir)
    assert await run("memory", "undo", "--yes", "--home", str(short_dir)) == 1
    assert capsys.readouterr().out == "there is no memory edit to undo yet\n"
    hand = HandChange(time="2026-11-30T08:00:00Z", file="memory.md", before=["a"], after=["b"])
    roles.plan = UndoHandChange(id=proto.edit_id(hand), change=hand)
    assert await run("memory", "undo", "--yes", "--home", str(short_dir)) == 1
    assert "is a change made by hand in memory.md" in capsys.readouterr().out
    assert roles.edits == []


async def test_history_shows_each_edits_id_and_its_json_too(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    edit = applied(
        "add", [], ["one"], decided=OwnerEdit(surface=Surface(via="bxctl"), undoes="ed-zzzzzz")
    )
    hand = HandChange(time="2026-11-30T09:00:00Z", file="user.md", before=[], after=["b"])
    own = applied("add", [], ["two"], time="2026-11-30T07:00:00Z", session=proto.OWNER_SESSION)
    roles.journal = [own, edit, hand]
    await roles.start(nursery, short_dir)
    assert await run("memory", "history", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{proto.edit_id(hand)}  2026-11-30T09:00:00Z  user.md changed outside")
    assert f"{proto.edit_id(edit)}  2026-11-30T08:00:00Z  add memory.md  session chat-" in out
    assert f"{proto.edit_id(own)}  2026-11-30T07:00:00Z  add memory.md  outside any session" in out
    assert "(undoes ed-zzzzzz)" in out
    assert f"`bxctl memory undo ID --home {short_dir}` undoes one" in out
    assert await run("memory", "history", "--json", "--home", str(short_dir)) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(e["id"], e["kind"]) for e in shown] == [
        (proto.edit_id(hand), "hand_change"),
        (proto.edit_id(edit), "applied"),
        (proto.edit_id(own), "applied"),
    ]
    assert shown[1]["after"] == ["one"]


async def test_history_shows_the_newest_edits_and_asks_only_for_their_pages(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = Roles()
    roles.journal = [
        HandChange(time=f"2026-11-30T09:{n:02d}:00Z", file="user.md", before=[], after=[f"e{n}"])
        for n in range(25)
    ]
    await roles.start(nursery, short_dir)
    home = str(short_dir)

    def shown(*args: str) -> tuple[list[str], str, int]:
        asked = len(roles.asked)
        assert app(["memory", "history", *args, "--home", home], result_action="return_value") == 0
        out, err = capsys.readouterr()
        times = [line.split()[1] for line in out.splitlines() if line.startswith("ed-")]
        return times, err, len(roles.asked) - asked

    newest, err, pages = await trio.to_thread.run_sync(shown)
    assert newest == [f"2026-11-30T09:{n:02d}:00Z" for n in range(24, 4, -1)]
    assert err == f"5 older: `bxctl memory history --limit 25 --home {home}`, or `--all`\n"
    assert pages == 2  # not the third, oldest page
    every, err, pages = await trio.to_thread.run_sync(shown, "--all")
    assert (len(every), err, pages) == (25, "", 3)
    few, err, pages = await trio.to_thread.run_sync(shown, "--limit", "3", "--file", "user")
    assert (len(few), pages) == (3, 1)
    assert err.startswith("22 older: `bxctl memory history --file user --limit 25")


def pending(arguments: str, tool: str = "memory") -> PendingApproval:
    return PendingApproval(
        id="ap-k3f9xy",
        session="chat-abcdefghij",
        call_id="call_1",
        tool=tool,
        arguments=arguments,
        taint=Label(),
        time="2026-11-30T08:00:00Z",
    )


async def test_approve_with_text_sends_the_owners_version_of_the_arguments(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions: list[ApprovalDecide] = []
    waiting = [
        pending('{"action":"replace","file":"user","old":"likes tea","text":"loves tea"}'),
    ]

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.ApprovalsList):
            return Approvals(pending=waiting)
        assert isinstance(request, ApprovalDecide)
        decisions.append(request)
        return Ok()

    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    home = ("--home", str(short_dir))
    assert await run("approvals", "approve", "ap-k3f9xy", "--text", "likes green tea", *home) == 0
    assert decisions == [
        ApprovalDecide(
            id="ap-k3f9xy",
            approve=True,
            arguments=(
                '{"action":"replace","file":"user","old":"likes tea","text":"likes green tea"}'
            ),
            surface=BXCTL,
        )
    ]
    out = capsys.readouterr().out
    assert "approved ap-k3f9xy with your text:\nreplace in user.md:" in out
    with pytest.raises(CommandError, match="no approval ap-other is pending"):
        await run("approvals", "approve", "ap-other", "--text", "x", *home)
    waiting[0] = pending('{"action":"remove","file":"user","old":"likes tea"}')
    with pytest.raises(CommandError, match="is not a memory add or replace"):
        await run("approvals", "approve", "ap-k3f9xy", "--text", "x", *home)
    waiting[0] = pending('{"path":"/etc"}', tool="read_file")
    with pytest.raises(CommandError, match="is not a memory add or replace"):
        await run("approvals", "approve", "ap-k3f9xy", "--text", "x", *home)
    assert len(decisions) == 1


BLOCK = (
    "# soul.md\nBe kind.\n\n# memory.md (9 of 2,200 characters)\nlikes\u202e tea\n\n"
    "# user.md (0 of 1,375 characters)\n(empty)"
)


def test_sessions_show_baseline_prints_the_block_the_session_saw(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (short_dir / "config").mkdir(exist_ok=True)
    write_session(short_dir, "chat-abcdefghij", system="You are boxmaker.\n\nBe brief.\n\n" + BLOCK)
    argv = ["sessions", "show", "chat-abc", "--baseline", "--home", str(short_dir)]
    assert app(argv, result_action="return_value") == 0
    assert capsys.readouterr().out == proto.for_terminal(BLOCK) + "\n"
    assert "likes\\u{202e} tea" in proto.for_terminal(BLOCK)
