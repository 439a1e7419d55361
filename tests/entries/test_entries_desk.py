"""The owner's commands as sans-IO steps, and the answers' two renderings."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import entries
import proto
from entries import Answer, Ask, Block, Confirm, Proposal, Quote, Remove, Undo, line
from proto import (
    FoundEntry,
    MemoryAmbiguous,
    MemoryEdit,
    MemoryFind,
    MemoryFound,
    MemoryNotFound,
    Message,
    ToolResponse,
    UndoPlan,
    UndoPlanned,
)

HERE = proto.Surface(via="bxctl")
UPDATED = "memory.md updated (3 of 2,200 characters); it takes effect in the next session."


def play(steps: entries.Steps[object], replies: list[Message]) -> tuple[list[Ask], object]:
    """Run `steps` with `replies` in order: what it asked, and what it ended with."""
    asked: list[Ask] = []
    try:
        step = next(steps)
        while True:
            asked.append(step)
            step = steps.send(replies[len(asked) - 1])
    except StopIteration as done:
        return asked, done.value


def run(command: entries.OwnerCommand, replies: list[Message]) -> tuple[list[Ask], object]:
    steps = entries.run_command(command, surface=HERE, session=None, where="chat")
    return play(steps, replies)


def test_remove_finds_the_entry_at_memoryd_and_proposes_exactly_its_removal() -> None:
    found = MemoryFound(found=FoundEntry(file="user", entry="Likes tea"))
    asked, result = run(Remove("tea"), [found])
    assert asked == [Ask("memoryd", MemoryFind(part="tea"))]
    assert isinstance(result, Confirm)
    assert result.proposal == Proposal(edit=proto.MemoryRemove(file="user", old="Likes tea"))
    assert entries.to_plain(result.question) == "remove from user.md:\nLikes tea"


def test_a_confirmed_remove_applies_what_it_shows_as_the_owners_edit() -> None:
    found = MemoryFound(found=FoundEntry(file="memory", entry="tea"))
    ok = ToolResponse(call_id="owner-1", status="ok", content=UPDATED)
    asked, result = run(Remove("tea", confirmed=True), [found, ok])
    assert asked[1] == Ask(
        "brokerd",
        MemoryEdit(arguments='{"action":"remove","file":"memory","old":"tea"}', surface=HERE),
    )
    assert isinstance(result, Answer)
    assert result.ok
    assert entries.to_plain(result).endswith(UPDATED)


def test_nothing_found_or_several_found_is_said_and_nothing_is_proposed() -> None:
    _, nothing = run(Remove("milk"), [MemoryNotFound()])
    assert isinstance(nothing, Answer)
    assert not nothing.ok
    assert (
        entries.to_plain(nothing)
        == "no entry of memory.md or user.md holds milk; /memory shows them all"
    )
    several = MemoryAmbiguous(
        entries=[FoundEntry(file="memory", entry="a tea"), FoundEntry(file="user", entry="b tea")],
        omitted=3,
    )
    _, answer = run(Remove("tea"), [several])
    assert isinstance(answer, Answer)
    assert not answer.ok
    assert entries.to_plain(answer).splitlines() == [
        "5 entries hold tea; give more of the one you mean:",
        "memory.md:",
        "a tea",
        "user.md:",
        "b tea",
        "… and 3 more",
    ]


def test_an_undo_proposes_memoryds_plan_and_names_the_edit_it_undoes() -> None:
    edit = proto.AppliedEdit(
        time="2026-11-01T08:00:00Z",
        session=proto.OWNER_SESSION,
        call="owner-1",
        approval="ap-1",
        action="add",
        file="memory.md",
        before=[],
        after=["tea"],
        moved=[],
    )
    plan = UndoPlanned(id="ed-abcdef", edit=edit, undo=proto.MemoryRemove(file="memory", old="tea"))
    asked, result = run(Undo("ed-abcdef"), [plan])
    assert asked == [Ask("memoryd", UndoPlan(edit="ed-abcdef"))]
    assert isinstance(result, Confirm)
    assert result.proposal == Proposal(edit=plan.undo, undoes="ed-abcdef")
    assert entries.to_plain(result.question).splitlines() == [
        "edit ed-abcdef: add memory.md (2026-11-01T08:00:00Z, outside any session)",
        "its undo would:",
        "remove from memory.md:",
        "tea",
    ]
    _, done = play(
        entries.apply_proposal(result.proposal, surface=HERE, session="chat-abcdefgh"),
        [ToolResponse(call_id="c", status="error", content="refused")],
    )
    assert done == Answer((line(Quote("refused")),), ok=False)


def test_a_reply_of_another_kind_is_a_bad_reply_not_a_crash() -> None:
    with pytest.raises(proto.BadReply, match="memoryd answered 'memory_find' with 'ok'"):
        run(Remove("tea"), [proto.Ok()])


hostile = st.text(
    alphabet=st.sampled_from(["a", " ", "\n", "\x1b", "\u202e", "\u200b", "`", "@", "*", "\x07"]),
    min_size=1,
    max_size=30,
)


@given(hostile, hostile)
def test_outside_text_is_shown_exactly_and_harmlessly_in_both_renderings(
    quoted: str, block: str
) -> None:
    answer = Answer((line("the entry ", Quote(quoted), " holds it:"), Block(block, depth=0)))
    terminal = entries.to_terminal(answer)
    assert "\x1b" not in terminal
    assert "\u202e" not in terminal
    assert "\x07" not in terminal
    head, _, body = terminal.partition("\n")
    assert proto.from_terminal(head.removeprefix("the entry ").removesuffix(" holds it:")) == quoted
    assert proto.from_terminal(body) == block
    markdown = entries.to_markdown(answer)
    assert "\x1b" not in markdown
    assert "\u202e" not in markdown


def test_an_edit_shown_before_it_is_applied_names_every_entry_whole() -> None:
    consolidate = proto.parse_memory_args(
        json.dumps(
            {
                "action": "consolidate",
                "file": "memory",
                "entries": [
                    {"old": "a", "keep": True},
                    {"old": "b", "text": "B"},
                    {"old": "c", "move": True},
                    {"text": "d"},
                ],
            }
        )
    )
    shown = entries.to_terminal(entries.describe_edit(consolidate))
    assert shown.splitlines() == [
        "rewrite memory.md to exactly these entries, in this order:",
        "    a",
        "  - b",
        "  + B",
        "  - c",
        "  + d",
    ]
    assert msgspec.json.encode(consolidate) == (
        b'{"action":"consolidate","file":"memory","entries":[{"old":"a","keep":true},'
        b'{"old":"b","text":"B"},{"old":"c","move":true},{"text":"d"}]}'
    )
