"""Issue 12, item 1: no code point that renders as nothing gets past the owner unseen."""

from __future__ import annotations

import itertools
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from security.hostile import (
    BIDI,
    C0,
    C1,
    DEFAULT_IGNORABLE,
    DEL,
    HOSTILE,
    INVISIBLE,
    ROBIN,
    SMUGGLED,
    assert_inert,
    dangerous,
    unselect,
)

import proto
from proto import for_markdown, for_terminal, from_markdown, from_terminal

NAMED_IN_THE_ISSUE = [
    *range(0xFE00, 0xFE10),  # variation selectors 1-16
    *range(0xE0100, 0xE01F0),  # variation selectors 17-256
    *range(0xE0000, 0xE0080),  # tag characters
    0x034F,  # combining grapheme joiner
    0x115F,
    0x1160,
    0x3164,
    0xFFA0,  # Hangul fillers
    *range(0x180B, 0x1810),  # Mongolian free variation selectors, vowel separator
    0x17B4,
    0x17B5,  # Khmer inherent vowels
]


def test_the_table_is_unicode_16s_default_ignorable_set() -> None:
    assert proto.DEFAULT_IGNORABLE_UNICODE == "16.0.0"
    assert len(DEFAULT_IGNORABLE) == 4174  # DerivedCoreProperties.txt 16.0.0's total
    ranges = proto.DEFAULT_IGNORABLE
    assert all(start <= end for start, end in ranges)
    assert all(a_end + 1 < b_start for (_, a_end), (b_start, _) in itertools.pairwise(ranges))
    for point in NAMED_IN_THE_ISSUE:
        assert chr(point) in DEFAULT_IGNORABLE, hex(point)


def test_every_code_point_is_in_the_table_exactly_when_listed() -> None:
    listed = {ord(c) for c in DEFAULT_IGNORABLE}
    for point in range(0x110000):
        assert proto.is_default_ignorable(chr(point)) == (point in listed), hex(point)


def test_unicodedatas_names_agree_with_the_table() -> None:
    """Where Python's own Unicode data names a kind of invisible character, it is listed."""
    for point in range(0x110000):
        name = unicodedata.name(chr(point), "")
        if (
            name.startswith(("VARIATION SELECTOR-", "MONGOLIAN FREE VARIATION SELECTOR"))
            or (name.startswith(("HANGUL", "HALFWIDTH HANGUL")) and name.endswith("FILLER"))
            or (name.startswith("TAG ") and 0xE0000 <= point <= 0xE007F)
            or name.startswith(("ZERO WIDTH", "LEFT-TO-RIGHT", "RIGHT-TO-LEFT", "INVISIBLE "))
        ):
            assert proto.is_default_ignorable(chr(point)), (hex(point), name)


def test_every_default_ignorable_code_point_is_revealed_by_both_renderings() -> None:
    revealed = 0
    for char in sorted(DEFAULT_IGNORABLE):
        code = f"\\u{{{ord(char):x}}}"
        assert for_terminal(char) == code
        assert for_terminal(char, one_line=True) == code
        assert for_markdown(char) == code
        assert for_terminal("a" + char + "b") == f"a{code}b"
        revealed += 1
    assert revealed == 4174


def test_every_code_point_round_trips_and_nothing_dangerous_is_left() -> None:
    everything = "".join(chr(point) for point in range(0x110000))
    shown = for_terminal(everything)
    assert from_terminal(shown) == everything
    assert_inert(shown)
    # (for_markdown reveals by the same rule: the tests above and below show it)


def test_the_issues_example_shows_every_selector() -> None:
    shown = for_terminal(ROBIN)
    assert shown.startswith("Name: Robin\\u{e01")
    assert shown.count("\\u{") == 16
    assert unselect(from_terminal(shown)) == SMUGGLED.encode()
    assert for_markdown(ROBIN).count("\\u{") == 16


# Every kind of character the renderings treat specially, and anything else.
SPECIAL = st.sampled_from(
    [
        *sorted(DEFAULT_IGNORABLE)[:40],
        *"\ufe0f\U000e0100\U000e0041\u034f\u115f\u3164\uffa0\u180b\u17b4\u2065\U000e0fff",
        *(chr(c) for c in range(0x20)),
        "\x7f",
        *(chr(c) for c in range(0x80, 0xA0)),
        *"\u061c\u200e\u202e\u2066\u2069\u2028\u2029\u00a0\u3000\ufeff\ue000\U0010fffd",
        *"\\\\\\u{}0123456789abcdefxyz \n#-+=@<>[]*_`|&~",
    ]
)
TEXTS = st.text(st.one_of(SPECIAL, st.characters(exclude_categories=["Cs"])), max_size=80)


@settings(max_examples=500)
@given(TEXTS)
def test_each_rendering_undoes_to_the_exact_text_and_shows_nothing_dangerous(text: str) -> None:
    for shown, undo in (
        (for_terminal(text), from_terminal),
        (for_terminal(text, one_line=True), from_terminal),
        (for_markdown(text), from_markdown),
    ):
        assert undo(shown) == text
        assert not any(dangerous(c) for c in shown), shown
        assert not any(c in DEFAULT_IGNORABLE for c in shown), shown
    assert "\n" not in for_terminal(text, one_line=True)


@settings(max_examples=300)
@given(TEXTS, TEXTS)
def test_the_terminal_rendering_of_a_line_is_the_rendering_of_its_parts(a: str, b: str) -> None:
    """Split anywhere but after a backslash, the parts render to the whole (chat streams)."""
    if not a.endswith("\\"):
        assert for_terminal(a) + for_terminal(b) == for_terminal(a + b)


def test_the_hostile_text_round_trips() -> None:
    for one_line in (False, True):
        shown = for_terminal(HOSTILE, one_line=one_line)
        assert_inert(shown)
        assert from_terminal(shown) == HOSTILE


def test_the_check_itself_catches_every_dangerous_code_point() -> None:
    for char in C0.replace("\n", "") + DEL + C1 + BIDI + INVISIBLE:
        with pytest.raises(AssertionError):
            assert_inert("ok " + char)
    assert_inert("plain text, é 中文, [1] @all\n")
