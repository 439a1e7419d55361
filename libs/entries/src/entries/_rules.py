"""The memory edit rules: apply one edit to a file's entries, or refuse it.

An edit is either applied whole (an `EditOutcome`) or refused (`EditRefused`) with nothing
changed. Entries are named by their text: an `old` is compared, after its line ends are
normalised and it is trimmed, exactly with the file's entries as they are now, so an edit
proposed against an older file is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from proto import (
    ConsolidateItem,
    MemoryAdd,
    MemoryArgs,
    MemoryConsolidate,
    MemoryRemove,
    MemoryReplace,
)

from . import _sentences
from ._archive import header_line
from ._errors import EditRefused
from ._format import chars, check_entry, is_entry, lf
from ._limits import file_name, limit_for

__all__ = ["EditOutcome", "apply_edit"]


@dataclass(frozen=True, slots=True)
class EditOutcome:
    """An applied edit.

    Attributes:
        entries: The file's entries afterwards, in order.
        moved: The entries to append to archive.md, in the order the consolidate gave them.
    """

    entries: tuple[str, ...]
    moved: tuple[str, ...] = ()


def apply_edit(current: Sequence[str], args: MemoryArgs) -> EditOutcome:
    """Apply one memory edit to the entries of the file `args.file` as they are now.

    Args:
        current: The file's entries now, as `parse` gives them.
        args: The approved edit, as `proto.parse_memory_args` gives it.

    Returns:
        The file's new entries, and the entries moved out (consolidate only).

    Raises:
        EditRefused: The edit breaks an edit rule against `current`; its `code` says
            which, its message says what to do.
        ValueError: `current` is not a list of distinct valid entries, or `args.file` is
            not a memory file (programming errors).
    """
    name = file_name(args.file)
    limit = limit_for(args.file)
    entries = _checked(current, name)
    if isinstance(args, MemoryAdd):
        outcome = _add(entries, args.text, name)
    elif isinstance(args, MemoryReplace):
        outcome = _replace(entries, args.old, args.text, name)
    elif isinstance(args, MemoryRemove):
        outcome = EditOutcome(_without(entries, _index(entries, args.old, name)))
    elif isinstance(args, MemoryConsolidate):
        outcome = _consolidate(entries, args.entries, name)
    else:
        assert_never(args)
    size = chars(outcome.entries)
    # A remove only shrinks the file: it may leave a file the owner overfilled still over.
    if size > limit and not isinstance(args, MemoryRemove):
        raise EditRefused("over-limit", _sentences.over_limit(name, size, limit))
    return outcome


def _checked(current: Sequence[str], name: str) -> tuple[str, ...]:
    entries = tuple(current)
    seen: set[str] = set()
    for number, entry in enumerate(entries, 1):
        if not is_entry(entry):
            raise ValueError(f"{name} entry {number} is not a valid entry: {entry!r}")
        if entry in seen:
            raise ValueError(f"{name} entry {number} is a duplicate: {entry!r}")
        seen.add(entry)
    return entries


def _named(old: str) -> str:
    r"""The entry an `old` names: an entry never has surrounding whitespace or `\r`."""
    return lf(old).strip()


def _index(entries: tuple[str, ...], old: str, name: str) -> int:
    wanted = _named(old)
    try:
        return entries.index(wanted)
    except ValueError:
        raise EditRefused("no-match", _sentences.no_match(name, [wanted])) from None


def _without(entries: tuple[str, ...], index: int) -> tuple[str, ...]:
    return entries[:index] + entries[index + 1 :]


def _add(entries: tuple[str, ...], text: str, name: str) -> EditOutcome:
    entry = check_entry(text, name=name)
    if entry in entries:
        raise EditRefused("duplicate", _sentences.already_there(name, entry))
    return EditOutcome((*entries, entry))


def _replace(entries: tuple[str, ...], old: str, text: str, name: str) -> EditOutcome:
    index = _index(entries, old, name)
    entry = check_entry(text, name=name)
    # Replacing an entry with itself changes nothing and is allowed.
    if entry in _without(entries, index):
        raise EditRefused("duplicate", _sentences.duplicate(name, entry))
    return EditOutcome((*entries[:index], entry, *entries[index + 1 :]))


def _consolidate(
    entries: tuple[str, ...], items: Sequence[ConsolidateItem], name: str
) -> EditOutcome:
    # Malformed items first, then a stale edit, then what the consolidate leaves out.
    for index, item in enumerate(items):
        if item.old is None and item.text is None:
            raise EditRefused("bad-entry", _sentences.item_without_text(name, index))
        if item.old is not None and item.fate == "rewrite" and item.text is None:
            raise EditRefused("bad-entry", _sentences.item_without_fate(name, index, item.old))
    named = [_named(item.old) for item in items if item.old is not None]
    counts = Counter(named)
    unknown = [old for old in counts if old not in entries]
    if unknown:
        raise EditRefused("consolidate-unknown", _sentences.no_match(name, unknown))
    repeated = [old for old, n in counts.items() if n > 1]
    if repeated:
        raise EditRefused("consolidate-repeated", _sentences.consolidate_repeated(name, repeated))
    missing = [entry for entry in entries if entry not in counts]
    if missing:
        raise EditRefused("consolidate-missing", _sentences.consolidate_missing(name, missing))

    kept: list[str] = []
    moved: list[str] = []
    for item in items:
        fate = item.fate
        if item.old is not None and fate in ("keep", "move", "drop"):
            if fate == "keep":
                kept.append(_named(item.old))
            elif fate == "move":
                moved.append(_named(item.old))
        elif item.text is not None:
            kept.append(check_entry(item.text, name=name))
    duplicates = [entry for entry, n in Counter(kept).items() if n > 1]
    if duplicates:
        raise EditRefused("duplicate", _sentences.duplicate(name, duplicates[0]))
    for entry in moved:
        line = header_line(entry)
        if line is not None:
            raise EditRefused("bad-entry", _sentences.cannot_move(name, entry, line))
    return EditOutcome(tuple(kept), tuple(moved))
