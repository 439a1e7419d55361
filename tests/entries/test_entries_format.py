"""The entry format, the sentences, the limits and the block."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entries import (
    MEMORY_LIMIT,
    SEPARATOR_LINE,
    SOUL_LIMIT,
    USER_LIMIT,
    EditRefused,
    EntriesError,
    ParseError,
    chars,
    check_entry,
    file_name,
    is_entry,
    is_separator,
    limit_for,
    over_limit,
    parse,
    quote,
    render,
    render_block,
    soul_text,
    updated,
)

# Letters of many scripts, combining marks, whitespace that str.strip() removes but that is
# not a line end for the format (\u2028, \x85, \x0b), and §.
_SAMPLES = (
    "aZ09 ,.-*#éßøÆΩλЖяאבعربىहिन्दी中文字한국어ひらがな🙂🧠\u200d"
    "\u0301\u0308\u0327\u20dd"
    " \t\u00a0\u2003\u3000\u2028\x85\x0b"
    "§"
)
_CHAR = st.one_of(
    st.sampled_from(_SAMPLES), st.characters(codec="utf-8", exclude_characters="\r\n")
)
_LINE = st.text(_CHAR, max_size=20)
_TRICKY = st.sampled_from(["§", " § ", "\t§\u00a0", "§§", "§ §", "a § b", "\u2028§", "§\x85"])
_NEWLINE = st.sampled_from(["\n", "\r\n", "\r"])


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _valid(entry: str) -> bool:
    """An entry by the memory design's format, written out independently of the library."""
    return bool(entry) and not any(line.strip() == "§" for line in entry.split("\n"))


ENTRY = (
    st.lists(st.one_of(_LINE, st.sampled_from(["§§", "a § b", "§ x"])), min_size=1, max_size=4)
    .map(lambda lines: "\n".join(lines).strip())
    .filter(_valid)
)
ENTRIES = st.lists(ENTRY, unique=True, max_size=8)
RAW = st.tuples(st.lists(st.one_of(_LINE, _TRICKY), max_size=6), _NEWLINE).map(
    lambda t: t[1].join(t[0])
)
FILE_TEXT = st.lists(st.one_of(_CHAR, _NEWLINE, st.just("§"), st.just("\n§\n")), max_size=200).map(
    "".join
)


# The format, as properties.


@given(ENTRIES)
def test_render_parse_round_trip(entries: list[str]) -> None:
    text = render(entries)
    assert text == "\n§\n".join(entries)
    assert parse(text, name="memory.md") == tuple(entries)
    assert render(parse(text, name="memory.md")) == text
    assert chars(entries) == len(text)


@given(ENTRIES, _NEWLINE, st.sampled_from(["", "\n", "  \n\n", "\t"]))
def test_line_ends_and_surrounding_whitespace_change_nothing(
    entries: list[str], newline: str, tail: str
) -> None:
    text = render(entries).replace("\n", newline)
    assert parse(tail + text + tail, name="user.md") == tuple(entries)


def _parsed(text: str) -> tuple[str, ...] | ParseError:
    try:
        return parse(text, name="memory.md")
    except ParseError as exc:
        return exc


@given(FILE_TEXT)
def test_parse_gives_entries_or_parse_error(text: str) -> None:
    entries = _parsed(text)
    if isinstance(entries, ParseError):
        assert entries.code == "unparsable"
        assert entries.name == "memory.md"
        assert entries.entry >= 1
        assert str(entries).startswith("memory.md cannot be read: ")
        assert str(entries).endswith("with an editor.")
        return
    assert all(_valid(e) and e == e.strip() and "\r" not in e for e in entries)
    assert len(set(entries)) == len(entries)
    assert parse(render(entries), name="memory.md") == entries
    # Every non-separator line of the file is in some entry, in order.
    kept = [line.strip() for line in _lf(text).split("\n") if line.strip() != "§"]
    assert "".join("".join(kept).split()) == "".join("".join(entries).split())


@given(st.data(), st.lists(ENTRY, unique=True, min_size=1, max_size=6))
def test_a_repeated_entry_is_unparsable(data: st.DataObject, entries: list[str]) -> None:
    first = data.draw(st.integers(0, len(entries) - 1))
    second = data.draw(st.integers(first + 1, len(entries)))
    text = render([*entries[:second], entries[first], *entries[second:]])
    with pytest.raises(ParseError) as info:
        parse(text, name="user.md")
    assert info.value.entry == second + 1
    assert str(info.value) == (
        f"user.md cannot be read: entries {first + 1} and {second + 1} are the same, "
        f"{quote(entries[first])}; delete one of them with an editor."
    )


@given(FILE_TEXT)
def test_parse_does_not_care_about_crlf(text: str) -> None:
    lf, crlf = _parsed(text), _parsed(_lf(text).replace("\n", "\r\n"))
    assert (lf if isinstance(lf, tuple) else str(lf)) == (
        crlf if isinstance(crlf, tuple) else str(crlf)
    )


@given(st.one_of(RAW, ENTRY))
def test_check_entry_normalises_or_refuses(text: str) -> None:
    expected = _lf(text).strip()
    if not _valid(expected):
        with pytest.raises(EditRefused) as info:
            check_entry(text, name="memory.md")
        assert info.value.code == "bad-entry"
        return
    entry = check_entry(text, name="memory.md")
    assert entry == expected
    assert _valid(entry)
    assert is_entry(entry)
    assert check_entry(entry, name="memory.md") == entry


@given(st.text(_CHAR, max_size=10))
def test_is_separator_is_a_line_of_only_the_section_sign(line: str) -> None:
    assert is_separator(line) == (line.strip() == SEPARATOR_LINE)


# The format, by example.


def test_crlf_file() -> None:
    text = "Owner prefers UTC.\r\n§\r\nThe launch\r\nmoved to Thursday.\r\n"
    assert parse(text, name="memory.md") == (
        "Owner prefers UTC.",
        "The launch\nmoved to Thursday.",
    )


def test_lone_cr_file() -> None:
    assert parse("a\r§\rb\rc", name="memory.md") == ("a", "b\nc")


def test_separator_with_spaces_separates() -> None:
    assert parse("a\n  §\t\nb", name="memory.md") == ("a", "b")


def test_section_sign_inside_a_line_is_text() -> None:
    text = "costs 5 § 3\n§\n§§\n§\n§ moved"
    assert parse(text, name="memory.md") == ("costs 5 § 3", "§§", "§ moved")
    assert check_entry("a § b", name="memory.md") == "a § b"


@pytest.mark.parametrize("text", ["a\n§\nb", "a\n  § \nb", "§\nb", "a\r\n§"])
def test_an_entry_with_a_separator_line_is_refused(text: str) -> None:
    with pytest.raises(EditRefused) as info:
        check_entry(text, name="user.md")
    assert info.value.code == "bad-entry"
    assert str(info.value) == (
        f"the entry {quote(_lf(text).strip())} for user.md has a line holding only §, "
        "which separates entries; reword that line or make two entries."
    )


@pytest.mark.parametrize("text", ["", "   ", "\r\n\r\n", "\t\u00a0\n"])
def test_an_empty_entry_is_refused(text: str) -> None:
    with pytest.raises(EditRefused) as info:
        check_entry(text, name="memory.md")
    assert info.value.code == "bad-entry"
    assert str(info.value) == "the new entry for memory.md is empty; give the entry's text."


def test_trailing_spaces() -> None:
    assert parse("first  \n§\n  second line  \nthird \n", name="memory.md") == (
        "first",
        "second line  \nthird",
    )
    assert check_entry("  two  \r\n  lines  \r\n", name="memory.md") == "two  \n  lines"


def test_combining_marks_are_code_points() -> None:
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert parse(render([composed, decomposed]), name="memory.md") == (composed, decomposed)
    assert chars([composed]) == 4
    assert chars([decomposed]) == 5
    assert chars([composed, decomposed]) == 4 + 3 + 5


def test_empty_file() -> None:
    assert parse("", name="memory.md") == ()
    assert parse(" \n\r\n\t\n", name="memory.md") == ()
    assert render([]) == ""
    assert chars([]) == 0


@pytest.mark.parametrize(
    ("text", "entry", "message"),
    [
        (
            "§\na",
            1,
            "memory.md cannot be read: it begins with a line holding only §, so entry 1 is "
            "empty; delete the extra § line with an editor.",
        ),
        (
            "a\nb\n§\n",
            2,
            "memory.md cannot be read: it ends with a line holding only §, so entry 2 is "
            "empty; delete the extra § line with an editor.",
        ),
        (
            "a\n§\n \n§\nb",
            2,
            "memory.md cannot be read: entry 2 is empty (two lines holding only § with "
            "nothing between them); delete the extra § line with an editor.",
        ),
        (
            "§",
            1,
            "memory.md cannot be read: it begins with a line holding only §, so entry 1 is "
            "empty; delete the extra § line with an editor.",
        ),
        (
            "a\n§\nb\n§\na ",
            3,
            'memory.md cannot be read: entries 1 and 3 are the same, "a"; delete one of them '
            "with an editor.",
        ),
    ],
)
def test_parse_errors(text: str, entry: int, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text, name="memory.md")
    assert str(info.value) == message
    assert info.value.entry == entry
    assert info.value.code == "unparsable"
    assert isinstance(info.value, EntriesError)


# Sentences and quoting.


def test_over_limit_sentence() -> None:
    assert over_limit("memory.md", 2350, 2200) == (
        "memory.md would be 2,350 of 2,200 characters; "
        "use consolidate to move entries to the archive."
    )


def test_updated_sentence() -> None:
    assert updated("memory.md", 1510, 2200) == (
        "memory.md updated (1,510 of 2,200 characters); it takes effect in the next session."
    )
    assert updated("user.md", 0, 1375) == (
        "user.md updated (0 of 1,375 characters); it takes effect in the next session."
    )


def test_quote() -> None:
    assert quote("x" * 80) == '"' + "x" * 80 + '"'
    assert quote("y" * 81) == '"' + "y" * 77 + '…"'
    assert quote('two\nlines "quoted"') == '"two\\nlines \\"quoted\\""'
    assert quote("é\u0301ü") == '"é\u0301ü"'


# Limits and errors.


def test_limits() -> None:
    assert (MEMORY_LIMIT, USER_LIMIT, SOUL_LIMIT) == (2200, 1375, 4000)
    assert (file_name("memory"), file_name("user")) == ("memory.md", "user.md")
    assert (limit_for("memory"), limit_for("user")) == (2200, 1375)


def test_unknown_file_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown memory file 'soul'"):
        file_name("soul")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown memory file 'soul'"):
        limit_for("soul")  # type: ignore[arg-type]


def test_edit_refused() -> None:
    exc = EditRefused("no-match", "memory.md has no entry.")
    assert isinstance(exc, EntriesError)
    assert exc.code == "no-match"
    assert str(exc) == "memory.md has no entry."
    assert ParseError.code == "unparsable"


# The block.


def test_block_sample() -> None:
    memory = ["Owner prefers answers in UTC.", "x" * (1474 - 29 - 3)]
    assert chars(memory) == 1474
    block = render_block(soul="  I am the assistant.\r\nI keep notes.\n\n", memory=memory, user=[])
    assert block == (
        "# soul.md\n"
        "I am the assistant.\nI keep notes.\n"
        "\n"
        "# memory.md (1,474 of 2,200 characters)\n"
        f"Owner prefers answers in UTC.\n§\n{'x' * 1442}\n"
        "\n"
        "# user.md (0 of 1,375 characters)\n"
        "(empty)"
    )


def test_block_all_empty() -> None:
    assert render_block(soul=" \n", memory=(), user=("Name: Ada.",)) == (
        "# soul.md\n(empty)\n\n"
        "# memory.md (0 of 2,200 characters)\n(empty)\n\n"
        "# user.md (10 of 1,375 characters)\nName: Ada."
    )


@given(st.lists(st.one_of(_CHAR, _NEWLINE), max_size=50).map("".join), ENTRIES, ENTRIES)
def test_block_shape(soul: str, memory: list[str], user: list[str]) -> None:
    block = render_block(soul=soul, memory=memory, user=user)
    shown_soul = soul_text(soul) or "(empty)"
    assert block == (
        f"# soul.md\n{shown_soul}\n\n"
        f"# memory.md ({chars(memory):,} of 2,200 characters)\n{render(memory) or '(empty)'}\n\n"
        f"# user.md ({chars(user):,} of 1,375 characters)\n{render(user) or '(empty)'}"
    )
    assert "\r" not in shown_soul
    assert shown_soul == shown_soul.strip()
