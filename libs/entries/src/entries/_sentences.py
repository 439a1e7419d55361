"""Every sentence `entries` says, in one place.

Each is a complete sentence the model and the owner can act on. Entries are quoted by
`quote`; numbers carry thousands separators. `over_limit` and `updated` are fixed by the
memory design apart from the file and the numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

__all__ = ["over_limit", "quote", "updated"]

_QUOTE_MAX = 80
_QUOTE_HEAD = 77


def over_limit(name: str, chars: int, limit: int) -> str:
    """The refusal of an edit that would take a file over its limit.

    Example: `memory.md would be 2,350 of 2,200 characters; use consolidate to move entries
    to the archive.`
    """
    return (
        f"{name} would be {chars:,} of {limit:,} characters; "
        "use consolidate to move entries to the archive."
    )


def updated(name: str, chars: int, limit: int) -> str:
    """The answer to an applied edit.

    Example: `memory.md updated (1,510 of 2,200 characters); it takes effect in the next
    session.`
    """
    return (
        f"{name} updated ({chars:,} of {limit:,} characters); it takes effect in the next session."
    )


def quote(text: str) -> str:
    """An entry as a sentence names it: in double quotes, on one line, at most 80 characters.

    A longer entry shows its first 77 characters and `…`. Quotes, backslashes, newlines and
    other control characters are escaped as in JSON, so the quote stays on one line.
    """
    shown = text if len(text) <= _QUOTE_MAX else text[:_QUOTE_HEAD] + "…"
    return msgspec.json.encode(shown).decode()


def _listing(texts: Sequence[str]) -> str:
    quoted = [quote(t) for t in texts]
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _entries(texts: Sequence[str]) -> str:
    return ("the entry " if len(texts) == 1 else "the entries ") + _listing(texts)


# The file does not parse (the owner edited it).


def parse_empty(name: str, number: int, total: int) -> str:
    """An empty entry: a § line at the start or the end, or two in a row."""
    if number == 1:
        where = "it begins with a line holding only §, so entry 1 is empty"
    elif number == total:
        where = f"it ends with a line holding only §, so entry {number} is empty"
    else:
        where = f"entry {number} is empty (two lines holding only § with nothing between them)"
    return f"{name} cannot be read: {where}; delete the extra § line with an editor."


def parse_duplicate(name: str, first: int, second: int, entry: str) -> str:
    """Two identical entries."""
    return (
        f"{name} cannot be read: entries {first} and {second} are the same, {quote(entry)}; "
        "delete one of them with an editor."
    )


# A proposed entry is not an entry.


def empty_entry(name: str) -> str:
    """A new entry with no text."""
    return f"the new entry for {name} is empty; give the entry's text."


def separator_in_entry(name: str, entry: str) -> str:
    """A new entry with a line holding only §."""
    return (
        f"the entry {quote(entry)} for {name} has a line holding only §, which separates "
        "entries; reword that line or make two entries."
    )


def cannot_move(name: str, entry: str, line: str) -> str:
    """An entry whose line would read as a header of archive.md."""
    return (
        f"the entry {quote(entry)} of {name} cannot be moved to archive.md: its line "
        f"{quote(line)} would read as the start of another archived entry; rewrite or drop "
        "it instead, so nothing was changed."
    )


# The edit does not fit the file as it is now.


def already_there(name: str, entry: str) -> str:
    """An add of an entry the file already has."""
    return f"{name} already has the entry {quote(entry)}; nothing was changed."


def duplicate(name: str, entry: str) -> str:
    """A replace or consolidate that would leave two identical entries."""
    return f"{name} would have the entry {quote(entry)} twice; nothing was changed."


def no_match(name: str, olds: Sequence[str]) -> str:
    """An `old` that is no entry of the file: a stale edit, or a typo."""
    noun = "entry " if len(olds) == 1 else "entries "
    return (
        f"{name} has no {noun}{_listing(olds)}; the file may have changed since the edit was "
        "proposed, so nothing was changed."
    )


def consolidate_missing(name: str, missing: Sequence[str]) -> str:
    """A consolidate that leaves out current entries."""
    return (
        f"consolidate must name every entry of {name} once, with keep, text, move or drop, "
        f"but leaves out {_entries(missing)}; nothing was changed."
    )


def consolidate_repeated(name: str, repeated: Sequence[str]) -> str:
    """A consolidate that names entries more than once."""
    return (
        f"consolidate names {_entries(repeated)} of {name} more than once; name each entry "
        "once, so nothing was changed."
    )


def item_without_text(name: str, index: int) -> str:
    """A consolidate item with neither `old` nor `text`."""
    return (
        f"consolidate item {index} has neither old nor text; give the text of a new entry, "
        f"or an entry of {name} and what becomes of it, so nothing was changed."
    )


def item_without_fate(name: str, index: int, old: str) -> str:
    """A consolidate item naming an entry without keep, text, move or drop."""
    return (
        f"consolidate item {index} names the entry {quote(old)} of {name} but not what "
        "becomes of it; give one of keep, text, move or drop, so nothing was changed."
    )
