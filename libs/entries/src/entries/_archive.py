"""archive.md: the append-only record of entries moved out by consolidate.

Each record is a header line and the entry:

    § moved 2026-09-24T20:14Z from memory.md in session mm-y73sxj3popgwumyccptb56p1ah
    <the entry>
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from proto import check_session_id

from ._format import is_entry, lf
from ._sentences import quote

__all__ = [
    "ARCHIVE_HEADER_PATTERN",
    "ArchiveEntry",
    "archive_record",
    "is_archive_header",
    "parse_archive",
]

ARCHIVE_HEADER_PATTERN = (
    r"^§ moved [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z from (memory|user)\.md "
    r"in session [a-z]{2,8}-[a-z0-9]{8,64}$"
)
"""A line that begins a record of archive.md (matched against the whole line)."""

_HEADER = re.compile(
    r"§ moved (?P<moved_at>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z)"
    r" from (?P<name>(?:memory|user)\.md)"
    r" in session (?P<session>[a-z]{2,8}-[a-z0-9]{8,64})"
)
_NAMES = ("memory.md", "user.md")


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """One record of archive.md.

    Attributes:
        moved_at: When it was moved, as written: `2026-09-24T20:14Z` (UTC).
        name: The file it came from: "memory.md" or "user.md".
        session: The session whose consolidate moved it.
        text: The entry.
    """

    moved_at: str
    name: str
    session: str
    text: str


def is_archive_header(line: str) -> bool:
    """Whether `line` (without its line end) would begin a record of archive.md."""
    return _HEADER.fullmatch(line) is not None


def header_line(entry: str) -> str | None:
    """The first line of `entry` that would read as a header of archive.md, if any."""
    return next((line for line in lf(entry).split("\n") if is_archive_header(line)), None)


def archive_record(entry: str, *, name: str, session: str, moved_at: datetime) -> str:
    """The text appended to archive.md for one moved entry, ending with a newline.

    Args:
        entry: The entry, exactly as it stood in the file.
        name: The file it came from: "memory.md" or "user.md".
        session: The id of the session whose consolidate moved it.
        moved_at: When; timezone-aware, written in UTC to the minute.

    Raises:
        ValueError: A programming error: `entry` is not a valid entry or has a line that
            would read as a header (`apply_edit` refuses to move such an entry), `name` or
            `session` is not valid, or `moved_at` is naive.
    """
    if name not in _NAMES:
        raise ValueError(f"bad archive source {name!r}: expected 'memory.md' or 'user.md'")
    check_session_id(session)
    if not is_entry(entry):
        raise ValueError(f"not an entry: {quote(entry)}")
    line = header_line(entry)
    if line is not None:
        raise ValueError(f"entry {quote(entry)} has a line that reads as a header: {quote(line)}")
    if moved_at.tzinfo is None or moved_at.utcoffset() is None:
        raise ValueError(f"moved_at must be timezone-aware, got naive {moved_at.isoformat()}")
    t = moved_at.astimezone(UTC)
    stamp = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}Z"
    return f"§ moved {stamp} from {name} in session {session}\n{entry}\n"


def parse_archive(text: str) -> tuple[list[ArchiveEntry], list[str]]:
    """The records of archive.md, in order, and what had to be skipped.

    A record begins at a header line and runs to the next one; its entry is trimmed. Text
    before the first header, and a header with no entry, are skipped: each gives one
    problem, a sentence naming the line, for the caller to log.

    Args:
        text: archive.md's text (line ends are normalised first).

    Returns:
        The records, and the problems.
    """
    chunks: list[tuple[re.Match[str] | None, int, list[str]]] = [(None, 1, [])]
    for number, line in enumerate(lf(text).split("\n"), 1):
        header = _HEADER.fullmatch(line)
        if header is None:
            chunks[-1][2].append(line)
        else:
            chunks.append((header, number, []))
    entries: list[ArchiveEntry] = []
    problems: list[str] = []
    for header, start, lines in chunks:
        piece = "\n".join(lines).strip()
        if header is None:
            if piece:
                problems.append(
                    f"archive.md line {start}: text before the first record was skipped."
                )
        elif not piece:
            problems.append(f"archive.md line {start}: a record with no entry was skipped.")
        else:
            entries.append(
                ArchiveEntry(
                    moved_at=header["moved_at"],
                    name=header["name"],
                    session=header["session"],
                    text=piece,
                )
            )
    return entries, problems
