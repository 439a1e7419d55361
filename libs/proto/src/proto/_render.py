r"""Show text from outside to the owner exactly, rendered for where it is shown.

The owner approves what they read, so what they read must be the exact text: nothing
may move a terminal's cursor, set its clipboard, reorder the text or hide itself. The
wire and the files carry raw text; each client renders it for its destination, with
one of two renderings:

* `for_terminal` (bxctl, the roles' logs): every code point that `revealed` names is
  shown as `\u{1b}`: controls (C0, DEL, C1; a terminal's escape sequences start with
  one), format characters (bidi controls, zero-width spaces), Unicode's
  default-ignorable code points (variation selectors, tags, Hangul fillers: see
  `_ignorable.py`), line and paragraph separators, private use, surrogates, unassigned
  code points, and every space but the plain one. Nothing else is touched: JSON, Markdown
  and paths read as they are. A backslash is doubled only where it would otherwise read
  as the start of an escape (before `\`, `u`, or a revealed code point), so
  `{"a":"say \"hi\""}` is shown as it is.
* `for_markdown` (chat platforms): the same code points revealed, and every character
  with a meaning in Markdown or HTML behind a backslash (`#`, `-`, `+` and `=` only at
  the start of a line, where they make headings and lists, so that JSON arguments and
  dates stay readable); every backslash is doubled. `@` becomes the entity `&#64;`:
  Mattermost's mention parser joins an escaped `\@` to the name after it (a mention),
  but stops at an entity.

For Mattermost, three more (`docs/mattermost.md`): `code_block` and `code_span` show
text exactly inside a fence or span that nothing in the text can close (no markup, no
mention, no emoji: the server's mention parser skips code), revealed as for a terminal;
`for_mattermost` is the assistant's own answer, Markdown kept, with the same code points
revealed, no mention (every `@` an entity, in code too) and no image loaded (`![` shown
as text: an image's address can carry what the session read to whoever serves it).

Newlines stay newlines (entries span lines), except in `for_terminal(…, one_line=True)`
for a log line or a field inside a line. Each rendering has its inverse
(`from_terminal`, `from_markdown`), which tests use to prove the owner saw the exact
text: `from_terminal(for_terminal(t)) == t`.
"""

from __future__ import annotations

import re
import unicodedata

from ._ignorable import is_default_ignorable

__all__ = [
    "MENTION_ENTITY",
    "code_block",
    "code_span",
    "for_markdown",
    "for_mattermost",
    "for_terminal",
    "from_markdown",
    "from_terminal",
    "revealed",
]

MENTION_ENTITY = "&#64;"
"""How `@` is written for Mattermost: shown as `@`, never a mention."""

_MARKUP = frozenset("\\`*_~[]<>|&")
# Markers that only mean something at the start of a line: headings, lists, quotes.
_LINE_START_MARKUP = frozenset("#-+=")
# Categories that render as nothing, reorder text, or are not characters at all:
# controls, format characters (bidi controls, zero-width spaces, BOM), line and
# paragraph separators, private use, surrogates, unassigned code points.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})


def revealed(char: str) -> bool:
    r"""Whether both renderings show `char` (one code point) as `\u{…}`; `\n` is."""
    if " " <= char <= "~":  # printable ASCII, the common case
        return False
    category = unicodedata.category(char)
    if category in _HIDDEN_CATEGORIES:
        return True
    # Only the plain space is shown as a space; NBSP, ideographic space and the rest
    # would make two different texts look alike.
    if category == "Zs":
        return True
    return is_default_ignorable(char)


def _code(char: str) -> str:
    return f"\\u{{{ord(char):x}}}"


_PLAIN_ASCII = re.compile(r"[ -\[\]-~]*")
"""Printable ASCII but the backslash: text that `for_terminal` leaves as it is."""


def for_terminal(text: str, *, one_line: bool = False) -> str:
    r"""`text` for a terminal: hidden and live code points revealed (see the module doc).

    With `one_line`, a newline is revealed too (`\u{a}`), for a log line or a field shown
    inside a line.
    """
    if _PLAIN_ASCII.fullmatch(text):  # most log lines and ids: nothing to reveal
        return text
    return reveal_each(text, one_line=one_line)


def reveal_each(text: str, *, one_line: bool = False) -> str:
    """`for_terminal`, code point by code point (what its shortcut must agree with)."""

    def coded(char: str) -> bool:
        return revealed(char) and (one_line or char != "\n")

    out: list[str] = []
    for i, char in enumerate(text):
        if char == "\\":
            after = text[i + 1 : i + 2]
            # Doubled only where the next character would make it read as an escape.
            doubled = after in ("\\", "u") or (after != "" and coded(after))
            out.append("\\\\" if doubled else "\\")
        elif coded(char):
            out.append(_code(char))
        else:
            out.append(char)
    return "".join(out)


_TERMINAL_ESCAPE = re.compile(r"\\(\\|u\{([0-9a-f]{1,6})\})")


def from_terminal(text: str) -> str:
    """Undo `for_terminal`; used by tests to prove the owner saw the exact text."""

    def one(match: re.Match[str]) -> str:
        if match.group(2) is None:
            return "\\"
        point = int(match.group(2), 16)
        return chr(point) if point <= 0x10FFFF else match.group(0)

    return _TERMINAL_ESCAPE.sub(one, text)


def for_markdown(text: str) -> str:
    """`text` for a Markdown destination: revealed as for a terminal, and no markup."""
    out: list[str] = []
    line_start = True
    for char in text:
        if char == "@":
            out.append(MENTION_ENTITY)
        elif char in _MARKUP or (line_start and char in _LINE_START_MARKUP):
            out.append("\\" + char)
        elif char == "\n" or not revealed(char):
            out.append(char)
        else:
            out.append(_code(char))
        line_start = char == "\n" or (line_start and char == " ")
    return "".join(out)


_MARKDOWN_ESCAPE = re.compile(r"&#64;|\\(u\{([0-9a-f]+)\}|.)", re.DOTALL)


def from_markdown(text: str) -> str:
    """Undo `for_markdown`; used by tests to prove the owner saw the exact text."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == MENTION_ENTITY:
            return "@"
        if match.group(2) is not None:
            return chr(int(match.group(2), 16))
        return match.group(1)

    return _MARKDOWN_ESCAPE.sub(one, text)


def _longest_run(text: str, char: str) -> int:
    runs = re.findall(re.escape(char) + "+", text)
    return max((len(run) for run in runs), default=0)


def code_block(text: str, *, info: str = "text") -> str:
    r"""`text` in a fenced code block that nothing in it can close, revealed as for a terminal.

    The fence is one backtick longer than the longest run of backticks in the text (at
    least three), so no line of the text can close it; Mattermost shows the lines as
    they are: no markup, no mention, no emoji. `info` must hold no backtick.
    """
    shown = for_terminal(text)
    fence = "`" * max(3, _longest_run(shown, "`") + 1)
    return f"{fence}{info}\n{shown}\n{fence}"


def code_span(text: str) -> str:
    """`text` on one line in an inline code span that nothing in it can close.

    The delimiter is one backtick longer than the longest run in the text, so no run
    inside matches it; a space pads a text that starts or ends with a backtick or a
    space (Markdown strips one space from each end of a padded span).
    """
    shown = for_terminal(text, one_line=True)
    tick = "`" * (_longest_run(shown, "`") + 1)
    if shown == "" or shown[0] in "` " or shown[-1] in "` ":
        shown = f" {shown} "
    return f"{tick}{shown}{tick}"


def for_mattermost(text: str) -> str:
    r"""The assistant's answer for Mattermost: its Markdown kept, nothing hidden or live.

    Code points are revealed as for a terminal; every `@` is the entity `&#64;` (shown
    as `@` in text, as `&#64;` inside code: the server decides mentions with its own
    Markdown parser, and a guess at where its code blocks end could let `@all` through);
    `![` is shown as text, so no image is loaded from an address the model chose.
    """
    shown = for_terminal(text)
    return shown.replace("@", MENTION_ENTITY).replace("![", "!\\[")
