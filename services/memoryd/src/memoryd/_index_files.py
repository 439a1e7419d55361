"""The index file as every part of the index shares it: connections, locks, health.

SQLite runs in worker threads. One writer connection, behind `write_lock`, adds rows;
`READERS` reading connections, each lent to one search at a time (`reading`), answer
recall while the writer works (WAL). `exclusive` holds the writer and every reader:
nobody touches the file meanwhile (a swap, a forget, the close). `rebuild_lock` is held
by a rebuild and by a forget, never both at once.

Rules: the blocking methods (`open`, `install`, `close_all`, `swap_in`, `checkpoint`)
run in a worker thread, under the lock that owns what they touch: `writing()` under
`write_lock`, the file's connections as a whole under `exclusive`. Reading or writing
that fails calls `doubt`: no clean stop may vouch for the file then, and the index
checks it whole once (`Index`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import sqlean
import trio

import proto

from ._logs import Row
from ._store import (
    INDEX_FILE,
    Connection,
    IndexDamaged,
    OtherRanking,
    Sources,
    Writer,
    connect,
    remove_file,
    verify,
)
from .ranking import prepare

__all__ = ["READERS", "RUNBOOK", "Files", "IndexUnavailable"]

log = logging.getLogger("memoryd.index")

READERS = 2
RUNBOOK = "memory-index-damaged"


class IndexUnavailable(IndexDamaged):
    """The index is not open: it is being built, or its file could not be opened."""


class Files:
    """`{index_dir}/memory.sqlite3`'s connections, the locks over them, and its standing."""

    def __init__(self, index_dir: Path, sources: Sources) -> None:
        self.path = index_dir / INDEX_FILE
        self.sources = sources
        self.inserted: Callable[[Connection, int, list[Row]], None] | None = None
        """Given to each writer (`Writer.inserted`): rows about to be committed."""
        self.ready = trio.Event()
        """Set once the index is open (built, if it had to be)."""
        self.caught_up = trio.Event()
        """Set once the start-up catch-up has read every log."""
        self.write_lock = trio.Lock()
        self.rebuild_lock = trio.Lock()
        self._writer: Writer | None = None
        self._readers: list[Connection] = []
        self._slots = trio.Semaphore(READERS)
        self.checked_whole = False
        """Whether this run's index has passed `PRAGMA quick_check` (or was built anew)."""
        self.doubted = trio.Event()
        """Set when reading or writing the index failed: it is checked whole then, once."""
        self.vouched = True
        """Whether a clean stop may vouch for the file (nothing failed on it this run)."""

    @property
    def is_open(self) -> bool:
        """Whether the file is open (at start, before it is `ready`, too)."""
        return self._writer is not None

    def doubt(self) -> None:
        """Reading or writing the index failed: no clean stop vouches for it, and check it."""
        self.vouched = False
        self.doubted.set()

    def open(self, *, thorough: bool) -> bool:
        """Open the existing file and check it (`thorough`: every page); False if damaged."""
        conn = None
        try:
            conn = connect(self.path)
            verify(conn, self.sources.ranking, thorough=thorough)
            self.install(conn)
        except OtherRanking as exc:
            if conn is not None:
                self.close_all(conn)
            log.info("%s: %s; rebuilding it", self.path, exc)
            return False
        except (IndexDamaged, OSError) as exc:
            if conn is not None:
                self.close_all(conn)
            log.error("%s is damaged (%s); rebuilding it (runbook: %s)", self.path, exc, RUNBOOK)
            return False
        if thorough:
            self.checked_whole = True
        return True

    def install(self, conn: Connection) -> None:
        """Make `conn` the writer, and open the readers beside it."""
        self._writer = Writer(conn, self.sources.ranking)
        self._writer.inserted = self.inserted
        self._readers = []
        for _ in range(READERS):
            reader = connect(self.path)
            prepare(reader)
            self._readers.append(reader)

    def close_all(self, *more: Connection) -> None:
        """Close the writer, every reader and `more` (each once)."""
        writer = [self._writer.conn] if self._writer else []
        for conn in {id(c): c for c in [*self._readers, *writer, *more]}.values():
            try:
                conn.close()
            except sqlean.Error as exc:
                log.warning("closing %s: %s", self.path, exc)
        self._readers, self._writer = [], None

    def swap_in(self, new: Path) -> None:
        """Close every connection, rename `new` over the file and open it (under `exclusive`).

        If the rename fails, `new` is removed and the old file opened again.
        """
        self.close_all()
        for suffix in ("-wal", "-shm"):
            # Only now, with every connection closed, is the old WAL nobody's.
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        try:
            os.replace(new, self.path)
            proto.fsync_dir(self.path.parent)
        except OSError:
            remove_file(new)
            if self.path.exists():
                self.install(connect(self.path))
            raise
        self.install(connect(self.path))
        self.checked_whole = self.vouched = True  # a new file: nothing failed on it yet

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold the writer and every reader: nobody touches the file meanwhile."""
        async with self.write_lock:
            taken = 0
            try:
                for _ in range(READERS):
                    await self._slots.acquire()
                    taken += 1
                yield
            finally:
                for _ in range(taken):
                    self._slots.release()

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[Connection]:
        """Borrow a reader; `IndexUnavailable` when the file is not open."""
        async with self._slots:
            if not self._readers:
                raise IndexUnavailable(f"the recall index {self.path} is not open")
            conn = self._readers.pop()
            try:
                yield conn
            finally:
                self._readers.append(conn)

    def writing(self) -> Writer:
        """The writer (under `write_lock`); `IndexUnavailable` when the file is not open."""
        if self._writer is None:
            raise IndexUnavailable(f"the recall index {self.path} is not open")
        return self._writer

    def checkpoint(self) -> bool:
        """Checkpoint the WAL into the file and truncate it; True if a reader kept it busy."""
        try:
            row = self.writing().conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlean.Error as exc:
            log.warning("checkpoint of %s: %s", self.path, exc)
            return True
        return bool(row[0])
