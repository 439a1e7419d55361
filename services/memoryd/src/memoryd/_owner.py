"""What the owner's commands mean, decided once here for every surface.

memoryd owns the memory files and the journal, so the rules that read them live here
and nowhere else: which entry the owner names by a part of it (`find`), and what an undo
would do (`plan_undo`). The terminal and Mattermost only show the answer and ask the
owner in their own way; what they then apply is the owner's own edit, through brokerd.
Both are reads: blocking, and run in a worker thread.
"""

from __future__ import annotations

from typing import assert_never

import msgspec

import entries
import proto
from proto import (
    AppliedEdit,
    Error,
    FoundEntry,
    HandChange,
    JournalLine,
    MemoryAmbiguous,
    MemoryFound,
    MemoryNotFound,
    NoSuchEdit,
    UndoHandChange,
    UndoPlanned,
)

from ._files import MemoryDir, MemoryUnavailable

__all__ = ["FIND_PAGE_BYTES", "find", "plan_undo"]

FIND_PAGE_BYTES = proto.MAX_FRAME - 4096
"""What the entries of one `memory_ambiguous` may take: a frame, less its envelope."""

_encoder = msgspec.json.Encoder()
_FILES: tuple[proto.MemoryFile, ...] = ("memory", "user")


def named(text: str) -> str:
    """Text as it names an entry: line ends normalised, trimmed (as entries are)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def find(
    memory: MemoryDir, part: str, file: proto.MemoryFile | None
) -> MemoryFound | MemoryAmbiguous | MemoryNotFound:
    """The entry of memory.md or user.md (of `file` only, if given) that `part` names.

    The closest match wins: the entry that is `part` exactly, then one that is `part`
    folded (in another case, or with invisible characters), then the entries holding
    `part` (`proto.holds`, the rule a forget finds copies by). Several at the closest level
    are ambiguous: the owner says more of the one they mean.

    Raises:
        MemoryUnavailable: a file cannot be read or parsed.
    """
    wanted = named(part)
    needle = proto.fold(wanted)
    holding: list[FoundEntry] = []
    for memory_file in _FILES if file is None else (file,):
        name = entries.file_name(memory_file)
        try:
            current = entries.parse(memory.read(name), name=name)
        except entries.ParseError as exc:
            raise MemoryUnavailable(str(exc)) from None
        holding += [
            FoundEntry(file=memory_file, entry=e) for e in current if proto.holds(e, wanted)
        ]
    exact = [f for f in holding if f.entry == wanted]
    same = [f for f in holding if proto.fold(f.entry) == needle]
    closest = exact or same or holding
    if not closest:
        return MemoryNotFound()
    if len(closest) == 1:
        return MemoryFound(found=closest[0])
    shown: list[FoundEntry] = []
    size = 0
    for number, found in enumerate(closest):
        size += len(_encoder.encode(found)) + 1
        if size > FIND_PAGE_BYTES and shown:
            return MemoryAmbiguous(entries=shown, omitted=len(closest) - number)
        shown.append(found)
    return MemoryAmbiguous(entries=shown)


def plan_undo(
    journal: list[JournalLine], edit: str | None
) -> UndoPlanned | UndoHandChange | NoSuchEdit | Error:
    """What undoing the newest journal line (or the line whose id is `edit`) would do.

    The whole journal is searched, so an edit of any age is found. A hand change is not
    an edit boxmaker applied: there is nothing of its own to undo, and the owner changes
    the file back with an editor. A line a forget touched (or made) is refused: undoing
    it would need the text back, and the forget took it out.
    """
    if edit is None:
        line = journal[-1] if journal else None
    else:
        line = next((j for j in reversed(journal) if proto.edit_id(j) == edit), None)
    if line is not None and line.forgotten is not msgspec.UNSET:
        return Error(
            code="forgotten",
            message=(
                f"edit {proto.edit_id(line)} touched a text that was forgotten; it cannot be "
                "undone; to have it back, tell it again"
            ),
            runbook="forget",
        )
    match line:
        case None:
            return NoSuchEdit(edit=edit)
        case HandChange():
            return UndoHandChange(id=proto.edit_id(line), change=line)
        case AppliedEdit():
            undo = entries.inverse(entries.file_of(line.file), line.before, line.after)
            return UndoPlanned(id=proto.edit_id(line), edit=line, undo=undo)
        case _:
            assert_never(line)
