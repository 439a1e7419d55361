"""What memoryd knew about its index at a clean stop, so that the next start trusts it.

At a clean stop, once every connection is closed, `{home}/index/memory.clean` records
the frequent terms' counts and best scores, and the identity (inode, size, mtime) of the
index file and its WAL as they were left. The next start takes the file (reads it and
removes it, before the index is opened): when the index and its WAL are still exactly
what was left, the start skips `PRAGMA quick_check` and loads the statistics instead of
scanning every row for them. Anything else (no file, a file that does not decode, an
index touched since) means the stop was not clean or the index was changed by someone
else: the full check runs, after the catch-up. No log's place is kept here: what the
logs gained is what the journal of changes names (`_index_ingest`), whatever the stop.

The file is removed before the index is opened, so a memoryd that dies at any later
point leaves no mark behind to vouch for a file it was writing. A forget rewrites rows
and logs while memoryd runs; it drops the statistics it invalidates (the next stop
records only what is known again).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec

import proto

from .ranking import Frontier

__all__ = ["CLEAN_FILE", "CleanStop", "FileMark", "VocabularyMark", "mark_of", "take"]

log = logging.getLogger("memoryd.index")

CLEAN_FILE = "memory.clean"


class FileMark(msgspec.Struct, frozen=True, kw_only=True):
    """A file's identity: a write, a replacement or a restore changes at least one part."""

    inode: int
    size: int
    mtime_ns: int


class VocabularyMark(msgspec.Struct, frozen=True, kw_only=True):
    """`Vocabulary`'s snapshot: the frequent terms' counts, the rows and last rowid then."""

    counts: dict[str, int]
    rows: int
    last: int


class BoundsMark(msgspec.Struct, frozen=True, kw_only=True):
    """`TermBounds`' frontiers, and the rows counted when their scan began."""

    frontiers: list[tuple[bytes, Frontier]]
    rows: int


class CleanStop(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the file holds. `wal` is None when the index was left without a WAL file."""

    index: FileMark
    wal: FileMark | None
    vocabulary: VocabularyMark | None
    bounds: BoundsMark | None


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(CleanStop)


def mark_of(path: Path) -> FileMark | None:
    """The identity of `path` now, or None when it is missing."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return FileMark(inode=found.st_ino, size=found.st_size, mtime_ns=found.st_mtime_ns)


def wal_of(index: Path) -> Path:
    """The WAL file of the index at `index`."""
    return Path(f"{index}-wal")


def save(index: Path, stop: CleanStop) -> None:
    """Write `stop` beside `index`, atomically (blocking)."""
    proto.write_atomically(index.with_name(CLEAN_FILE), _encoder.encode(stop))


def take(index: Path) -> CleanStop | None:
    """Read and remove the clean-stop file beside `index`; what it says if it still holds.

    None (and one log line saying why) when there is no file, it cannot be read, or the
    index or its WAL is no longer the one it describes.
    """
    path = index.with_name(CLEAN_FILE)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        log.info(
            "%s was not stopped cleanly (no %s); checking it whole after the catch-up",
            index,
            path.name,
        )
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s; checking the index whole after the catch-up", path, exc)
        data = None
    try:
        path.unlink()
        proto.fsync_dir(path.parent)
    except FileNotFoundError:
        pass
    if data is None:
        return None
    try:
        stop = _decoder.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError is one
        log.warning(
            "%s cannot be decoded (%s); checking the index whole after the catch-up", path, exc
        )
        return None
    found = (mark_of(index), mark_of(wal_of(index)))
    if found != (stop.index, stop.wal):
        log.warning(
            "%s changed since memoryd stopped (now %s, then %s); checking it whole after the "
            "catch-up",
            index,
            found,
            (stop.index, stop.wal),
        )
        return None
    return stop


def remove(index: Path) -> None:
    """Remove the clean-stop file beside `index`, if any (a rebuild replaces the index)."""
    path = index.with_name(CLEAN_FILE)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    proto.fsync_dir(path.parent)
