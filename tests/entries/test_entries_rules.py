"""The memory edit rules: every rule as a property, and the sentences by example."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from entries import EditOutcome, EditRefused, apply_edit, over_limit, quote, updated
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

_SAMPLES = (
    "aZ09 ,.-*#éßøÆΩλЖяאבعربىहिन्दी中文字한국어ひらがな🙂🧠\u200d"
    "\u0301\u0308\u0327\u20dd"
    " \t\u00a0\u2003\u3000\u2028\x85"
    "§"
)
_CHAR = st.one_of(
    st.sampled_from(_SAMPLES), st.characters(codec="utf-8", exclude_characters="\r\n")
)
_LINE = st.text(_CHAR, max_size=16)
_HEADER = "§ moved 2026-09-24T20:14Z from memory.md in session mm-y73sxj3popgwumyccptb56p1ah"
_TRICKY = st.sampled_from(["§", " § ", "\t§", "§§", "a § b", _HEADER])
_NEWLINE = st.sampled_from(["\n", "\r\n", "\r"])

NAMES = {"memory": "memory.md", "user": "user.md"}
LIMITS = {"memory": 2200, "user": 1375}
FILES: st.SearchStrategy[MemoryFile] = st.sampled_from(["memory", "user"])
STALE_END = "the file may have changed since the edit was proposed, so nothing was changed."


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _norm(text: str) -> str:
    return _lf(text).strip()


def _valid(entry: str) -> bool:
    return bool(entry) and not any(line.strip() == "§" for line in entry.split("\n"))


def _size(entries: list[str] | tuple[str, ...]) -> int:
    return len("\n§\n".join(entries))


_SHORT = (
    st.lists(st.one_of(_LINE, st.sampled_from(["§§", "a § b"])), min_size=1, max_size=3)
    .map(lambda lines: "\n".join(lines).strip())
    .filter(_valid)
)
# Some entries are long, so that edits go over the limits.
ENTRY = st.one_of(_SHORT, st.tuples(_SHORT, st.integers(1, 900)).map(lambda t: t[0] + "x" * t[1]))
ENTRIES = st.lists(ENTRY, unique=True, max_size=7)
RAW = st.tuples(st.lists(st.one_of(_LINE, _TRICKY), max_size=4), _NEWLINE).map(
    lambda t: t[1].join(t[0])
)
PROPOSED = st.one_of(ENTRY, RAW)


@st.composite
def named(draw: st.DrawFn, entry: str) -> str:
    """`entry` as a model might quote it: CRLF line ends, surrounding whitespace."""
    text = entry.replace("\n", "\r\n") if draw(st.booleans()) else entry
    before = draw(st.sampled_from(["", " ", "\n", "\t\r\n"]))
    after = draw(st.sampled_from(["", " ", "\n", "  \r\n"]))
    return before + text + after


def refusal(current: list[str], args: MemoryArgs) -> EditRefused:
    before = list(current)
    with pytest.raises(EditRefused) as info:
        apply_edit(current, args)
    assert current == before
    return info.value


def assert_fits_or_over_limit(
    result: list[str], file: MemoryFile, outcome: EditOutcome | EditRefused
) -> None:
    """A result that fits is applied; one that does not gets the over-limit sentence."""
    size = _size(result)
    if size <= LIMITS[file]:
        assert isinstance(outcome, EditOutcome)
        assert outcome.entries == tuple(result)
    else:
        assert isinstance(outcome, EditRefused)
        assert outcome.code == "over-limit"
        assert str(outcome) == over_limit(NAMES[file], size, LIMITS[file])


def run(current: list[str], args: MemoryArgs) -> EditOutcome | EditRefused:
    before = list(current)
    try:
        return apply_edit(current, args)
    except EditRefused as exc:
        return exc
    finally:
        assert current == before


# add


@given(ENTRIES, PROPOSED, FILES)
def test_add(current: list[str], text: str, file: MemoryFile) -> None:
    outcome = run(current, MemoryAdd(file=file, text=text))
    entry = _norm(text)
    if not _valid(entry):
        assert isinstance(outcome, EditRefused)
        assert outcome.code == "bad-entry"
    elif entry in current:
        assert isinstance(outcome, EditRefused)
        assert outcome.code == "duplicate"
        assert (
            str(outcome)
            == f"{NAMES[file]} already has the entry {quote(entry)}; nothing was changed."
        )
    else:
        assert_fits_or_over_limit([*current, entry], file, outcome)
    if isinstance(outcome, EditOutcome):
        assert outcome.moved == ()


@given(ENTRIES.filter(bool), st.data(), FILES)
def test_add_an_existing_entry_is_a_duplicate(
    current: list[str], data: st.DataObject, file: MemoryFile
) -> None:
    entry = data.draw(st.sampled_from(current))
    exc = refusal(current, MemoryAdd(file=file, text=data.draw(named(entry))))
    assert exc.code == "duplicate"


# replace


@given(ENTRIES.filter(bool), st.data(), PROPOSED, FILES)
def test_replace(current: list[str], data: st.DataObject, text: str, file: MemoryFile) -> None:
    index = data.draw(st.integers(0, len(current) - 1))
    old = data.draw(named(current[index]))
    outcome = run(current, MemoryReplace(file=file, old=old, text=text))
    entry = _norm(text)
    others = current[:index] + current[index + 1 :]
    if not _valid(entry):
        assert isinstance(outcome, EditRefused)
        assert outcome.code == "bad-entry"
    elif entry in others:
        assert isinstance(outcome, EditRefused)
        assert outcome.code == "duplicate"
        assert str(outcome) == (
            f"{NAMES[file]} would have the entry {quote(entry)} twice; nothing was changed."
        )
    else:
        assert_fits_or_over_limit([*current[:index], entry, *current[index + 1 :]], file, outcome)


@given(st.lists(ENTRY, unique=True, min_size=2, max_size=7), st.data(), FILES)
def test_replace_with_another_entry_is_a_duplicate(
    current: list[str], data: st.DataObject, file: MemoryFile
) -> None:
    old, other = data.draw(st.permutations(current))[:2]
    exc = refusal(current, MemoryReplace(file=file, old=old, text=other))
    assert exc.code == "duplicate"


@given(ENTRIES, PROPOSED, FILES, st.data())
def test_replace_or_remove_a_stale_entry(
    current: list[str], stale: str, file: MemoryFile, data: st.DataObject
) -> None:
    assume(_norm(stale) not in current)
    for args in (
        MemoryReplace(file=file, old=stale, text=data.draw(ENTRY)),
        MemoryRemove(file=file, old=stale),
    ):
        exc = refusal(current, args)
        assert exc.code == "no-match"
        assert str(exc) == f"{NAMES[file]} has no entry {quote(_norm(stale))}; {STALE_END}"


# remove


@given(ENTRIES.filter(bool), st.data(), FILES)
def test_remove(current: list[str], data: st.DataObject, file: MemoryFile) -> None:
    index = data.draw(st.integers(0, len(current) - 1))
    old = data.draw(named(current[index]))
    outcome = apply_edit(current, MemoryRemove(file=file, old=old))
    assert outcome == EditOutcome(tuple(current[:index] + current[index + 1 :]), ())


# consolidate

Fate = Literal["keep", "rewrite", "move", "drop"]


def item(old: str, fate: Fate, text: str | None = None) -> ConsolidateItem:
    return ConsolidateItem(
        old=old,
        keep=True if fate == "keep" else None,
        text=text if fate == "rewrite" else None,
        move=True if fate == "move" else None,
        drop=True if fate == "drop" else None,
    )


@st.composite
def consolidations(
    draw: st.DrawFn, current: list[str], fates: st.SearchStrategy[Fate]
) -> list[ConsolidateItem]:
    """A consolidate naming every entry of `current` once, with some new entries."""
    items = [
        item(draw(named(entry)), fate, draw(PROPOSED) if fate == "rewrite" else None)
        for entry in current
        for fate in [draw(fates)]
    ]
    items += [ConsolidateItem(text=draw(PROPOSED)) for _ in range(draw(st.integers(0, 3)))]
    return draw(st.permutations(items))


ALL_FATES: st.SearchStrategy[Fate] = st.sampled_from(["keep", "rewrite", "move", "drop"])


def expected(items: list[ConsolidateItem]) -> tuple[list[str], list[str]] | str:
    """What a consolidate of a file leaves, by the edit rules: the file and the moved entries."""
    kept: list[str] = []
    moved: list[str] = []
    for it in items:
        if it.old is None or it.text is not None:
            assert it.text is not None
            if not _valid(_norm(it.text)):
                return "bad-entry"
            kept.append(_norm(it.text))
        elif it.keep:
            kept.append(_norm(it.old))
        elif it.move:
            moved.append(_norm(it.old))
    if len(set(kept)) != len(kept):
        return "duplicate"
    if any(line == _HEADER for entry in moved for line in entry.split("\n")):
        return "bad-entry"
    return kept, moved


@given(ENTRIES, st.data(), FILES)
def test_consolidate(current: list[str], data: st.DataObject, file: MemoryFile) -> None:
    items = data.draw(consolidations(current, ALL_FATES))
    outcome = run(current, MemoryConsolidate(file=file, entries=items))
    want = expected(items)
    if isinstance(want, str):
        assert isinstance(outcome, EditRefused)
        assert outcome.code == want
        return
    kept, moved = want
    assert_fits_or_over_limit(kept, file, outcome)
    if isinstance(outcome, EditOutcome):
        assert outcome.moved == tuple(moved)


@given(ENTRIES, FILES)
def test_consolidate_keeping_everything_is_the_identity(
    current: list[str], file: MemoryFile
) -> None:
    items = [item(entry, "keep") for entry in current]
    outcome = run(current, MemoryConsolidate(file=file, entries=items))
    if _size(current) <= LIMITS[file]:
        assert outcome == EditOutcome(tuple(current), ())
    else:
        assert isinstance(outcome, EditRefused)
        assert outcome.code == "over-limit"


@given(ENTRIES, st.data(), FILES)
def test_consolidate_moves_in_the_order_given(
    current: list[str], data: st.DataObject, file: MemoryFile
) -> None:
    order = data.draw(st.permutations(current))
    outcome = apply_edit(
        current, MemoryConsolidate(file=file, entries=[item(e, "move") for e in order])
    )
    assert outcome == EditOutcome((), tuple(order))


@given(ENTRIES.filter(bool), st.data(), FILES)
def test_consolidate_missing_an_entry(
    current: list[str], data: st.DataObject, file: MemoryFile
) -> None:
    items = data.draw(consolidations(current, ALL_FATES))
    left_out = data.draw(st.sets(st.sampled_from(current), min_size=1))
    items = [it for it in items if it.old is None or _norm(it.old) not in left_out]
    exc = refusal(current, MemoryConsolidate(file=file, entries=items))
    assert exc.code == "consolidate-missing"
    missing = [e for e in current if e in left_out]
    listing = (
        f"the entry {quote(missing[0])}"
        if len(missing) == 1
        else "the entries "
        + ", ".join(quote(e) for e in missing[:-1])
        + f" and {quote(missing[-1])}"
    )
    assert str(exc) == (
        f"consolidate must name every entry of {NAMES[file]} once, with keep, text, move or "
        f"drop, but leaves out {listing}; nothing was changed."
    )


@given(ENTRIES.filter(bool), st.data(), FILES)
def test_consolidate_naming_an_entry_twice(
    current: list[str], data: st.DataObject, file: MemoryFile
) -> None:
    items = data.draw(consolidations(current, ALL_FATES))
    twice = data.draw(st.sampled_from(current))
    again = item(data.draw(named(twice)), data.draw(ALL_FATES), data.draw(ENTRY))
    at = data.draw(st.integers(0, len(items)))
    items = [*items[:at], again, *items[at:]]
    exc = refusal(current, MemoryConsolidate(file=file, entries=items))
    assert exc.code == "consolidate-repeated"
    assert str(exc) == (
        f"consolidate names the entry {quote(twice)} of {NAMES[file]} more than once; "
        "name each entry once, so nothing was changed."
    )


@given(ENTRIES, st.data(), PROPOSED, FILES)
def test_consolidate_naming_an_unknown_entry(
    current: list[str], data: st.DataObject, stale: str, file: MemoryFile
) -> None:
    assume(_norm(stale) not in current)
    items = data.draw(consolidations(current, ALL_FATES))
    # Also when it leaves an entry out: a stale edit is reported as such.
    leave_one_out = data.draw(st.booleans())
    if items and leave_one_out:
        items = items[1:]
    at = data.draw(st.integers(0, len(items)))
    items = [*items[:at], item(stale, data.draw(ALL_FATES), data.draw(ENTRY)), *items[at:]]
    exc = refusal(current, MemoryConsolidate(file=file, entries=items))
    assert exc.code == "consolidate-unknown"
    assert str(exc) == f"{NAMES[file]} has no entry {quote(_norm(stale))}; {STALE_END}"


# By example.


def test_add_over_the_limit_sentence() -> None:
    current = ["a" * 2000]
    exc = refusal(current, MemoryAdd(file="memory", text="b" * 347))
    assert exc.code == "over-limit"
    assert str(exc) == (
        "memory.md would be 2,350 of 2,200 characters; "
        "use consolidate to move entries to the archive."
    )


def test_add_then_updated_sentence() -> None:
    outcome = apply_edit(["a" * 1000], MemoryAdd(file="memory", text=" " + "b" * 507 + "\n"))
    assert outcome == EditOutcome(("a" * 1000, "b" * 507))
    assert updated("memory.md", len("\n§\n".join(outcome.entries)), 2200) == (
        "memory.md updated (1,510 of 2,200 characters); it takes effect in the next session."
    )


def test_add_fills_the_limit_exactly() -> None:
    outcome = apply_edit(["u" * 1000], MemoryAdd(file="user", text="v" * 372))
    assert _size(outcome.entries) == 1375
    exc = refusal(["u" * 1000], MemoryAdd(file="user", text="v" * 373))
    assert str(exc) == (
        "user.md would be 1,376 of 1,375 characters; "
        "use consolidate to move entries to the archive."
    )


def test_combining_marks_are_not_normalised() -> None:
    outcome = apply_edit(["cafe\u0301"], MemoryAdd(file="memory", text="caf\u00e9"))
    assert outcome.entries == ("cafe\u0301", "caf\u00e9")
    exc = refusal(["cafe\u0301"], MemoryRemove(file="memory", old="caf\u00e9"))
    assert exc.code == "no-match"


def test_crlf_and_whitespace_in_old() -> None:
    current = ["Owner prefers\nanswers in UTC.", "Launch on Thursday."]
    args = MemoryReplace(file="memory", old="  Owner prefers\r\nanswers in UTC. \r\n", text="x")
    assert apply_edit(current, args).entries == ("x", "Launch on Thursday.")


def test_inner_whitespace_in_old_must_match_exactly() -> None:
    exc = refusal(["two  spaces"], MemoryRemove(file="memory", old="two spaces"))
    assert str(exc) == (
        'memory.md has no entry "two spaces"; the file may have changed since the edit was '
        "proposed, so nothing was changed."
    )


def test_replace_an_entry_with_itself() -> None:
    assert apply_edit(["a", "b"], MemoryReplace(file="user", old="a", text=" a ")) == (
        EditOutcome(("a", "b"))
    )


def test_replace_a_long_entry_is_quoted_short() -> None:
    long = "z" * 81
    exc = refusal(["a", long], MemoryReplace(file="memory", old="a", text=long))
    assert str(exc) == f'memory.md would have the entry "{"z" * 77}…" twice; nothing was changed.'


def test_replace_with_a_separator_line() -> None:
    exc = refusal(["a"], MemoryReplace(file="memory", old="a", text="b\n§\nc"))
    assert exc.code == "bad-entry"
    assert str(exc) == (
        'the entry "b\\n§\\nc" for memory.md has a line holding only §, which separates '
        "entries; reword that line or make two entries."
    )


def test_remove_from_a_file_over_its_limit() -> None:
    current = ["a" * 1000, "b" * 1000, "c" * 1000]
    outcome = apply_edit(current, MemoryRemove(file="memory", old="c" * 1000))
    assert _size(outcome.entries) == 2003
    outcome = apply_edit(current, MemoryRemove(file="user", old="c" * 1000))
    assert _size(outcome.entries) == 2003


def test_consolidate_every_fate() -> None:
    current = ["keep me", "rewrite me", "move me", "drop me", "move me too"]
    args = parse_memory_args(
        """{"action": "consolidate", "file": "memory", "entries": [
            {"old": "move me too", "move": true},
            {"text": "brand new"},
            {"old": "rewrite me", "text": "rewritten"},
            {"old": "drop me", "drop": true},
            {"old": "move me", "move": true},
            {"old": "keep me", "keep": true}
        ]}"""
    )
    assert apply_edit(current, args) == EditOutcome(
        ("brand new", "rewritten", "keep me"), ("move me too", "move me")
    )


def test_consolidate_of_an_empty_file() -> None:
    args = MemoryConsolidate(file="user", entries=[])
    assert apply_edit([], args) == EditOutcome((), ())
    args = MemoryConsolidate(file="user", entries=[ConsolidateItem(text="new")])
    assert apply_edit([], args) == EditOutcome(("new",), ())


def test_consolidate_into_a_duplicate() -> None:
    items = [item("a", "keep"), item("b", "rewrite", "a")]
    exc = refusal(["a", "b"], MemoryConsolidate(file="memory", entries=items))
    assert exc.code == "duplicate"
    assert str(exc) == 'memory.md would have the entry "a" twice; nothing was changed.'


def test_consolidate_over_the_limit() -> None:
    items = [item("a" * 1000, "keep"), ConsolidateItem(text="b" * 1500)]
    exc = refusal(["a" * 1000], MemoryConsolidate(file="memory", entries=items))
    assert str(exc) == (
        "memory.md would be 2,503 of 2,200 characters; "
        "use consolidate to move entries to the archive."
    )


def test_consolidate_names_every_missing_entry() -> None:
    items = [item("b", "keep")]
    exc = refusal(["a", "b", "c", "d"], MemoryConsolidate(file="user", entries=items))
    assert str(exc) == (
        "consolidate must name every entry of user.md once, with keep, text, move or drop, "
        'but leaves out the entries "a", "c" and "d"; nothing was changed.'
    )


def test_consolidate_cannot_move_an_entry_that_reads_as_an_archive_header() -> None:
    entry = f"note\n{_HEADER}"
    exc = refusal([entry], MemoryConsolidate(file="memory", entries=[item(entry, "move")]))
    assert exc.code == "bad-entry"
    assert str(exc) == (
        f"the entry {quote(entry)} of memory.md cannot be moved to archive.md: its line "
        f"{quote(_HEADER)} would read as the start of another archived entry; rewrite or "
        "drop it instead, so nothing was changed."
    )
    # It can be dropped or rewritten.
    items = [item(entry, "drop")]
    assert apply_edit([entry], MemoryConsolidate(file="memory", entries=items)).entries == ()


def test_consolidate_items_built_by_hand() -> None:
    exc = refusal(["a"], MemoryConsolidate(file="memory", entries=[ConsolidateItem()]))
    assert exc.code == "bad-entry"
    assert str(exc) == (
        "consolidate item 0 has neither old nor text; give the text of a new entry, or an "
        "entry of memory.md and what becomes of it, so nothing was changed."
    )
    items = [item("a", "keep"), ConsolidateItem(old="b")]
    exc = refusal(["a", "b"], MemoryConsolidate(file="memory", entries=items))
    assert exc.code == "bad-entry"
    assert str(exc) == (
        'consolidate item 1 names the entry "b" of memory.md but not what becomes of it; '
        "give one of keep, text, move or drop, so nothing was changed."
    )


def test_current_must_be_a_parsed_file() -> None:
    with pytest.raises(ValueError, match="is a duplicate"):
        apply_edit(["a", "a"], MemoryAdd(file="memory", text="b"))
    with pytest.raises(ValueError, match="is not a valid entry"):
        apply_edit(["a "], MemoryAdd(file="memory", text="b"))
    with pytest.raises(ValueError, match="unknown memory file 'soul'"):
        apply_edit([], MemoryAdd(file="soul", text="b"))  # type: ignore[arg-type]
