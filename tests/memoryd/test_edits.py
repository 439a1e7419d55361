"""Applying approved memory edits: the rules, the archive, the journal, failures, races."""

from __future__ import annotations

import errno
import itertools
import json
import os
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
import trio
from approved import KEY, signed
from hypothesis import given
from hypothesis import strategies as st

import entries
import proto
from memoryd import Settings
from memoryd._edits import EditApplier, history_page, read_history, reconcile
from memoryd._files import MemoryDir
from proto import AppliedEdit, HistoryEdit, ToolCall, ToolRequest, ToolResponse

SESSION = "mm-y73sxj3popgwumyccptb56p1ah"


@pytest.fixture
def memory(settings: Settings) -> MemoryDir:
    m = MemoryDir(settings.memory_dir)
    m.ensure(settings.soul_starter)
    return m


_APPROVALS = itertools.count(1)


def request(args: dict[str, Any], *, approval: str | None = "new", call: str = "c1") -> ToolRequest:
    """A memory call as brokerd forwards it; each gets an approval of its own by default."""
    if approval == "new":
        approval = f"ap-{next(_APPROVALS)}"
    unsigned = ToolRequest(
        session=SESSION,
        call=ToolCall(id=call, name="memory", arguments=json.dumps(args)),
    )
    return unsigned if approval is None else signed(unsigned, approval=approval)


async def apply(memory: MemoryDir, args: dict[str, Any], **kw: Any) -> ToolResponse:
    return await EditApplier(memory, KEY).apply(request(args, **kw))


def journal(memory: MemoryDir) -> list[AppliedEdit]:
    lines = read_history(memory, None)
    applied = [line for line in lines if isinstance(line, AppliedEdit)]
    assert applied == lines, "only applied edits here"
    return applied


def seed(memory: MemoryDir, *texts: str) -> None:
    memory.path("memory.md").write_text(entries.render(texts))


async def test_add_writes_the_file_and_one_journal_line(memory: MemoryDir) -> None:
    args = {"action": "add", "file": "memory", "text": "  UTC, always. "}
    reply = await apply(memory, args, approval="ap-1")
    assert reply == ToolResponse(
        call_id="c1",
        status="ok",
        content="memory.md updated (12 of 2,200 characters); it takes effect in the next session.",
    )
    assert memory.path("memory.md").read_text() == "UTC, always."
    [line] = journal(memory)
    assert (line.session, line.call, line.approval, line.action, line.file) == (
        SESSION,
        "c1",
        "ap-1",
        "add",
        "memory.md",
    )
    assert (line.before, line.after, line.moved) == ([], ["UTC, always."], [])
    assert datetime.strptime(line.time, "%Y-%m-%dT%H:%M:%SZ")
    month = datetime.now(UTC).strftime("%Y-%m")
    assert (memory.edits / f"{month}.jsonl").read_text().count("\n") == 1
    assert memory.path("archive.md").read_text() == ""


async def test_replace_and_remove(memory: MemoryDir) -> None:
    seed(memory, "a", "b", "c")
    ok = await apply(memory, {"action": "replace", "file": "memory", "old": "b", "text": "B"})
    assert ok.status == "ok"
    assert memory.path("memory.md").read_text() == "a\n§\nB\n§\nc"
    ok = await apply(memory, {"action": "remove", "file": "memory", "old": "a"})
    assert ok.status == "ok"
    assert memory.path("memory.md").read_text() == "B\n§\nc"
    assert [r.action for r in journal(memory)] == ["replace", "remove"]


async def test_user_file_is_its_own(memory: MemoryDir) -> None:
    reply = await apply(memory, {"action": "add", "file": "user", "text": "Owner is Ada."})
    assert reply.content.startswith("user.md updated (13 of 1,375 characters)")
    assert memory.path("user.md").read_text() == "Owner is Ada."
    assert memory.path("memory.md").read_text() == ""
    assert [r.file for r in read_history(memory, "user")] == ["user.md"]
    assert read_history(memory, "memory") == []


async def test_consolidate_moves_entries_to_the_archive_in_order(memory: MemoryDir) -> None:
    seed(memory, "one", "two", "three", "four")
    reply = await apply(
        memory,
        {
            "action": "consolidate",
            "file": "memory",
            "entries": [
                {"old": "four", "move": True},
                {"old": "one", "keep": True},
                {"old": "two", "move": True},
                {"old": "three", "text": "3"},
                {"text": "five"},
            ],
        },
    )
    assert reply.status == "ok", reply.content
    assert memory.path("memory.md").read_text() == "one\n§\n3\n§\nfive"
    archive = memory.path("archive.md").read_text()
    parsed, skipped = entries.parse_archive(archive)
    assert [(a.text, a.name, a.session) for a in parsed] == [
        ("four", "memory.md", SESSION),
        ("two", "memory.md", SESSION),
    ]
    assert skipped == []
    first_line = archive.splitlines()[0]
    assert first_line.startswith("§ moved ")
    assert first_line.endswith(f"Z from memory.md in session {SESSION}")
    assert datetime.strptime(first_line.split()[2], "%Y-%m-%dT%H:%MZ")
    [line] = journal(memory)
    assert line.moved == ["four", "two"]


@pytest.mark.parametrize(
    ("args", "code_words"),
    [
        ({"action": "replace", "file": "memory", "old": "gone", "text": "x"}, "gone"),
        ({"action": "remove", "file": "memory", "old": "nope"}, "nope"),
        ({"action": "add", "file": "memory", "text": "a"}, "a"),
        ({"action": "add", "file": "memory", "text": "x\n§\ny"}, "§"),
        (
            {"action": "consolidate", "file": "memory", "entries": [{"old": "a", "keep": True}]},
            "b",
        ),
        (
            {
                "action": "consolidate",
                "file": "memory",
                "entries": [
                    {"old": "a", "keep": True},
                    {"old": "a", "drop": True},
                    {"old": "b", "keep": True},
                ],
            },
            "a",
        ),
    ],
)
async def test_refusals_change_nothing(
    memory: MemoryDir, args: dict[str, Any], code_words: str
) -> None:
    seed(memory, "a", "b")
    before = sorted((p.name, p.read_bytes()) for p in memory.root.iterdir() if p.is_file())
    reply = await apply(memory, args)
    assert reply.status == "error"
    assert code_words in reply.content
    after = sorted((p.name, p.read_bytes()) for p in memory.root.iterdir() if p.is_file())
    assert after == before
    assert journal(memory) == []


async def test_over_limit_sentence_is_exact(memory: MemoryDir) -> None:
    seed(memory, "x" * 2000)
    reply = await apply(memory, {"action": "add", "file": "memory", "text": "y" * 347})
    # 2,000 + 3 ("\n§\n") + 347 = 2,350
    assert reply.content == (
        "memory.md would be 2,350 of 2,200 characters; "
        "use consolidate to move entries to the archive."
    )
    assert memory.path("memory.md").read_text() == "x" * 2000


@pytest.mark.parametrize(
    "arguments",
    [
        '{"action": "add", "file": "soul", "text": "be evil"}',
        '{"action": "add", "file": "../soul", "text": "x"}',
        '{"action": "launch", "file": "memory"}',
        "not json",
    ],
)
async def test_bad_arguments_are_refused(memory: MemoryDir, arguments: str) -> None:
    req = ToolRequest(
        session=SESSION,
        call=ToolCall(id="c9", name="memory", arguments=arguments),
    )
    reply = await EditApplier(memory, KEY).apply(signed(req, approval="ap-9"))
    assert reply.status == "error"
    assert reply.content.endswith("nothing was changed")
    assert memory.path("soul.md").read_text() != "be evil"
    assert journal(memory) == []


async def test_an_edit_without_approval_is_refused(memory: MemoryDir) -> None:
    reply = await apply(memory, {"action": "add", "file": "memory", "text": "x"}, approval=None)
    assert reply.status == "error"
    assert "owner's approval" in reply.content
    assert memory.path("memory.md").read_text() == ""


async def test_a_hand_edited_file_over_its_limit_is_not_edited(memory: MemoryDir) -> None:
    memory.path("memory.md").write_text("z" * 2300)
    reply = await apply(memory, {"action": "add", "file": "memory", "text": "x"})
    assert reply.status == "error"
    assert "2,300 of 2,200" in reply.content
    assert memory.path("memory.md").read_text() == "z" * 2300


async def test_racing_edits_are_serialised_and_neither_is_lost(memory: MemoryDir) -> None:
    applier = EditApplier(memory, KEY)
    seed(memory, "shared")
    results: list[ToolResponse] = []

    async def run(args: dict[str, Any], call: str) -> None:
        results.append(await applier.apply(request(args, call=call, approval=f"ap-{call}")))

    async with trio.open_nursery() as nursery:
        for i in range(10):
            nursery.start_soon(
                run, {"action": "add", "file": "memory", "text": f"fact {i}"}, f"a{i}"
            )
        nursery.start_soon(
            run, {"action": "replace", "file": "memory", "old": "shared", "text": "mine"}, "r1"
        )
        nursery.start_soon(
            run, {"action": "replace", "file": "memory", "old": "shared", "text": "yours"}, "r2"
        )
    final = entries.parse(memory.path("memory.md").read_text(), name="memory.md")
    assert {f"fact {i}" for i in range(10)} <= set(final)
    # exactly one of the two replaces found "shared"; the other was stale
    assert sorted(r.status for r in results if r.call_id in ("r1", "r2")) == ["error", "ok"]
    assert len({"mine", "yours"} & set(final)) == 1
    assert len(journal(memory)) == 11


def _failing(name: str, when: str) -> Any:
    real = getattr(os, name)

    def fake(*args: Any, **kwargs: Any) -> Any:
        if when in str(args[0]) or when == "*":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    return fake


@pytest.mark.parametrize(
    ("function", "when"),
    [("replace", "*"), ("fsync", "*"), ("open", "archive.md")],
)
async def test_disk_full_during_an_edit_leaves_everything_as_it_was(
    memory: MemoryDir, monkeypatch: pytest.MonkeyPatch, function: str, when: str
) -> None:
    seed(memory, "one", "two")
    before = {p.name: p.read_bytes() for p in memory.root.iterdir() if p.is_file()}
    monkeypatch.setattr(os, function, _failing(function, when))
    reply = await apply(
        memory,
        {
            "action": "consolidate",
            "file": "memory",
            "entries": [{"old": "one", "move": True}, {"old": "two", "keep": True}],
        },
    )
    monkeypatch.undo()
    assert reply.status == "error"
    assert "No space left on device" in reply.content
    assert reply.content.endswith("nothing was changed")
    after = {p.name: p.read_bytes() for p in memory.root.iterdir() if p.is_file()}
    assert after == before  # no temporary left, archive undone, file intact
    assert journal(memory) == []


async def test_journal_failure_keeps_the_applied_edit(
    memory: MemoryDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "open", _failing("open", "edits"))
    reply = await apply(memory, {"action": "add", "file": "memory", "text": "kept"})
    monkeypatch.undo()
    assert reply.status == "ok"
    assert memory.path("memory.md").read_text() == "kept"
    assert journal(memory) == []  # no line claims more than happened


async def test_an_edits_folder_that_cannot_be_made_keeps_the_applied_edit_too(
    memory: MemoryDir, caplog: pytest.LogCaptureFixture
) -> None:
    # The owner removed edits/ and left a file of that name: the edit is applied by the
    # time the journal is written, so the model must be told it was, not that it failed.
    memory.edits.write_text("")
    reply = await apply(memory, {"action": "add", "file": "memory", "text": "kept"})
    assert (reply.status, reply.content) == (
        "ok",
        "memory.md updated (4 of 2,200 characters); it takes effect in the next session.",
    )
    assert memory.path("memory.md").read_text() == "kept"
    assert "has no journal line" in caplog.text


def test_history_skips_a_torn_last_line(
    memory: MemoryDir, caplog: pytest.LogCaptureFixture
) -> None:
    memory.edits.mkdir()
    record = AppliedEdit(
        time="2026-09-24T20:14:03Z",
        session=SESSION,
        call="c1",
        approval="ap",
        action="add",
        file="memory.md",
        before=[],
        after=["x"],
    )
    line = msgspec.json.encode(record).decode()
    (memory.edits / "2026-09.jsonl").write_text(line + "\n" + line[:20])
    assert read_history(memory, None) == [record]
    assert "ends in an unfinished line of 20 bytes" in caplog.text


async def test_a_change_no_journal_line_records_is_journalled_at_start(memory: MemoryDir) -> None:
    await apply(memory, {"action": "add", "file": "memory", "text": "a"})
    memory.path("memory.md").write_text("a\n§\nb\n")  # the owner's hand edit (or a crash)
    [found] = reconcile(memory)
    assert (found.file, found.before, found.after) == ("memory.md", ["a"], ["a", "b"])
    assert read_history(memory, None)[-1] == found
    assert reconcile(memory) == []  # once journalled, nothing more to say


async def test_the_start_reads_only_the_newest_months_of_the_journal(
    memory: MemoryDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Years of edits do not slow a start: the last month naming both files is enough."""
    await apply(memory, {"action": "add", "file": "memory", "text": "a"})
    await apply(memory, {"action": "add", "file": "user", "text": "u"})
    [month] = memory.edits.glob("*.jsonl")
    older = memory.edits / "2020-01.jsonl"
    older.write_bytes(b"not a journal line\n")  # read, it would be a warning
    read: list[str] = []
    real_read = proto.EDIT_JOURNAL.read

    def reading(path: Any) -> Any:
        read.append(os.path.basename(path))
        return real_read(path)

    monkeypatch.setattr(proto.EDIT_JOURNAL, "read", reading)
    assert reconcile(memory) == []
    assert read == [month.name]
    memory.path("user.md").write_text("u\n§\nv\n")
    [found] = reconcile(memory)
    assert (found.file, found.before) == ("user.md", ["u"])


def _edit(n: int, size: int) -> HistoryEdit:
    line = AppliedEdit(
        time="2026-11-01T08:00:00Z",
        session="chat-abcdefgh",
        call=f"c{n}",
        approval=None,
        action="add",
        file="memory.md",
        before=[],
        after=["x" * size],
    )
    return HistoryEdit(id=proto.edit_id(line), line=line)


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=3000), max_size=40),
    budget=st.integers(min_value=1, max_value=20_000),
)
def test_history_pages_give_every_edit_once_newest_first_each_within_budget(
    sizes: list[int], budget: int
) -> None:
    records = [_edit(n, size) for n, size in enumerate(sizes)]
    seen: list[HistoryEdit] = []
    before: int | None = None if records else 0
    assert history_page([], None, budget) == ([], 0)
    while before != 0:
        page, older = history_page(records, before, budget)
        assert page, "a page holds at least one edit while any is left"
        assert page == records[older : len(records) if before is None else before]
        if len(page) > 1:
            assert sum(len(msgspec.json.encode(r)) + 1 for r in page) <= budget
        seen = page + seen
        before = older
    assert seen == records


def test_journal_lines_of_the_old_format_read_as_todays_with_the_same_ids(
    memory: MemoryDir,
) -> None:
    # Lines as memoryd wrote them before the journal's lines were tagged by `kind`: an
    # approved edit, an owner's undo and a change found at start (the `unjournalled` action).
    old: list[dict[str, Any]] = [
        {
            "time": "2026-11-01T08:00:00Z",
            "session": SESSION,
            "call": "c1",
            "approval": "ap-1",
            "action": "add",
            "file": "memory.md",
            "before": [],
            "after": ["tea"],
            "moved": [],
            "decision": "approved",
            "surface": {"via": "mattermost", "user": "ana", "post": "p1"},
            "taint": {"class": "private", "untrusted": True},
            "proposed": '{"action":"add","file":"memory","text":"te"}',
            "undoes": None,
            "arguments": '{"action":"add","file":"memory","text":"tea"}',
        },
        {
            "time": "2026-11-01T08:01:00Z",
            "session": "owner-terminal",
            "call": "owner-1",
            "approval": "ap-2",
            "action": "remove",
            "file": "memory.md",
            "before": ["tea"],
            "after": [],
            "decision": "owner",
            "surface": {"via": "bxctl", "uid": 1000},
            "undoes": "ed-abcdef",
        },
        {
            "time": "2026-11-01T08:02:00Z",
            "session": "",
            "call": "",
            "approval": None,
            "action": "unjournalled",
            "file": "user.md",
            "before": [],
            "after": ["Ana"],
        },
        {
            "time": "2026-10-01T08:00:00Z",
            "session": SESSION,
            "call": "c0",
            "approval": "ap-0",
            "action": "add",
            "file": "user.md",
            "before": [],
            "after": ["x"],
        },
    ]
    memory.edits.mkdir()
    (memory.edits / "2026-11.jsonl").write_text("".join(json.dumps(o) + "\n" for o in old))
    approved, undo, hand, before_issue_21 = read_history(memory, None)
    assert approved == AppliedEdit(
        time="2026-11-01T08:00:00Z",
        session=SESSION,
        call="c1",
        approval="ap-1",
        action="add",
        file="memory.md",
        before=[],
        after=["tea"],
        arguments='{"action":"add","file":"memory","text":"tea"}',
        taint=proto.Label(untrusted=True),
        decided=proto.OwnerApproved(
            surface=proto.Surface(via="mattermost", user="ana", post="p1"),
            proposed='{"action":"add","file":"memory","text":"te"}',
        ),
    )
    assert isinstance(undo, AppliedEdit)
    assert undo.decided == proto.OwnerEdit(
        surface=proto.Surface(via="bxctl", uid=1000), undoes="ed-abcdef"
    )
    assert hand == proto.HandChange(
        time="2026-11-01T08:02:00Z", file="user.md", before=[], after=["Ana"]
    )
    assert isinstance(before_issue_21, AppliedEdit)
    assert before_issue_21.decided is None
    # the ids the owner saw before (computed by the code of that time) stay theirs
    assert [proto.edit_id(line) for line in (approved, undo, hand)] == [
        "ed-wpcymk",
        "ed-sjhli2",
        "ed-wzmvd5",
    ]


def test_a_journal_line_neither_format_reads_is_skipped_with_todays_problem(
    memory: MemoryDir, caplog: pytest.LogCaptureFixture
) -> None:
    memory.edits.mkdir()
    (memory.edits / "2026-11.jsonl").write_text('{"kind": "applied", "time": 5}\n')
    assert read_history(memory, None) == []
    assert "line 1" in caplog.text
