"""The journal's who-decided fields, and memory_why: each entry's story from the journal,
the archive and the session logs."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import inmemory
import msgspec
import pytest
import trio
from approved import KEY, signed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import entries
import proto
from memoryd import Memoryd, Settings
from memoryd._edits import EditApplier, read_history
from memoryd._files import MemoryDir
from memoryd._history import JournalView
from memoryd._why import why
from proto import (
    AppliedEdit,
    AssistantRecord,
    Decided,
    Label,
    MemoryWhy,
    MemoryWhyReply,
    OwnerApproved,
    OwnerEdit,
    Surface,
    ToolCall,
    ToolRequest,
    UserRecord,
)

SESSION = "mm-y73sxj3popgwumyccptb56p1ah"
UNTRUSTED = Label(untrusted=True)
HERE = Surface(via="bxctl", uid=1000)
_CALLS = itertools.count(1)


@pytest.fixture
def memory(settings: Settings) -> MemoryDir:
    m = MemoryDir(settings.memory_dir)
    m.ensure(settings.soul_starter)
    return m


async def apply(
    memory: MemoryDir,
    args: dict[str, Any],
    *,
    decided: Decided | None = None,
    taint: Label | None = None,
    session: str = SESSION,
) -> str:
    """Apply `args` as brokerd forwards an approved call; its call id."""
    number = next(_CALLS)
    call = f"c{number}"
    request = ToolRequest(
        session=session,
        call=ToolCall(id=call, name="memory", arguments=json.dumps(args)),
        taint=taint or Label(),
    )
    reply = await EditApplier(memory, KEY).apply(
        signed(request, approval=f"ap-{number}", decided=decided)
    )
    assert reply.status == "ok", reply.content
    return call


def ask_why(memory: MemoryDir, sessions: Path, part: str) -> MemoryWhyReply:
    return why(memory, sessions, part)


async def test_the_journal_says_who_decided_where_and_under_what_taint(memory: MemoryDir) -> None:
    model = json.dumps({"action": "add", "file": "memory", "text": "likes tea"})
    decided = OwnerApproved(surface=HERE, proposed=model)
    args = {"action": "add", "file": "memory", "text": "likes green tea"}
    await apply(memory, args, decided=decided, taint=UNTRUSTED)
    (line,) = read_history(memory, None)
    assert isinstance(line, AppliedEdit)
    assert (line.decided, line.taint) == (decided, UNTRUSTED)
    assert line.arguments == json.dumps(args)


async def test_the_journal_keeps_which_edit_an_owners_undo_undoes(memory: MemoryDir) -> None:
    decided = OwnerEdit(surface=HERE, undoes="ed-abcdef")
    await apply(memory, {"action": "add", "file": "memory", "text": "x"}, decided=decided)
    (line,) = read_history(memory, None)
    assert isinstance(line, AppliedEdit)
    assert line.decided == decided


def test_an_authority_without_who_decided_is_not_a_frame() -> None:
    # An approved edit always says who decided it, so no journal line brokerd causes
    # lacks it (only lines older than the field do).
    request = signed(
        ToolRequest(session=SESSION, call=ToolCall(id="c1", name="memory", arguments="{}"))
    )
    wire = msgspec.to_builtins(request)
    del wire["authority"]["decided"]
    with pytest.raises(msgspec.ValidationError, match=r"`decided` - at `\$.authority`"):
        msgspec.convert(wire, ToolRequest)


async def test_why_tells_an_add_and_what_the_owner_said(memory: MemoryDir, tmp_path: Path) -> None:
    call = await apply(
        memory,
        {"action": "add", "file": "memory", "text": "Launch is on Thursday."},
        decided=OwnerApproved(surface=HERE),
    )
    log = tmp_path / SESSION / "0.jsonl"
    log.parent.mkdir(parents=True)
    records: list[proto.SessionRecord] = [
        UserRecord(time="2026-09-24T20:00:00Z", content="hello"),
        AssistantRecord(time="2026-09-24T20:00:01Z", content="hi"),
        UserRecord(time="2026-09-24T20:01:00Z", content="remember: launch is Thursday"),
        AssistantRecord(
            time="2026-09-24T20:01:01Z",
            tool_calls=[ToolCall(id=call, name="memory", arguments="{}")],
        ),
    ]
    log.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in records))
    reply = ask_why(memory, tmp_path, "THURSDAY")
    (entry,) = reply.entries
    assert (entry.file, entry.entry) == ("memory", "Launch is on Thursday.")
    (edit,) = entry.edits
    (line,) = read_history(memory, None)
    assert isinstance(line, AppliedEdit)
    assert edit.id == proto.edit_id(line)
    assert (edit.action, edit.session, edit.call, edit.approval) == (
        "add",
        SESSION,
        call,
        line.approval,
    )
    assert (edit.decided, edit.owner_said, edit.previous) == (
        OwnerApproved(surface=HERE),
        "remember: launch is Thursday",
        None,
    )


async def test_why_follows_replaces_back_to_the_first_version(
    memory: MemoryDir, tmp_path: Path
) -> None:
    await apply(memory, {"action": "add", "file": "memory", "text": "tea v1"})
    await apply(memory, {"action": "add", "file": "memory", "text": "coffee"})
    await apply(memory, {"action": "replace", "file": "memory", "old": "tea v1", "text": "tea v2"})
    owner = OwnerEdit(surface=HERE)
    await apply(
        memory,
        {"action": "replace", "file": "memory", "old": "tea v2", "text": "tea v3"},
        decided=owner,
    )
    (entry,) = ask_why(memory, tmp_path, "tea").entries
    assert [(e.action, e.previous) for e in entry.edits] == [
        ("replace", "tea v2"),
        ("replace", "tea v1"),
        ("add", None),
    ]
    assert entry.edits[0].decided == owner
    assert entry.edits[0].owner_said is None  # the owner's own edit


async def test_why_follows_a_consolidate_rewrite_and_a_move_to_the_archive(
    memory: MemoryDir, tmp_path: Path
) -> None:
    await apply(memory, {"action": "add", "file": "memory", "text": "old tea"})
    await apply(memory, {"action": "add", "file": "memory", "text": "old coffee"})
    await apply(
        memory,
        {
            "action": "consolidate",
            "file": "memory",
            "entries": [
                {"old": "old tea", "text": "new tea"},
                {"old": "old coffee", "move": True},
            ],
        },
    )
    reply = ask_why(memory, tmp_path, "tea")
    (tea,) = reply.entries
    assert [(e.action, e.previous) for e in tea.edits] == [
        ("consolidate", "old tea"),
        ("add", None),
    ]
    (coffee,) = ask_why(memory, tmp_path, "coffee").entries
    assert (coffee.file, coffee.entry) == ("archive", "old coffee")
    assert [e.action for e in coffee.edits] == ["consolidate", "add"]


async def test_an_entry_written_by_hand_has_no_edits(memory: MemoryDir, tmp_path: Path) -> None:
    await apply(memory, {"action": "add", "file": "user", "text": "Ana, by the model"})
    text = memory.path("user.md").read_text()
    memory.path("user.md").write_text(entries.render([text, "Ana's cat is Tom"]))
    reply = ask_why(memory, tmp_path, "ana")
    assert [(e.entry, len(e.edits)) for e in reply.entries] == [
        ("Ana, by the model", 1),
        ("Ana's cat is Tom", 0),
    ]
    assert ask_why(memory, tmp_path, "nothing like it") == MemoryWhyReply(entries=[])


async def test_a_huge_answer_is_cut_with_a_count(
    memory: MemoryDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        await apply(memory, {"action": "add", "file": "memory", "text": f"tea {n}"})
    monkeypatch.setattr("memoryd._why.WHY_PAGE_BYTES", 600)
    reply = ask_why(memory, tmp_path, "tea")
    assert len(reply.entries) < 3
    assert reply.omitted == 3 - len(reply.entries)


async def test_memory_why_on_the_owner_socket(settings: Settings) -> None:
    role = Memoryd(settings)
    role.memory.ensure(settings.soul_starter)
    await apply(role.memory, {"action": "add", "file": "memory", "text": "UTC always"})
    with trio.fail_after(10):
        reply = await inmemory.call(
            proto.OWNER_MEMORY, role.handle_admin, MemoryWhy(part="utc"), MemoryWhyReply
        )
    assert [e.entry for e in reply.entries] == ["UTC always"]


_texts = st.text(alphabet='ab "\\é\u2028/<', min_size=1, max_size=6).map(str.strip).filter(bool)
"""Few letters, so that the part asked about is often in an entry; and characters JSON
escapes or might (a quote, a backslash, a line separator, a slash, non-ASCII)."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(st.sampled_from(["add", "replace"]), _texts), min_size=1, max_size=12),
    part=_texts,
)
def test_why_reads_only_the_lines_that_can_hold_the_text_and_tells_the_same_story(
    steps: list[tuple[str, str]], part: str
) -> None:
    # Asked about a few entries, the walk skips a journal line whose bytes do not hold
    # the text as JSON writes it; the story must be the one every line decoded tells.
    with tempfile.TemporaryDirectory() as folder:
        memory = MemoryDir(Path(folder) / "memory")
        starter = Path(folder) / "soul.md"
        starter.write_text("# soul\n")
        memory.ensure(starter)

        async def edits() -> None:
            current: list[str] = []
            for action, text in steps:
                if action == "replace" and current and text not in current:
                    old = current.pop()
                    args = {"action": "replace", "file": "user", "old": old, "text": text}
                elif text not in current:
                    args = {"action": "add", "file": "user", "text": text}
                else:
                    continue
                current.append(text)
                await apply(memory, args)

        trio.run(edits)
        fast = why(memory, Path(folder), part)
        with mock.patch.object(JournalView, "may_hold", return_value=True):
            everything = why(memory, Path(folder), part)
    assert fast == everything
