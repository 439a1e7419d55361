"""What bm25 needs to know about the index, read without walking postings per query.

FTS5's bm25 uses three statistics: the rows in the table and the tokens in them (kept by
FTS5 in its averages record, read by `_fts5.averages`), the token count of a row, and,
per query term, the rows holding it. FTS5 counts the last by walking the term's
postings; `_fts5.walk_count` does the same. For a word in most rows that walk costs hundreds of
milliseconds at ten million rows, so `Vocabulary` keeps the counts of the frequent terms
from one background scan and brings them up to date per query by counting only the rows
added since (`rowid > last`), which FTS5 seeks to.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from . import _tuning
from ._fts5 import Connection, averages, frequent_terms, walk_count

__all__ = ["Vocabulary"]


def _tail_count(conn: Connection, token: str, after: int) -> int:
    found = conn.execute(
        "SELECT count(*) FROM hits WHERE hits MATCH ? AND rowid > ?", (f'"{token}"', after)
    )
    return int(found.fetchone()[0])


class Vocabulary:
    """How many rows hold a term, exactly, without walking its postings on every query.

    One scan (`scan`, in the background) reads the counts of the terms in at least
    `KEEP_SHARE` of the rows, and the last rowid then. A count asked for later is that count
    plus the rows past that rowid holding the term. Rows are only ever appended with
    higher rowids; whoever removes rows does it inside `removing`. A term not kept was
    in fewer than `KEEP_SHARE` of the rows: its own walk is short. Once the index has grown
    by more than `STALE_SHARE` since the scan, `stale` says so, and the caller scans again
    (both in `_tuning`).
    """

    def __init__(self) -> None:
        self._snapshot: tuple[dict[str, int], int, int] | None = None
        self._generation = 0
        self._removing = 0
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget the snapshot (the index was replaced by a new file)."""
        with self._lock:
            self._snapshot = None
            self._generation += 1

    @contextmanager
    def removing(self) -> Iterator[None]:
        """Around a write that removes rows: no snapshot is used or kept until it is done.

        A scan that read the file before the removal must not be kept after it, and a
        search that reads the file after it must not use an older snapshot.
        """
        with self._lock:
            self._removing += 1
            self._snapshot = None
            self._generation += 1
        try:
            yield
        finally:
            with self._lock:
                self._removing -= 1
                self._snapshot = None
                self._generation += 1

    def stale(self, rows: int) -> bool:
        """Whether the snapshot is missing or too old for an index of `rows` rows."""
        snapshot = self._snapshot
        return snapshot is None or not 0 <= rows - snapshot[1] <= _tuning.STALE_SHARE * snapshot[1]

    def scan(self, conn: Connection) -> None:
        """Read the counts of the frequent terms, in one read transaction."""
        with self._lock:
            generation = self._generation
        conn.execute("BEGIN")
        try:
            rows, _ = averages(conn)
            last = conn.execute("SELECT coalesce(max(rowid), 0) FROM sources").fetchone()[0]
            counts = frequent_terms(conn, max(1, math.ceil(_tuning.KEEP_SHARE * rows)))
        finally:
            conn.execute("COMMIT")
        with self._lock:
            if generation == self._generation and not self._removing:
                self._snapshot = (counts, rows, int(last))

    def snapshot(self) -> tuple[dict[str, int], int, int] | None:
        """The last scan's counts, rows and last rowid, or None (to keep at a clean stop)."""
        return None if self._removing else self._snapshot

    def restore(self, counts: dict[str, int], rows: int, last: int) -> None:
        """Use a snapshot kept at a clean stop of this very file, as if scanned now."""
        with self._lock:
            if not self._removing:
                self._snapshot = (counts, rows, last)

    def rows(self) -> int | None:
        """The rows of the index when the last scan read it, or None."""
        snapshot = self._snapshot
        return None if snapshot is None else snapshot[1]

    def frequent(self) -> list[str] | None:
        """The terms the last scan kept (in at least `KEEP_SHARE` of the rows), or None."""
        snapshot = self._snapshot
        return None if snapshot is None else list(snapshot[0])

    def count(self, conn: Connection, token: str) -> int:
        """The rows holding `token` (a lower-case ASCII token), in the caller's transaction."""
        snapshot = None if self._removing else self._snapshot
        if snapshot is not None:
            counts, _, last = snapshot
            known = counts.get(token)
            if known is not None:
                return known + _tail_count(conn, token, last)
        return walk_count(conn, token)
