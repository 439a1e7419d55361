"""The inverse of an applied edit, for the owner's undo; pure.

An applied edit is known by the journal's `before` and `after` entries of its file, so
its inverse is worked out from those alone, whatever the action was: the edit that turns
`after` back into `before`, exactly. It is the plainest edit that does so, because the
owner reads it before confirming: an added entry is removed; a removed entry is added
back (a plain add when it was the last entry, else a consolidate that puts it back in its
place); a replaced entry is replaced back; anything else (a consolidate) is undone by a
consolidate over `after` that keeps what stayed, drops what came, and brings back what
went, in `before`'s order. Entries a consolidate moved to archive.md stay there as well:
archive.md is append-only.

Like every edit, an inverse names entries by their text, so one applied to a file that
has changed since (a stale undo) is refused by `apply_edit` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from proto import (
    ConsolidateItem,
    MemoryAdd,
    MemoryArgs,
    MemoryConsolidate,
    MemoryFile,
    MemoryRemove,
    MemoryReplace,
    ToolArgsError,
    parse_memory_args,
)

__all__ = ["inverse", "with_text"]


def inverse(file: MemoryFile, before: Sequence[str], after: Sequence[str]) -> MemoryArgs:
    """The edit that turns the file's entries `after` back into `before`.

    Args:
        file: The file the edit changed: "memory" or "user".
        before: Its entries before the edit, as the journal recorded them.
        after: Its entries after the edit.

    Returns:
        The inverse edit; `apply_edit(after, inverse(...))` gives `before` (when `before`
        fits the file's limit, as any file memoryd wrote does).
    """
    old, new = tuple(before), tuple(after)
    if len(new) == len(old) + 1 and new[:-1] == old:
        return MemoryRemove(file=file, old=new[-1])  # an add
    if len(old) == len(new) + 1:
        if old[:-1] == new:
            return MemoryAdd(file=file, text=old[-1])  # the last entry removed
    elif len(old) == len(new):
        changed = [i for i, (was, now) in enumerate(zip(old, new, strict=True)) if was != now]
        if len(changed) == 1:
            i = changed[0]
            return MemoryReplace(file=file, old=new[i], text=old[i])
    staying = set(new)
    coming = set(old)
    items = [
        ConsolidateItem(old=entry, keep=True) if entry in staying else ConsolidateItem(text=entry)
        for entry in old
    ]
    items += [ConsolidateItem(old=entry, drop=True) for entry in new if entry not in coming]
    return MemoryConsolidate(file=file, entries=items)


def with_text(arguments: str, text: str) -> str | None:
    """A memory add's or replace's arguments with the owner's `text` in place of the model's.

    The owner's correction before approving (edit before approve): the same action, file
    and `old`; brokerd checks the result with the same rules. None when `arguments` is not
    a memory add or replace (a remove or consolidate has no one text to change) or `text`
    is blank.
    """
    if not text.strip():
        return None
    try:
        args = parse_memory_args(arguments)
    except ToolArgsError:
        return None
    if not isinstance(args, MemoryAdd | MemoryReplace):
        return None
    call = msgspec.json.decode(arguments)
    call["text"] = text
    return msgspec.json.encode(call).decode()
