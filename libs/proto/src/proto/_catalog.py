"""`sessions/.catalog.jsonl`: one line per session loopd created, so nobody walks sessions/.

Listing the sessions of an old home by opening each folder grew with the home's age (6.6 s
for 65,000 sessions); resolving one id stat'ed every folder. The catalog is the list
itself: loopd appends a line when it creates a session (after the session's files are
durable, so a catalogued session always has its baseline), and bxctl reads it.

The name starts with a dot, which no session id can (`SESSION_ID_PATTERN`), so every
listing of sessions/ that skips loopd's own entries (`.forget`) skips it too.

A home older than the catalog, or a catalog someone removed, is behind: its reader finds
the sessions it lacks (by name, one directory read without a `stat` per entry) and
`complete_catalog` writes them in once, atomically, under the same lock as loopd's
appends, so neither loses the other's lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from ._durable import append_line, write_atomically

__all__ = [
    "CATALOG_FILE",
    "CatalogEntry",
    "CatalogRead",
    "append_to_catalog",
    "complete_catalog",
    "drop_from_catalog",
    "read_catalog",
]

CATALOG_FILE = ".catalog.jsonl"


class CatalogEntry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A session as it was created: its id, its baseline's `created`, who asked for it."""

    session: str
    created: str
    origin: str | msgspec.UnsetType = msgspec.UNSET
    """`session_open`'s origin; unset for a session catalogued after it was created."""


_encoder = msgspec.json.Encoder()
_entry = msgspec.json.Decoder(CatalogEntry)
_entries = msgspec.json.Decoder(list[CatalogEntry])


class CatalogRead(msgspec.Struct, frozen=True, kw_only=True):
    """The catalog's whole, readable lines in file order, and whether any was not one."""

    entries: list[CatalogEntry]
    damaged: bool
    """A torn or unreadable line was left out: the catalog may lack its session."""


def read_catalog(root: Path) -> CatalogRead | None:
    """Every whole, readable line of `root`'s catalog in file order; None when there is none.

    A torn last line (a crash mid-append) and a damaged line are left out, and said: the
    session they name is then one the catalog lacks, found again as any other.
    """
    try:
        data = (root / CATALOG_FILE).read_bytes()
    except FileNotFoundError:
        return None
    whole = data[: data.rfind(b"\n") + 1]
    torn = len(whole) < len(data)
    if not whole:
        return CatalogRead(entries=[], damaged=torn)
    try:  # one decode for the whole file: 65,000 lines in a few tens of milliseconds
        entries = _entries.decode(b"[" + whole.rstrip(b"\n").replace(b"\n", b",") + b"]")
        return CatalogRead(entries=entries, damaged=torn)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return CatalogRead(entries=list(_each(whole.splitlines())), damaged=True)


def _each(lines: Iterable[bytes]) -> Iterator[CatalogEntry]:
    for line in lines:
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            yield _entry.decode(line)


def append_to_catalog(root: Path, entry: CatalogEntry) -> None:
    """Add a session just created, as one whole line, fsynced (blocking)."""
    with sessions_locked(root):
        append_line(root / CATALOG_FILE, _encoder.encode(entry))


def complete_catalog(root: Path, missing: Iterable[CatalogEntry]) -> None:
    """Write `missing` into the catalog (made when there is none), atomically (blocking).

    The catalog is read again under the lock, so a session loopd appended meanwhile
    stays; an entry already there is not written twice. The catalog's modification time
    is then now: a reader takes a sessions/ changed after it as a sign it may be behind.
    """
    with sessions_locked(root):
        read = read_catalog(root)
        kept = [] if read is None else read.entries
        known = {entry.session for entry in kept}
        added = [entry for entry in missing if entry.session not in known]
        path = root / CATALOG_FILE
        if added or read is None or read.damaged:  # a damaged line is dropped
            _rewrite(path, [*kept, *added])
        # Newer than sessions/ (which its own rename just changed): complete until a
        # session's folder is made after it.
        os.utime(path)


def drop_from_catalog(root: Path, session: str) -> None:
    """Take `session` out of the catalog, atomically (blocking; a rewrite of the whole file).

    For a session loopd wrote and then took back whole (its first message was refused
    for the model's context): its folder is gone, and its id may be written again later.
    """
    with sessions_locked(root):
        read = read_catalog(root)
        if read is None:
            return
        kept = [entry for entry in read.entries if entry.session != session]
        if len(kept) < len(read.entries) or read.damaged:
            _rewrite(root / CATALOG_FILE, kept)


def _rewrite(path: Path, entries: Iterable[CatalogEntry]) -> None:
    """The catalog at `path` replaced, atomically, by `entries` (under `_locked`)."""
    write_atomically(path, b"".join(_encoder.encode(entry) + b"\n" for entry in entries))


@contextlib.contextmanager
def sessions_locked(root: Path) -> Iterator[None]:
    """sessions/ itself locked (flock) by each append and by a completion.

    Not the catalog: a completion replaces it, and an append to the old file would be lost.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
