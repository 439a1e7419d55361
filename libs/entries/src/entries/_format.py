r"""The entry format of memory.md and user.md and their canonical text.

A file is a list of entries separated by lines holding only `§`. Its canonical text (what
memoryd writes, and what limits count) is the entries joined by `"\n§\n"`, with no
trailing newline. Characters are code points, with no Unicode
normalisation: the owner approves exact text.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import _sentences
from ._errors import EditRefused, ParseError

__all__ = [
    "SEPARATOR_LINE",
    "chars",
    "check_entry",
    "is_entry",
    "is_separator",
    "parse",
    "render",
]

SEPARATOR_LINE = "§"
"""The line between two entries."""

_JOIN = f"\n{SEPARATOR_LINE}\n"


def is_separator(line: str) -> bool:
    """Whether `line` separates entries: it holds only `§`, give or take surrounding spaces."""
    return line.strip() == SEPARATOR_LINE


def lf(text: str) -> str:
    r"""`text` with `\r\n` and lone `\r` line ends turned into `\n`."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def is_entry(text: str) -> bool:
    """Whether `text` can stand in a file as it is: trimmed, not empty, LF only, no § line."""
    return (
        bool(text)
        and text == text.strip()
        and "\r" not in text
        and not any(is_separator(line) for line in text.split("\n"))
    )


def parse(text: str, *, name: str) -> tuple[str, ...]:
    r"""The entries of a file, in order.

    Line ends are normalised first, so an editor's `\r\n` or trailing newline changes
    nothing; each entry is trimmed. An empty or all-whitespace file has no entries.

    Args:
        text: The file's text.
        name: The file's name for messages, e.g. "memory.md".

    Raises:
        ParseError: An entry is empty (a § line at the start or end, or two in a row), or
            two entries are identical.
    """
    text = lf(text)
    if not text.strip():
        return ()
    pieces: list[list[str]] = [[]]
    for line in text.split("\n"):
        if is_separator(line):
            pieces.append([])
        else:
            pieces[-1].append(line)
    entries = tuple("\n".join(piece).strip() for piece in pieces)
    seen: dict[str, int] = {}
    for number, entry in enumerate(entries, 1):
        if not entry:
            message = _sentences.parse_empty(name, number, len(entries))
            raise ParseError(message, name=name, entry=number)
        if entry in seen:
            message = _sentences.parse_duplicate(name, seen[entry], number, entry)
            raise ParseError(message, name=name, entry=number)
        seen[entry] = number
    return entries


def render(entries: Iterable[str]) -> str:
    """The canonical text of a file holding `entries` (which must be valid entries)."""
    return _JOIN.join(entries)


def chars(entries: Iterable[str]) -> int:
    """The size of a file holding `entries`, in characters (code points) of its canonical text."""
    return len(render(entries))


def check_entry(text: str, *, name: str) -> str:
    """A proposed entry as it will stand in the file: line ends normalised, trimmed.

    Args:
        text: The entry as the model wrote it.
        name: The file's name for messages, e.g. "memory.md".

    Raises:
        EditRefused: (`bad-entry`) The entry is empty, or has a line holding only §.
    """
    entry = lf(text).strip()
    if not entry:
        raise EditRefused("bad-entry", _sentences.empty_entry(name))
    if any(is_separator(line) for line in entry.split("\n")):
        raise EditRefused("bad-entry", _sentences.separator_in_entry(name, entry))
    return entry
