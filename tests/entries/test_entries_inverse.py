"""The inverse of an applied edit (the owner's undo): exact, and safe when stale."""

from __future__ import annotations

import contextlib

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import entries
from entries import EditRefused, apply_edit, inverse
from proto import (
    ConsolidateItem,
    MemoryAdd,
    MemoryArgs,
    MemoryConsolidate,
    MemoryFile,
    MemoryRemove,
    MemoryReplace,
    parse_memory_args,
)

_CHAR = st.one_of(
    st.sampled_from("aZ09 ,.-é中🙂\u200d\u0301\t§"),
    st.characters(codec="utf-8", exclude_characters="\r\n"),
)
_LINE = st.text(_CHAR, max_size=12)
_HEADER = "§ moved 2026-09-24T20:14Z from memory.md in session mm-y73sxj3popgwumyccptb56p1ah"


def _valid(entry: str) -> bool:
    return bool(entry) and not any(line.strip() == "§" for line in entry.split("\n"))


_SHORT = (
    st.lists(st.one_of(_LINE, st.sampled_from(["a § b", _HEADER])), min_size=1, max_size=3)
    .map(lambda lines: "\n".join(lines).strip())
    .filter(_valid)
)
ENTRY = st.one_of(_SHORT, st.tuples(_SHORT, st.integers(1, 700)).map(lambda t: t[0] + "x" * t[1]))
LIMITS = {"memory": 2200, "user": 1375}
FILES: st.SearchStrategy[MemoryFile] = st.sampled_from(["memory", "user"])


def _fits(entries: list[str], file: MemoryFile) -> bool:
    return len("\n§\n".join(entries)) <= LIMITS[file]


@st.composite
def files(draw: st.DrawFn, file: MemoryFile) -> list[str]:
    """A file memoryd could have written: distinct valid entries within its limit."""
    entries = draw(st.lists(ENTRY, unique=True, max_size=6))
    assume(_fits(entries, file))
    return entries


@st.composite
def edits(draw: st.DrawFn, current: list[str], file: MemoryFile) -> MemoryArgs:
    """An edit of `current`, most of them ones `apply_edit` accepts."""
    actions = ["add", "consolidate"] + (["replace", "remove"] if current else [])
    action = draw(st.sampled_from(actions))
    if action == "add":
        return MemoryAdd(file=file, text=draw(ENTRY))
    if action == "replace":
        return MemoryReplace(file=file, old=draw(st.sampled_from(current)), text=draw(ENTRY))
    if action == "remove":
        return MemoryRemove(file=file, old=draw(st.sampled_from(current)))
    items = [
        draw(
            st.sampled_from(
                [
                    ConsolidateItem(old=entry, keep=True),
                    ConsolidateItem(old=entry, move=True),
                    ConsolidateItem(old=entry, drop=True),
                ]
            )
            | ENTRY.map(lambda text, entry=entry: ConsolidateItem(old=entry, text=text))  # type: ignore[misc]
        )
        for entry in current
    ]
    items += [ConsolidateItem(text=text) for text in draw(st.lists(ENTRY, max_size=3))]
    return MemoryConsolidate(file=file, entries=draw(st.permutations(items)))


@st.composite
def applied(draw: st.DrawFn) -> tuple[MemoryFile, list[str], list[str]]:
    """A file, and the file after an edit `apply_edit` accepted on it."""
    file = draw(FILES)
    before = draw(files(file))
    edit = draw(edits(before, file))
    try:
        outcome = apply_edit(before, edit)
    except EditRefused:
        assume(False)
        raise
    return file, before, list(outcome.entries)


@given(applied())
def test_the_inverse_of_an_applied_edit_restores_the_file_exactly(
    case: tuple[MemoryFile, list[str], list[str]],
) -> None:
    file, before, after = case
    undo = inverse(file, before, after)
    assert list(apply_edit(after, undo).entries) == before
    # what travels to brokerd as JSON parses back to the same edit
    assert parse_memory_args(msgspec.json.encode(undo)) == undo


@given(applied(), st.data())
def test_a_stale_inverse_applies_or_is_refused_and_changes_nothing(
    case: tuple[MemoryFile, list[str], list[str]], data: st.DataObject
) -> None:
    file, before, after = case
    undo = inverse(file, before, after)
    other = data.draw(
        st.one_of(
            st.lists(ENTRY, unique=True, max_size=6),
            st.permutations(after).map(list),
            st.just(after[1:]),
            st.just([*after, "something new"]).filter(lambda e: len(set(e)) == len(e)),
        )
    )
    kept = list(other)
    with contextlib.suppress(EditRefused):
        apply_edit(other, undo)
    assert other == kept


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (["a"], ["a", "b"], MemoryRemove(file="memory", old="b")),
        (["a", "b"], ["a"], MemoryAdd(file="memory", text="b")),
        (["a", "b", "c"], ["a", "x", "c"], MemoryReplace(file="memory", old="x", text="b")),
        (
            ["a", "b", "c"],
            ["a", "c"],
            MemoryConsolidate(
                file="memory",
                entries=[
                    ConsolidateItem(old="a", keep=True),
                    ConsolidateItem(text="b"),
                    ConsolidateItem(old="c", keep=True),
                ],
            ),
        ),
        (
            ["a", "b"],
            ["ab", "n"],
            MemoryConsolidate(
                file="memory",
                entries=[
                    ConsolidateItem(text="a"),
                    ConsolidateItem(text="b"),
                    ConsolidateItem(old="ab", drop=True),
                    ConsolidateItem(old="n", drop=True),
                ],
            ),
        ),
    ],
)
def test_the_inverse_is_the_plainest_edit_that_undoes(
    before: list[str], after: list[str], expected: MemoryArgs
) -> None:
    assert inverse("memory", before, after) == expected


def test_an_edit_encodes_as_the_memory_tools_json_without_nulls() -> None:
    undo = inverse("user", ["a", "b"], ["b"])
    assert msgspec.json.encode(undo).decode() == (
        '{"action":"consolidate","file":"user","entries":[{"text":"a"},{"old":"b","keep":true}]}'
    )
    assert msgspec.json.encode(MemoryRemove(file="memory", old="x")).decode() == (
        '{"action":"remove","file":"memory","old":"x"}'
    )


def test_a_stale_undo_is_refused_with_the_spec_sentence() -> None:
    undo = inverse("memory", ["a"], ["a", "b"])  # undo the add of b
    with pytest.raises(EditRefused) as refused:
        apply_edit(["a", "b changed by hand"], undo)
    assert refused.value.code == "no-match"
    assert str(refused.value).endswith(
        "the file may have changed since the edit was proposed, so nothing was changed."
    )


def test_with_text_changes_only_the_text_of_an_add_or_replace() -> None:
    import json

    add = '{"action":"add","file":"user","text":"Likes tea"}'
    assert json.loads(entries.with_text(add, "Likes green tea") or "") == {
        "action": "add",
        "file": "user",
        "text": "Likes green tea",
    }
    replace = '{"action":"replace","file":"memory","old":"a","text":"b"}'
    assert json.loads(entries.with_text(replace, "c") or "")["old"] == "a"
    assert entries.with_text('{"action":"remove","file":"memory","old":"a"}', "x") is None
    assert entries.with_text(add, "  ") is None
    assert entries.with_text("not json", "x") is None
