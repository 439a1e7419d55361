"""Why an entry is in memory (`memory_why`): a read-only join, no new store.

For each entry of memory.md, user.md or archive.md holding the text asked about (a
case-insensitive substring), its story, newest edit first:

- the journal edit that wrote this exact text: the latest applied edit of its file whose
  `after` holds it and whose `before` did not;
- for an archive entry, first the consolidate that moved it, then how it got into its file;
- `previous`: the entry that edit replaced or rewrote (a replace's `old`; a consolidate's
  item whose rewrite is this text), and then that text's own story, and so on;
- `owner_said`: the owner's last message before the call in its session's log.

A story ends where no edit wrote the text: written by hand, or a change memoryd found at
start without a journal line (a `HandChange`: a hand edit, or a crash before the line).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Literal, Protocol

import msgspec

import entries
import proto
from proto import (
    SESSION_LOG,
    AppliedEdit,
    AssistantRecord,
    JournalLine,
    MemoryWhyReply,
    UserRecord,
    WhyEdit,
    WhyEntry,
)

from ._edits import read_history
from ._files import MemoryDir, MemoryUnavailable
from ._history import JournalTable
from ._logs import archive_entries, session_logs

__all__ = ["MAX_VERSIONS", "OWNER_SAID_CHARS", "WHY_PAGE_BYTES", "why"]

log = logging.getLogger("memoryd.why")

MAX_VERSIONS = 20
"""How many earlier versions one entry's story goes back at most."""

OWNER_SAID_CHARS = 4000
"""How much of the owner's message is quoted (then `…`): enough to recognise it."""

WHY_PAGE_BYTES = proto.MAX_FRAME - 4096
"""What the entries of one `memory_why_reply` may take: a frame, less its envelope."""

_encoder = msgspec.json.Encoder()
_FILES: tuple[proto.MemoryFile, ...] = ("memory", "user")
_WhyFile = Literal["memory", "user", "archive"]


LAZY_ENTRIES = 8
"""Up to this many entries, each story walks the journal decoding only the lines whose
bytes hold its text (`JournalView`); more, and the journal is decoded whole once."""


def why(
    memory: MemoryDir, sessions_dir: Path, part: str, journal: JournalTable | None = None
) -> MemoryWhyReply:
    """Every entry holding `part`, with its story; blocking.

    `journal` is memoryd's table of the journal's lines (one is made when not given).

    Raises:
        MemoryUnavailable: memory.md or user.md cannot be read or parsed.
    """
    found: list[tuple[_WhyFile, str, entries.ArchiveEntry | None]] = []
    for memory_file in _FILES:
        name = entries.file_name(memory_file)
        try:
            current = entries.parse(memory.read(name), name=name)
        except entries.ParseError as exc:
            raise MemoryUnavailable(str(exc)) from None
        found += [(memory_file, e, None) for e in current if proto.holds(e, part)]
    for archived in archive_entries(memory.path("archive.md")):
        if proto.holds(archived.text, part):
            found.append(("archive", archived.text, archived))
    if not found:
        return MemoryWhyReply(entries=[])
    history: _Journal
    if len(found) <= LAZY_ENTRIES:
        history = (journal if journal is not None else JournalTable(memory.edits)).view()
    else:
        history = _Decoded(read_history(memory, None))
    teller = _Teller(history, sessions_dir)
    shown: list[WhyEntry] = []
    size = 0
    for number, (file, text, moved) in enumerate(found):
        if moved is None:
            edits = teller.story(f"{file}.md", text, len(teller.history))
        else:
            edits = teller.archived(moved)
        entry = WhyEntry(file=file, entry=text, edits=edits)
        size += len(_encoder.encode(entry)) + 1
        if size > WHY_PAGE_BYTES and shown:
            return MemoryWhyReply(entries=shown, omitted=len(found) - number)
        shown.append(entry)
    return MemoryWhyReply(entries=shown)


def _named(text: str) -> str:
    """An entry as an `old` or a `text` names it: line ends normalised, trimmed."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


class _Journal(Protocol):
    """The journal by position, oldest first; `may_hold` False: that line surely lacks `text`."""

    def __len__(self) -> int: ...
    def __getitem__(self, at: int) -> JournalLine: ...
    def may_hold(self, at: int, text: str) -> bool: ...


@dataclasses.dataclass
class _Decoded:
    """The whole journal decoded: every line may hold any text."""

    records: list[JournalLine]

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, at: int) -> JournalLine:
        return self.records[at]

    def may_hold(self, at: int, text: str) -> bool:
        return True


@dataclasses.dataclass
class _Teller:
    history: _Journal
    sessions_dir: Path
    said: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    """Per session read so far: call id → the owner's last message before it."""

    def story(self, name: str, text: str, end: int) -> list[WhyEdit]:
        """The edits that wrote `text` into `name` before journal line `end`, newest first."""
        edits: list[WhyEdit] = []
        while len(edits) < MAX_VERSIONS:
            at = self._writer(name, text, end)
            if at is None:
                break
            record = self.history[at]
            assert isinstance(record, AppliedEdit)  # `_writer` finds applied edits only
            previous = _previous(record, text)
            edits.append(self._edit(record, previous))
            if previous is None:
                break
            text, end = previous, at
        return edits

    def archived(self, moved: entries.ArchiveEntry) -> list[WhyEdit]:
        """The consolidate that moved an archive entry, then how it got into its file."""
        for at in range(len(self.history) - 1, -1, -1):
            if not self.history.may_hold(at, moved.text):
                continue
            record = self.history[at]
            if (
                isinstance(record, AppliedEdit)
                and record.action == "consolidate"
                and record.file == moved.name
                and record.session == moved.session
                and moved.text in record.moved
            ):
                return [self._edit(record, None), *self.story(moved.name, moved.text, at)]
        return []

    def _writer(self, name: str, text: str, end: int) -> int | None:
        for at in range(end - 1, -1, -1):
            if not self.history.may_hold(at, text):
                continue  # its bytes do not hold the text: not decoded
            record = self.history[at]
            if record.file == name and text in record.after and text not in record.before:
                return at if isinstance(record, AppliedEdit) else None
        return None

    def _edit(self, record: AppliedEdit, previous: str | None) -> WhyEdit:
        own = isinstance(record.decided, proto.OwnerEdit)
        return WhyEdit(
            id=proto.edit_id(record),
            time=record.time,
            action=record.action,
            file=record.file,
            session=record.session,
            call=record.call,
            approval=record.approval,
            decided=record.decided,
            taint=record.taint,
            owner_said=None if own else self._owner_said(record),
            previous=previous,
        )

    def _owner_said(self, record: AppliedEdit) -> str | None:
        if record.session not in self.said:
            self.said[record.session] = self._read_session(record.session)
        said = self.said[record.session].get(record.call)
        if said is not None and len(said) > OWNER_SAID_CHARS:
            return said[:OWNER_SAID_CHARS] + "…"
        return said

    def _read_session(self, session: str) -> dict[str, str]:
        """Each call the assistant made in `session` → the owner's last message before it."""
        before: dict[str, str] = {}
        try:
            logs = session_logs(self.sessions_dir, session)
        except ValueError:  # not a session id (an owner's edit outside any session)
            return before
        for found in logs:
            last: str | None = None
            try:
                for line in SESSION_LOG.lines(found.path):
                    parsed = line.record
                    if isinstance(parsed, UserRecord):
                        last = parsed.content
                    elif isinstance(parsed, AssistantRecord) and last is not None:
                        for call in parsed.tool_calls:
                            before[call.id] = last
            except OSError as exc:
                log.warning("%s cannot be read for memory_why: %s", found.path, exc)
        return before


def _previous(record: AppliedEdit, text: str) -> str | None:
    """The entry `record` replaced or rewrote into `text`, if it was one."""
    args = _arguments(record)
    if record.action == "replace":
        if isinstance(args, proto.MemoryReplace):
            old = _named(args.old)
            return old if old != text else None
        if args is None and len(record.before) == len(record.after):
            # a line written before the journal kept its arguments: a replace keeps places
            old = record.before[record.after.index(text)]
            return old if old != text else None
    if record.action == "consolidate" and isinstance(args, proto.MemoryConsolidate):
        for item in args.entries:
            if (
                item.old is not None
                and item.fate == "rewrite"
                and item.text is not None
                and _named(item.text) == text
            ):
                return _named(item.old)
    return None


def _arguments(record: AppliedEdit) -> proto.MemoryArgs | None:
    if record.arguments is None:
        return None
    try:
        return proto.parse_memory_args(record.arguments)
    except proto.ToolArgsError:
        return None
