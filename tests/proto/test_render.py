"""The two renderings of outside text: what each shows, by example (properties: tests/security)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proto import for_markdown, for_terminal, from_markdown, from_terminal
from proto._render import reveal_each

ALWAYS_ESCAPED = "<>*_`[]|~&"
LINE_START_MARKERS = "#-+="

ANY_CHAR = st.one_of(
    st.characters(exclude_categories=()),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.sampled_from(["\u2028", "\u2029", "\u00a0", "\u3000", "\u200b", "\u202e", "\x1b"]),
    st.sampled_from(list("\\`*_~[]<>|&@#-+= \nu{}0af")),
)
TEXTS = st.text(ANY_CHAR, max_size=60)

# One token of for_markdown's output: an escaped backslash or marker, `@` as the entity
# `&#64;`, a code point shown as `\u{hex}`, or a character that needs no escaping.
MARKDOWN_TOKEN = re.compile(
    r"\\[\\`*_~\[\]<>|&#\-+=]|&#64;|\\u\{[0-9a-f]+\}|[^\\`*_~\[\]<>|&@]", re.DOTALL
)


def backslashes_before(text: str, index: int) -> int:
    count = 0
    while index - count - 1 >= 0 and text[index - count - 1] == "\\":
        count += 1
    return count


@settings(max_examples=200)
@given(TEXTS)
def test_markdown_every_markup_character_is_behind_a_backslash(text: str) -> None:
    out = for_markdown(text)
    assert "@" not in out  # a mention's `@` is the entity `&#64;`: never a mention
    out = out.replace("&#64;", "A")
    for i, char in enumerate(out):
        if char in ALWAYS_ESCAPED:
            assert backslashes_before(out, i) % 2 == 1, (out, i)


@settings(max_examples=200)
@given(TEXTS)
def test_markdown_no_line_starts_with_a_heading_or_list_marker(text: str) -> None:
    for line in for_markdown(text).split("\n"):
        assert line.lstrip(" ")[:1] not in set(LINE_START_MARKERS), line


@settings(max_examples=200)
@given(TEXTS)
def test_markdown_is_a_sequence_of_tokens(text: str) -> None:
    out = for_markdown(text)
    tokens = MARKDOWN_TOKEN.findall(out)
    assert "".join(tokens) == out
    assert len(tokens) == len(text)


PLAIN = st.text(
    st.characters(categories=["L", "N"]) | st.sampled_from(list(" .,:;!?'\"(){}/%$")),
    max_size=40,
)


@given(PLAIN)
def test_letters_digits_and_plain_punctuation_stay_as_they_are(text: str) -> None:
    assert for_markdown(text) == text
    assert for_terminal(text) == text


@given(st.text(st.characters(codec="ascii", exclude_characters="\\"), max_size=60))
def test_the_terminal_rendering_touches_nothing_but_controls(text: str) -> None:
    shown = for_terminal(text)
    assert shown == "".join(
        c if c == "\n" or " " <= c <= "~" else f"\\u{{{ord(c):x}}}" for c in text
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("\x1b[31mred", r"\u{1b}\[31mred", id="terminal-escape"),
        pytest.param("abc\u202etxt.exe", r"abc\u{202e}txt.exe", id="bidi-override"),
        pytest.param("pass\u200bword", r"pass\u{200b}word", id="zero-width-space"),
        pytest.param("\ufeffbom", r"\u{feff}bom", id="bom"),
        pytest.param("Robin\ufe0f\U000e0100", r"Robin\u{fe0f}\u{e0100}", id="variation-selectors"),
        pytest.param("\u3164\u115f", r"\u{3164}\u{115f}", id="hangul-fillers"),
        pytest.param("@channel look", "&#64;channel look", id="mention"),
        pytest.param("mail a@b.org", "mail a&#64;b.org", id="email"),
        pytest.param("&#64;all", r"\&#64;all", id="entity-lookalike"),
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
def test_markdown_examples(text: str, expected: str) -> None:
    assert for_markdown(text) == expected
    assert from_markdown(expected) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("\x1b[31mred\x1b[0m", r"\u{1b}[31mred\u{1b}[0m", id="csi"),
        pytest.param("\x1b]52;c;ZXZpbA==\x07", r"\u{1b}]52;c;ZXZpbA==\u{7}", id="osc-clipboard"),
        pytest.param("\x9b2J", r"\u{9b}2J", id="c1-csi"),
        pytest.param("abc\u202etxt.exe", r"abc\u{202e}txt.exe", id="bidi-override"),
        pytest.param("Robin\ufe0f\U000e0100", r"Robin\u{fe0f}\u{e0100}", id="variation-selectors"),
        pytest.param(
            "[1] read_file # user.md @all <b>",
            "[1] read_file # user.md @all <b>",
            id="markdown-untouched",
        ),
        pytest.param('{"a":"say \\"hi\\""}', '{"a":"say \\"hi\\""}', id="json-escapes"),
        pytest.param('{"a":"\\n"}', '{"a":"\\n"}', id="json-newline-escape"),
        pytest.param("C:\\temp", "C:\\temp", id="backslash"),
        pytest.param("a\\\\b", "a\\\\\\b", id="two-backslashes"),
        pytest.param("\\u{41}", "\\\\u{41}", id="escape-lookalike"),
        pytest.param("\\u00e9", "\\\\u00e9", id="json-unicode-escape"),
        pytest.param("\\\x1b", "\\\\\\u{1b}", id="backslash-before-revealed"),
        pytest.param("end\\", "end\\", id="trailing-backslash"),
        pytest.param("a\r\nb", "a\\u{d}\nb", id="crlf"),
        pytest.param("a\tb", r"a\u{9}b", id="tab"),
        pytest.param("one\ntwo", "one\ntwo", id="newline-kept"),
        pytest.param("é 中文 Ж", "é 中文 Ж", id="scripts"),
        pytest.param("", "", id="empty"),
    ],
)
def test_terminal_examples(text: str, expected: str) -> None:
    assert for_terminal(text) == expected
    assert from_terminal(expected) == text


def test_one_line_reveals_newlines_and_the_backslash_before_one() -> None:
    assert for_terminal("a\nb", one_line=True) == r"a\u{a}b"
    assert for_terminal("a\\\nb", one_line=True) == r"a\\\u{a}b"
    assert for_terminal("a\\\nb") == "a\\\nb"
    for text in ("a\nb", "a\\\nb", "\\\n\\"):
        assert from_terminal(for_terminal(text, one_line=True)) == text
        assert from_terminal(for_terminal(text)) == text


@settings(max_examples=300)
@given(
    st.one_of(
        st.text(st.characters(codec="ascii"), max_size=80),
        st.text(max_size=80),
        TEXTS,
    ),
    st.booleans(),
)
def test_the_terminal_shortcut_for_plain_ascii_agrees_with_revealing_each_code_point(
    text: str, one_line: bool
) -> None:
    """`for_terminal` skips printable ASCII without a backslash (issue 22: every log line
    goes through it); whatever the text, the answer is the code-point-by-code-point one."""
    assert for_terminal(text, one_line=one_line) == reveal_each(text, one_line=one_line)
