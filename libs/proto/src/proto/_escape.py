r"""Make any text safe to show to the owner, in an approval or a chat client.

The owner approves what they read, so what they read must be the exact text: nothing
may render as markup, mention anyone, move the terminal's cursor or hide itself.
`escape` therefore shows

* every character that is invisible, reorders text (bidi controls), or is a control
  character (terminal escape sequences start with one) as a visible `\u{200b}`;
* every character with a meaning in Markdown or HTML, and `@`, behind a backslash
  (`#`, `-`, `+` and `=` only at the start of a line, where they make headings and
  lists, so that JSON arguments and dates stay readable);
* a backslash as `\\`, so the escaping can be undone: `unescape(escape(t)) == t`.

Newlines stay newlines (entries span lines); plain letters of every script, digits,
spaces and ordinary punctuation stay as they are.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["escape", "unescape"]

_MARKUP = frozenset("\\`*_~[]<>|&@")
# Markers that only mean something at the start of a line: headings, lists, quotes.
_LINE_START_MARKUP = frozenset("#-+=")
# Categories that render as nothing, reorder text, or are not characters at all:
# controls, format characters (bidi controls, zero-width spaces, BOM), line and
# paragraph separators, private use, surrogates, unassigned code points.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
_CONFUSABLE_SPACE = frozenset({"Zs"})


def _visible(char: str) -> bool:
    if char == "\n":
        return True
    category = unicodedata.category(char)
    if category in _HIDDEN_CATEGORIES:
        return False
    # Only the ordinary space is shown as a space; NBSP, ideographic space and the rest
    # would make two different texts look alike.
    return not (category in _CONFUSABLE_SPACE and char != " ")


def escape(text: str) -> str:
    """Return `text` made safe and unambiguous to display (see the module docstring)."""
    out: list[str] = []
    line_start = True
    for char in text:
        if char in _MARKUP or (line_start and char in _LINE_START_MARKUP):
            out.append("\\" + char)
        elif _visible(char):
            out.append(char)
        else:
            out.append(f"\\u{{{ord(char):x}}}")
        line_start = char == "\n" or (line_start and char == " ")
    return "".join(out)


_ESCAPED = re.compile(r"\\(u\{([0-9a-f]+)\}|.)", re.DOTALL)


def unescape(text: str) -> str:
    """Undo `escape`; used by tests to prove the owner saw the exact text."""

    def one(match: re.Match[str]) -> str:
        if match.group(2) is not None:
            return chr(int(match.group(2), 16))
        return match.group(1)

    return _ESCAPED.sub(one, text)
