"""What the recall engine keeps about the index beside it: term counts and best scores.

`vocabulary` (the frequent terms' row counts) is counted again whenever a search finds
it stale (`recount`), on a reader, off the serving path. `bounds` (the frequent terms'
best scores) are read once per file and again each time the index has doubled, in a
process of their own (`scan_elsewhere`), and kept up as rows are added (`bound`, the
writer's hook), so they never go stale. A clean stop saves both (`marks`) and the next
start takes them up (`restore`).

Rules: rows rewritten or dropped are counted out under `vocabulary.removing()` and clear
`bounds` (the loose bound serves until the next scan); a rebuild's swap or a forget
cancels a running scan (`stop_scan`): it reads a file that is no longer the index, or
holds a read that keeps the WAL from shrinking.
"""

from __future__ import annotations

import logging

import sqlean
import trio

from ._clean import BoundsMark, CleanStop, VocabularyMark
from ._index_files import RUNBOOK, Files
from ._logs import Row
from ._store import Connection, IndexDamaged
from .ranking import (
    OPTIMISE_FROM_ROWS,
    ScanFailed,
    TermBounds,
    Vocabulary,
    scan_elsewhere,
)

__all__ = ["BOUNDS_AGAIN_FROM", "Statistics"]

log = logging.getLogger("memoryd.index")

BOUNDS_AGAIN_FROM = OPTIMISE_FROM_ROWS
"""The best scores are read again once the index has doubled, from this many rows (below
them recall runs the spec's query as it is, without them)."""


class Statistics:
    """The index's term counts (`vocabulary`) and best scores (`bounds`), kept up."""

    def __init__(self, files: Files) -> None:
        self.files = files
        self.vocabulary = Vocabulary()
        self.bounds = TermBounds()
        self._scanning: trio.CancelScope | None = None
        """The scan of the terms' best scores, while one runs."""
        self._bounds_rows = 0
        """The rows counted when the last scan of the best scores began."""
        self._rescan = trio.Event()

    def recount(self) -> None:
        """Count the terms again (rows were rewritten, or a search found them stale)."""
        self._rescan.set()

    def opened(self) -> None:
        """The file was opened: count it now unless a clean stop kept its counts and scores."""
        if self.vocabulary.rows() is None or self.bounds.missing():
            self._rescan.set()

    def clear(self) -> None:
        """Forget the counts and best scores: a new file."""
        self.vocabulary.clear()
        self.bounds.clear()

    def stop_scan(self) -> None:
        """Cancel the scan of the best scores, if one runs (its process is killed)."""
        if self._scanning is not None:
            self._scanning.cancel()

    def restore(self, clean: CleanStop) -> None:
        """Take up the term counts and best scores a clean stop kept."""
        if clean.vocabulary is not None:
            mark = clean.vocabulary
            self.vocabulary.restore(mark.counts, mark.rows, mark.last)
        if clean.bounds is not None:
            self.bounds.restore(dict(clean.bounds.frontiers))
            self._bounds_rows = clean.bounds.rows

    def marks(self) -> tuple[VocabularyMark | None, BoundsMark | None]:
        """The term counts and best scores, for a clean stop."""
        vocabulary = self.vocabulary.snapshot()
        frontiers = self.bounds.kept()
        return (
            None
            if vocabulary is None
            else VocabularyMark(counts=vocabulary[0], rows=vocabulary[1], last=vocabulary[2]),
            None
            if frontiers is None
            else BoundsMark(frontiers=list(frontiers.items()), rows=self._bounds_rows),
        )

    def bound(self, conn: Connection, first: int, rows: list[Row]) -> None:
        """Fold rows about to be committed into the terms' best scores (or forget those)."""
        try:
            self.bounds.added(conn, first, [row.text for row in rows])
        except sqlean.Error as exc:
            # Without these rows the bounds could be too low: use the loose ones until
            # the next scan.
            log.warning("cannot read the best scores of new rows: %s; rescanning later", exc)
            self.bounds.clear()

    async def keep(self) -> None:
        """Rescan the frequent terms' counts whenever a search finds them stale.

        After a new file, the frequent terms' best scores are read too (they are kept up
        as rows are added, so they never go stale).
        """
        while True:
            await self._rescan.wait()
            self._rescan = trio.Event()
            if not self.files.ready.is_set():
                continue
            started = trio.current_time()
            try:
                async with self.files.reading() as conn:
                    await trio.to_thread.run_sync(self.vocabulary.scan, conn)
            except (sqlean.Error, IndexDamaged) as exc:
                log.error("cannot count the index's terms: %s (runbook: %s)", exc, RUNBOOK)
            else:
                log.info(
                    "counted the index's frequent terms in %.1f s", trio.current_time() - started
                )
            if self._bounds_wanted():
                await self._scan_bounds()

    def _bounds_wanted(self) -> bool:
        """Whether to read the terms' best scores (again), now the terms are counted.

        Once per file, and again each time the index has doubled since the last read
        (from `BOUNDS_AGAIN_FROM` rows): the frequent terms change as it grows, and a
        term without a frontier only has the loose bound. Each read walks every row, so
        doubling keeps them all together under twice the index's size.
        """
        rows = self.vocabulary.rows()
        if rows is None:
            return False
        return self.bounds.missing() or rows >= max(2 * self._bounds_rows, BOUNDS_AGAIN_FROM)

    async def _scan_bounds(self) -> None:
        """Read the frequent terms' best scores in a process of its own (`_scan`).

        A rebuild's swap cancels it: it was reading the file that is no longer the index.
        """
        frequent = self.vocabulary.frequent() or []
        started = trio.current_time()
        self._scanning = trio.CancelScope()
        try:
            with self._scanning:
                async with self.files.write_lock:  # no row is half-way to the file meanwhile
                    generation = self.bounds.begin_elsewhere()
                    self._bounds_rows = self.vocabulary.rows() or 0
                found = await scan_elsewhere(self.files.path, frequent) if frequent else {}
                if self.bounds.install(found, generation):
                    log.info(
                        "read the best scores of %d frequent terms in %.1f s",
                        len(frequent),
                        trio.current_time() - started,
                    )
        except (sqlean.Error, IndexDamaged, ScanFailed) as exc:
            log.error("cannot read the terms' best scores: %s (runbook: %s)", exc, RUNBOOK)
        finally:
            self._scanning = None
