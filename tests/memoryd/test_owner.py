"""memoryd's one meaning of the owner's commands: which entry a part names, what an undo does."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import entries
import proto
from memoryd import Settings
from memoryd._files import MemoryDir
from memoryd._owner import find, plan_undo
from proto import (
    AppliedEdit,
    FoundEntry,
    HandChange,
    MemoryAmbiguous,
    MemoryFound,
    MemoryNotFound,
    NoSuchEdit,
    UndoHandChange,
    UndoPlanned,
)


@pytest.fixture
def memory(settings: Settings) -> MemoryDir:
    m = MemoryDir(settings.memory_dir)
    m.ensure(settings.soul_starter)
    return m


def seed(memory: MemoryDir, mine: list[str], users: list[str] | None = None) -> None:
    memory.path("memory.md").write_text(entries.render(mine))
    memory.path("user.md").write_text(entries.render(users or []))


def test_an_entry_that_is_the_part_wins_over_those_holding_it(memory: MemoryDir) -> None:
    seed(memory, ["I prefer UTC", "UTC"])
    assert find(memory, "UTC", None) == MemoryFound(found=FoundEntry(file="memory", entry="UTC"))


def test_the_part_in_another_case_names_the_entry_when_none_is_it_exactly(
    memory: MemoryDir,
) -> None:
    seed(memory, ["I prefer UTC", "UTC"])
    assert find(memory, "utc", None) == MemoryFound(found=FoundEntry(file="memory", entry="UTC"))


def test_several_entries_holding_it_are_ambiguous_across_both_files(memory: MemoryDir) -> None:
    seed(memory, ["Tea at 5", "Coffee"], ["Likes tea"])
    assert find(memory, "TEA", None) == MemoryAmbiguous(
        entries=[
            FoundEntry(file="memory", entry="Tea at 5"),
            FoundEntry(file="user", entry="Likes tea"),
        ]
    )
    assert find(memory, "tea", "user") == MemoryFound(
        found=FoundEntry(file="user", entry="Likes tea")
    )
    assert find(memory, "milk", None) == MemoryNotFound()


def test_an_archived_entry_is_never_found_to_be_changed(memory: MemoryDir) -> None:
    seed(memory, [])
    memory.append_archive(
        entries.archive_record(
            "Old tea", name="memory.md", session="chat-abcdefgh", moved_at=proto.utc_now()
        )
    )
    assert find(memory, "tea", None) == MemoryNotFound()


_text = st.text(alphabet="abcAB §\n", min_size=1, max_size=8).map(str.strip).filter(bool)


@given(
    mine=st.lists(_text, max_size=5, unique=True),
    users=st.lists(_text, max_size=5, unique=True),
    part=_text,
    file=st.sampled_from([None, "memory", "user"]),
)
def test_find_follows_its_one_rule(
    mine: list[str], users: list[str], part: str, file: proto.MemoryFile | None
) -> None:
    """The closest level wins: exactly the part, then the part in another case, then holding."""
    mine = [e for e in mine if entries.is_entry(e)]
    users = [e for e in users if entries.is_entry(e)]
    # a fresh directory per example: hypothesis runs the body many times per fixture
    with tempfile.TemporaryDirectory() as root:
        memory = MemoryDir(Path(root))
        seed(memory, mine, users)
        answer = find(memory, part, file)
    files: tuple[tuple[proto.MemoryFile, list[str]], ...] = (("memory", mine), ("user", users))
    pool = [FoundEntry(file=f, entry=e) for f, texts in files if file in (None, f) for e in texts]
    holding = [f for f in pool if part.casefold() in f.entry.casefold()]
    levels = (
        [f for f in holding if f.entry == part],
        [f for f in holding if f.entry.casefold() == part.casefold()],
        holding,
    )
    closest = next((level for level in levels if level), [])
    match answer:
        case MemoryNotFound():
            assert not closest
        case MemoryFound(found=found):
            assert closest == [found]
        case MemoryAmbiguous(entries=found, omitted=omitted):
            assert (found, omitted) == (closest, 0)
            assert len(found) > 1


def applied(n: int, before: list[str], after: list[str], file: str = "memory.md") -> AppliedEdit:
    return AppliedEdit(
        time=f"2026-11-01T08:{n // 60:02d}:{n % 60:02d}Z",
        session="chat-abcdefgh",
        call=f"c{n}",
        approval=f"ap-{n}",
        action="add",
        file=file,  # type: ignore[arg-type]
        before=before,
        after=after,
    )


def test_an_undo_is_planned_for_the_last_line_or_any_line_of_the_whole_journal() -> None:
    journal: list[proto.JournalLine] = [applied(n, [], [f"e{n}"]) for n in range(2000)]
    last = plan_undo(journal, None)
    assert last == UndoPlanned(
        id=proto.edit_id(journal[-1]),
        edit=journal[-1],  # type: ignore[arg-type]
        undo=proto.MemoryRemove(file="memory", old="e1999"),
    )
    oldest = plan_undo(journal, proto.edit_id(journal[0]))
    assert isinstance(oldest, UndoPlanned)
    assert oldest.undo == proto.MemoryRemove(file="memory", old="e0")


def test_a_hand_change_and_an_unknown_id_are_not_undone() -> None:
    hand = HandChange(time="2026-11-01T09:00:00Z", file="user.md", before=[], after=["x"])
    journal: list[proto.JournalLine] = [applied(1, [], ["a"]), hand]
    assert plan_undo(journal, None) == UndoHandChange(id=proto.edit_id(hand), change=hand)
    assert plan_undo(journal, "ed-zzzzzz") == NoSuchEdit(edit="ed-zzzzzz")
    assert plan_undo([], None) == NoSuchEdit()


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True), st.data())
def test_a_planned_undo_turns_the_file_back(before: list[str], data: st.DataObject) -> None:
    after = data.draw(st.permutations(before).map(list) | st.just([*before, "new"]))
    plan = plan_undo([applied(1, before, after, "user.md")], None)
    assert isinstance(plan, UndoPlanned)
    assert plan.undo.file == "user"
    assert list(entries.apply_edit(after, plan.undo).entries) == before
