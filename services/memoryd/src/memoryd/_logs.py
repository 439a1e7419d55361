"""What the index holds: rows read from session logs and archive.md.

A session log (`sessions/<id>/<epoch>.jsonl`, loopd's) gives one row per
`user` content, per `assistant` content, and per tool call the assistant made
(`name {arguments}`); never a tool result, never `reasoning_content`. Walking the log in
order keeps the session's label so far: the highest class of the `tool_result` records
before a record (at least private), untrusted if any was. A record gets the label in
force when it was written, and is not indexed when that class is above `max_class`.

A record is a complete line. A last line without its newline is a write in progress:
it is left for the next read. A line that is not a session record is counted, skipped
and logged (one log line per read of a log). The label rule, damaged lines included, is
proto's (`proto.label_after`), the same loopd applies. memoryd never writes here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from pathlib import Path
from typing import NamedTuple

import entries
import proto
from proto import (
    SESSION_LOG,
    AssistantRecord,
    Class,
    Label,
    SessionRecord,
    ToolResultRecord,
    UserRecord,
    label_after,
)
from proto import check_session_id as _check_session_id

__all__ = [
    "ARCHIVE_LOG",
    "START",
    "Cursor",
    "Row",
    "SessionLog",
    "archive_rows",
    "count_records",
    "list_logs",
    "log_place",
    "read_log",
    "redact_row",
    "session_logs",
]

log = logging.getLogger("memoryd.logs")

ARCHIVE_LOG = "archive.md"
"""archive.md's key in `progress`: its `records` counts archive entries."""

_LOG_NAME = re.compile(r"(0|[1-9][0-9]{0,8})\.jsonl")


class Row(NamedTuple):
    """One indexed text and its source: the columns of `sources` after the text."""

    text: str
    kind: str  # "session" or "archive"
    session: str
    epoch: int | None
    record: int
    time: str
    role: str  # "user", "assistant", "tool_call"; for archive.md the file it came from
    class_: str
    untrusted: int
    context: str = ""
    """The message this row's message follows in its session (the owner's or the
    assistant's, as indexed): the context ranking searches a reply with it. Empty for a
    tool call, an archive entry, and a session's first message."""

    def source(self) -> tuple[str, str, int | None, int, str, str, str, int]:
        """The row's columns of `sources` (after its rowid)."""
        return (
            self.kind,
            self.session,
            self.epoch,
            self.record,
            self.time,
            self.role,
            self.class_,
            self.untrusted,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Cursor:
    """How far a log has been read: complete records, their bytes, the label after them.

    `inode` is the file's when it was read: a log rewritten since (a forget, by loopd,
    atomically: a new inode) has other byte offsets, so its cursor no longer holds and
    the log is walked again from its start, by record count.
    """

    records: int
    offset: int
    label: Label
    """The label after the records read."""
    inode: int = 0
    said: str = ""
    """The last message (the owner's or the assistant's) indexed before this point: the
    context of the next one. Kept in memory only (a cursor is never saved: it holds
    text), so a log first read in a run is read from its start."""

    def still(self, path: Path) -> bool:
        """Whether this cursor still points into `path` (the same file, not a rewrite)."""
        if self.offset == 0:
            return True
        try:
            return os.stat(path).st_ino == self.inode
        except OSError:
            return False


START = Cursor(records=0, offset=0, label=proto.SESSION_START)


@dataclasses.dataclass(frozen=True, slots=True)
class SessionLog:
    """One session log file."""

    session: str
    epoch: int
    path: Path

    @property
    def key(self) -> str:
        """The log's name in `progress`: `<session>/<epoch>.jsonl`."""
        return f"{self.session}/{self.epoch}.jsonl"


def session_logs(sessions_dir: Path, session: str) -> list[SessionLog]:
    """The logs of one session, by epoch; none when its directory is missing."""
    _check_session_id(session)
    try:
        with os.scandir(sessions_dir / session) as found:
            names = [e.name for e in found if e.is_file(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    logs = []
    for name in names:
        if _LOG_NAME.fullmatch(name):
            epoch = int(name.partition(".")[0])
            logs.append(SessionLog(session, epoch, sessions_dir / session / name))
    return sorted(logs, key=lambda found_log: found_log.epoch)


def list_logs(sessions_dir: Path) -> list[SessionLog]:
    """Every session log under `sessions_dir`, by session then epoch."""
    try:
        with os.scandir(sessions_dir) as found:
            sessions = sorted(e.name for e in found if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return []
    return [
        found_log
        for session in sessions
        if _is_session_id(session)
        for found_log in session_logs(sessions_dir, session)
    ]


def _is_session_id(name: str) -> bool:
    try:
        _check_session_id(name)
    except ValueError:
        return False
    return True


def log_place(path: Path) -> tuple[int, int]:
    """How many complete lines `path` holds, and the bytes up to the end of the last one."""
    count = end = read = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            newlines = chunk.count(b"\n")
            if newlines:
                count += newlines
                end = read + chunk.rindex(b"\n") + 1
            read += len(chunk)
    return count, end


def count_records(path: Path) -> int:
    """How many complete lines `path` holds (0 when it is missing)."""
    count = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                count += chunk.count(b"\n")
    except FileNotFoundError:
        return 0
    return count


def read_log(
    found: SessionLog, start: Cursor, *, indexed: int, max_class: Class
) -> tuple[list[Row], Cursor]:
    """Read `found` from `start` to its last complete line.

    Args:
        found: The log.
        start: Where to begin: `START`, or the cursor a previous read returned.
        indexed: Records before this number are walked for the label only (they are in
            the index already).
        max_class: Records whose label is above this class give no rows.

    Returns:
        The rows of the records from `indexed` on, and the cursor after the last
        complete line.
    """
    rows: list[Row] = []
    try:
        inode = os.stat(found.path).st_ino  # before the read: a rewrite after it shows next time
    except FileNotFoundError:
        inode = 0
    label, record, offset = start.label, start.records, start.offset
    said = start.said
    bad: list[proto.Line[SessionRecord]] = []
    for line in SESSION_LOG.lines(found.path, offset=start.offset, number=start.records + 1):
        record, offset = line.number, line.end
        parsed = line.record
        if parsed is None:
            if record > indexed:  # lines read before were reported then
                bad.append(line)
        elif not isinstance(parsed, ToolResultRecord) and label.class_.rank <= max_class.rank:
            if record > indexed:
                _add_rows(rows, parsed, found, record - 1, label, said)
            said = _message(parsed) or said
        label = label_after(label, line)
    if bad:
        log.warning(
            "%s: skipped %d line(s) that are not session records (first: line %d: %s)",
            found.path,
            len(bad),
            bad[0].number,
            bad[0].problem,
        )
    return rows, Cursor(records=record, offset=offset, label=label, inode=inode, said=said)


def _message(parsed: UserRecord | AssistantRecord) -> str:
    """The record's message as a row holds it ("" when it gives no message row)."""
    content = parsed.content or ""
    return content if content.strip() else ""


def _add_rows(
    rows: list[Row],
    parsed: UserRecord | AssistantRecord,
    found: SessionLog,
    record: int,
    label: Label,
    said: str,
) -> None:
    def row(text: str, role: str, context: str = "") -> Row:
        return Row(
            text,
            "session",
            found.session,
            found.epoch,
            record,
            parsed.time,
            role,
            label.class_.value,
            int(label.untrusted),
            context,
        )

    if isinstance(parsed, UserRecord):
        if parsed.content.strip():
            rows.append(row(parsed.content, "user", said))
        return
    if parsed.content and parsed.content.strip():
        rows.append(row(parsed.content, "assistant", said))
    for call in parsed.tool_calls:
        rows.append(row(f"{call.name} {call.arguments}", "tool_call"))


def redact_row(text: str, role: str, needle: str) -> str:
    """A row's text with `needle` out of it, as the row of the redacted record would read.

    loopd redacts a message as text and a tool call's arguments as JSON (`redact_text`);
    a tool call's row is `name arguments`.
    """
    if role == "tool_call":
        name, space, arguments = text.partition(" ")
        if space:
            return f"{proto.redact(name, needle)} {proto.redact_text(arguments, needle)}"
    return proto.redact_text(text, needle)


def archive_rows(path: Path, *, max_class: Class) -> tuple[list[Row], int]:
    """One row per entry of archive.md, in order, private and trusted.

    Returns:
        The rows (none when `max_class` is below private), and the number of entries.
    """
    found = archive_entries(path)
    if Class.private.rank > max_class.rank:
        return [], len(found)
    rows = [
        Row(
            entry.text,
            "archive",
            entry.session,
            None,
            number,
            entry.moved_at,
            entry.name,
            Class.private.value,
            0,
        )
        for number, entry in enumerate(found)
    ]
    return rows, len(found)


def archive_entries(path: Path) -> list[entries.ArchiveEntry]:
    """The entries of archive.md (none when it is missing); problems are logged."""
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    found, problems = entries.parse_archive(text)
    for problem in problems:
        log.warning("%s", problem)
    return found
