"""`sessions/.changed`: one line per write to a session log, so a reader finds what changed.

memoryd indexes the session logs. A turn that ends while memoryd is down (or before it
hears of it) must be found at its next start; walking every session folder for that grew
with the home's age (2.5 s for 65,000 sessions, 7-15 s cold). The journal is what
changed, in order: every writer of a session log (`loopd`'s session store, its forget's
rewrite) appends the session's id here just before it writes the log, and a reader that
kept its place reads only the lines after it, however old the home.

The file starts with a header line holding a random id. A place (`ChangesPlace`) is that
id and a byte offset; the journal's content says whether a place still holds, never its
age: a journal started anew (it outgrew `LIMIT`, or was removed and made again) has
another id, and a reader whose place is in an older journal, or whose journal is gone,
is told it cannot say what changed (`Changes.sessions` is None) and looks at every log.

The line is written before the log and not fsynced: a write the journal lost (a power
cut just after) or never saw (a log edited by hand) is found by the reader's own
look at every log, which memoryd still makes, out of the way, after each start.

The name starts with a dot, which no session id can, so every listing of session
folders skips it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import NamedTuple

import msgspec

from ._catalog import sessions_locked
from ._durable import write_atomically
from ._ids import is_session_id

__all__ = [
    "CHANGES_FILE",
    "LIMIT",
    "NO_JOURNAL",
    "Changes",
    "ChangesPlace",
    "changes_since",
    "note_change",
]

CHANGES_FILE = ".changed"
LIMIT = 16 << 20
"""A journal larger than this is started anew (16 MiB: about 500,000 writes)."""
_HEADER = b"boxmaker sessions changed "
_ID_DIGITS = 8
"""A journal's id: 8 hex digits, a random number below 2**31 (a reader may keep it in an
SQLite integer beside a 32-bit offset)."""
_HEADER_SIZE = len(_HEADER) + _ID_DIGITS + 1


class ChangesPlace(msgspec.Struct, frozen=True, kw_only=True):
    """How far a reader has read: the journal's id ("" when there was none) and bytes."""

    journal: str
    """8 hex digits; "" for no journal."""
    offset: int


NO_JOURNAL = ChangesPlace(journal="", offset=0)
"""The place of a reader that found no journal: every line of the next one is new."""


class Changes(NamedTuple):
    """What a reader learns from the journal since its place."""

    sessions: frozenset[str] | None
    """The sessions written since; None when the journal cannot say (see the module)."""
    place: ChangesPlace
    """Where the journal's whole lines end now: the reader's next place."""


def note_change(root: Path, session: str) -> None:
    """Say that `session`'s log is about to be written (blocking; no fsync, see the module).

    `session` is a checked session id (the writer's own). A journal that has outgrown
    `LIMIT` is started anew first.
    """
    path = root / CHANGES_FILE
    line = session.encode() + b"\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except FileNotFoundError:
        _start(path, line)
        return
    try:
        if os.fstat(fd).st_size + len(line) > LIMIT:
            _start(path, line)
            return
        os.write(fd, line)  # O_APPEND: one whole line, never interleaved with another
    finally:
        os.close(fd)


def _start(path: Path, first: bytes) -> None:
    """A new journal at `path` (a new id), holding `first`."""
    with sessions_locked(path.parent):
        journal = f"{secrets.randbelow(2**31 - 1) + 1:0{_ID_DIGITS}x}"
        header = _HEADER + journal.encode() + b"\n"
        write_atomically(path, header + first)  # its mode is the folder's (`file_mode`)


def changes_since(root: Path, place: ChangesPlace | None) -> Changes:
    """The sessions written since `place` (None: a reader without one), and the place now.

    Reads the header and the lines after `place`, nothing else. Only whole lines count:
    a line being written is read next time. A journal that does not hold `place`
    (another id, shorter than it, a damaged line after it) cannot say; nor can a journal
    whose header is damaged (it keeps no place at all until it is started anew).
    """
    try:
        with open(root / CHANGES_FILE, "rb") as f:
            head = f.read(_HEADER_SIZE)
            header = head[: head.find(b"\n") + 1]
            journal = _journal_id(header)
            size = os.fstat(f.fileno()).st_size
            if journal is None:
                return Changes(None, NO_JOURNAL)
            if place == NO_JOURNAL:
                start: int | None = len(header)
            elif place is not None and place.journal == journal and place.offset <= size:
                start = max(place.offset, len(header))
            else:
                start = None  # only where the journal ends now is wanted
            f.seek(max(len(header), size - _HEADER_SIZE) if start is None else start)
            data = f.read()
            read_from = f.tell() - len(data)
    except FileNotFoundError:
        return Changes(frozenset() if place == NO_JOURNAL else None, NO_JOURNAL)
    whole = data[: data.rfind(b"\n") + 1]
    now = ChangesPlace(journal=journal, offset=read_from + len(whole))
    if start is None:
        return Changes(None, now)
    sessions = set()
    for raw in whole.splitlines():
        name = raw.decode("ascii", "replace")
        if not is_session_id(name):
            return Changes(None, now)  # a damaged line may hide a session
        sessions.add(name)
    return Changes(frozenset(sessions), now)


def _journal_id(header: bytes) -> str | None:
    if not header.startswith(_HEADER):
        return None
    journal = header[len(_HEADER) : -1].decode("ascii", "replace")
    digits = len(journal) == _ID_DIGITS and all(c in "0123456789abcdef" for c in journal)
    return journal if digits and 0 < int(journal, 16) < 2**31 else None
