"""`escape`: what the owner reads is the exact text, and nothing in it is live."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proto import escape, unescape

HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"}
ALWAYS_ESCAPED = "<>@*_`[]|~&"
LINE_START_MARKERS = "#-+="

# Every category hypothesis knows, plus surrogates and line/paragraph separators (which
# st.characters leaves out or rarely draws), plus runs of the characters escape treats
# specially, so that backslashes meet `u{…}` and markers meet line starts.
ANY_CHAR = st.one_of(
    st.characters(exclude_categories=()),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.sampled_from(["\u2028", "\u2029", "\u00a0", "\u3000", "\u200b", "\u202e", "\x1b"]),
    st.sampled_from(list("\\`*_~[]<>|&@#-+= \nu{}0af")),
)
TEXTS = st.text(ANY_CHAR, max_size=60)

# One token of escape's output: an escaped backslash or marker, a code point shown as
# `\u{hex}`, or a character that needs no escaping.
TOKEN = re.compile(r"\\[\\`*_~\[\]<>|&@#\-+=]|\\u\{[0-9a-f]+\}|[^\\`*_~\[\]<>|&@]", re.DOTALL)


def backslashes_before(text: str, index: int) -> int:
    count = 0
    while index - count - 1 >= 0 and text[index - count - 1] == "\\":
        count += 1
    return count


@settings(max_examples=200)
@given(TEXTS)
def test_unescape_undoes_escape(text: str) -> None:
    assert unescape(escape(text)) == text


@settings(max_examples=200)
@given(TEXTS)
def test_escaped_text_shows_no_hidden_character(text: str) -> None:
    for char in escape(text):
        category = unicodedata.category(char)
        assert char == "\n" or category not in HIDDEN, (char, category)
        assert category != "Zs" or char == " ", (char, category)


@settings(max_examples=200)
@given(TEXTS)
def test_every_markup_character_is_behind_a_backslash(text: str) -> None:
    out = escape(text)
    for i, char in enumerate(out):
        if char in ALWAYS_ESCAPED:
            assert backslashes_before(out, i) % 2 == 1, (out, i)


@settings(max_examples=200)
@given(TEXTS)
def test_no_line_starts_with_a_heading_or_list_marker(text: str) -> None:
    for line in escape(text).split("\n"):
        assert line.lstrip(" ")[:1] not in set(LINE_START_MARKERS), line


@settings(max_examples=200)
@given(TEXTS)
def test_escaped_text_is_a_sequence_of_tokens(text: str) -> None:
    out = escape(text)
    tokens = TOKEN.findall(out)
    assert "".join(tokens) == out
    assert len(tokens) == len(text)


@given(
    st.text(
        st.characters(categories=["L", "N"]) | st.sampled_from(list(" .,:;!?'\"(){}/%$")),
        max_size=40,
    )
)
def test_letters_digits_and_plain_punctuation_stay_as_they_are(text: str) -> None:
    assert escape(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("\x1b[31mred", r"\u{1b}\[31mred", id="terminal-escape"),
        pytest.param("abc\u202etxt.exe", r"abc\u{202e}txt.exe", id="bidi-override"),
        pytest.param("pass\u200bword", r"pass\u{200b}word", id="zero-width-space"),
        pytest.param("\ufeffbom", r"\u{feff}bom", id="bom"),
        pytest.param("@channel look", r"\@channel look", id="mention"),
        pytest.param("<script>alert(1)</script>", r"\<script\>alert(1)\</script\>", id="html"),
        pytest.param(
            "[click](https://evil.example)", r"\[click\](https://evil.example)", id="link"
        ),
        pytest.param("**bold** _it_ `code`", r"\*\*bold\*\* \_it\_ \`code\`", id="emphasis"),
        pytest.param("a | b ~~x~~ &amp;", r"a \| b \~\~x\~\~ \&amp;", id="table-strike-entity"),
        pytest.param(
            '{"path":"/srv/notes/q3.txt"}', '{"path":"/srv/notes/q3.txt"}', id="json-args"
        ),
        pytest.param("2026-09-24T20:14:03Z", "2026-09-24T20:14:03Z", id="date"),
        pytest.param("# heading", r"\# heading", id="heading"),
        pytest.param("- item", r"\- item", id="list"),
        pytest.param("+ item", r"\+ item", id="plus-list"),
        pytest.param("title\n===", "title\n\\===", id="setext"),
        pytest.param("one\n# two\n  - three", "one\n\\# two\n  \\- three", id="later-lines"),
        pytest.param("a # b - c", "a # b - c", id="markers-mid-line"),
        pytest.param("> quoted", r"\> quoted", id="quote"),
        pytest.param("C:\\temp", "C:\\\\temp", id="backslash"),
        pytest.param("\\u{41}", "\\\\u{41}", id="escape-lookalike"),
        pytest.param("a\tb", r"a\u{9}b", id="tab"),
        pytest.param("a\x00b\x7f", r"a\u{0}b\u{7f}", id="nul-del"),
        pytest.param("a\r\nb", "a\\u{d}\nb", id="crlf"),
        pytest.param("a\u00a0b\u3000c", r"a\u{a0}b\u{3000}c", id="odd-spaces"),
        pytest.param("a\u2028b", r"a\u{2028}b", id="line-separator"),
        pytest.param("\ud800", r"\u{d800}", id="surrogate"),
        pytest.param("é 中文 Ж", "é 中文 Ж", id="scripts"),
        pytest.param("", "", id="empty"),
    ],
)
def test_examples(text: str, expected: str) -> None:
    assert escape(text) == expected
    assert unescape(expected) == text
