"""The recall index as memoryd runs it: kept up with the logs, searched, rebuilt beside itself.

`Index` is the one object the rest of memoryd holds; it runs the file's lifetime (open,
check, catch up, serve, close; a clean stop saved and taken up; a rebuild swapped in)
and hands the rest to its parts, which share one `Files` (the connections, the locks,
whether the file is open and trusted):

- `_index_files`: the writer and readers, `exclusive`, `reading`, `writing`, the swap's
  rename, the WAL's checkpoint, and the doubt a failed read or write casts on the file;
- `_index_stats`: the term counts and best scores kept beside the index for the engine;
- `_index_ingest`: each log's cursor, a turn's rows, the start-up catch-up, archive.md;
- `_index_search`: recall's searches, and the ranking engine's self-check at start;
- `_index_forget`: the index's part of a forget, and the check after it.

SQLite runs in worker threads. One writer connection, behind `write_lock`, adds rows
(a finished turn, the start-up catch-up, archive.md growing); `READERS` reading
connections, each lent to one search at a time, answer recall while the writer works
(WAL). A rebuild writes a new file with its own connection, so recall keeps answering
from the old one; the swap then waits for the writer and every reader, closes them all,
renames the new file over the old one and opens it again, and catches up whatever the
logs gained meanwhile.

In memory, per log, a cursor spares re-reading a log from the start on each turn;
`progress` in the file is the truth (`_index_ingest`). A forget holds the whole index
and rewrites the rows holding the text in place (`_index_forget`); every connection runs
with `secure_delete`, and FTS5's `secure-delete` is set on `hits`, so nothing of a
deleted row is left in either file.

A failed read or write casts doubt on the file: it is checked whole once (`PRAGMA
quick_check`, which a start after a clean stop skips) and rebuilt if it is damaged; a
clean stop then does not vouch for it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import sqlean
import trio

import proto
from proto import RecallRanking

from ._clean import CleanStop, mark_of, remove, save, take, wal_of
from ._index_files import READERS, RUNBOOK, Files, IndexUnavailable
from ._index_forget import Forgetting, IndexForget
from ._index_ingest import Ingest
from ._index_search import Search, Searcher
from ._index_stats import Statistics
from ._logs import Cursor
from ._store import INDEX_FILE, Connection, IndexDamaged, Sources, build, verify
from .ranking import TermBounds, Verdict, Vocabulary

__all__ = [
    "READERS",
    "RUNBOOK",
    "Forgetting",
    "Index",
    "IndexDamaged",
    "IndexUnavailable",
    "Rebuilt",
    "Search",
]

log = logging.getLogger("memoryd.index")


@dataclasses.dataclass(frozen=True)
class Rebuilt:
    """What a rebuild read: session logs, rows from them, archive entries."""

    logs: int
    records: int
    archive: int


class Index:
    """`{home}/index/memory.sqlite3`, built from `sessions/` and archive.md."""

    def __init__(self, index_dir: Path, sources: Sources) -> None:
        self.files = Files(index_dir, sources)
        self.statistics = Statistics(self.files)
        self.spec_engine = sources.ranking == "spec"
        """Whether the spec's ranking engine ranks (and its statistics are kept)."""
        if self.spec_engine:
            self.files.inserted = self.statistics.bound
        self.ingest = Ingest(self.files, self.statistics)
        self.searcher = Searcher(self.files, self.statistics)
        self.forget = IndexForget(self.files, self.statistics, self.ingest)
        self.path = self.files.path
        self.sources = sources
        self.building = trio.Event()
        """Set when the start found no usable index and builds one (`caught_up` after)."""
        self.settled = trio.Event()
        """Set once a failed read or write has been settled: the file checked whole, and
        rebuilt if it was damaged."""

    # -- what the parts keep -----------------------------------------------------------

    @property
    def ready(self) -> trio.Event:
        """Set once the index is open (built, if it had to be)."""
        return self.files.ready

    @property
    def caught_up(self) -> trio.Event:
        """Set once the start-up catch-up has read every log."""
        return self.files.caught_up

    @property
    def is_open(self) -> bool:
        """Whether the file is open (at start, before it is `ready`, too)."""
        return self.files.is_open

    @property
    def vocabulary(self) -> Vocabulary:
        """The frequent terms' row counts (`Statistics`)."""
        return self.statistics.vocabulary

    @property
    def bounds(self) -> TermBounds:
        """The frequent terms' best scores (`Statistics`)."""
        return self.statistics.bounds

    @property
    def engine(self) -> Verdict:
        """The ranking engine's self-check at start (`ranking.self_check`), for `rank`."""
        return self.searcher.engine

    @property
    def engine_checked(self) -> trio.Event:
        """Set once the self-check has run (or could not read the index)."""
        return self.searcher.engine_checked

    # -- lifetime ----------------------------------------------------------------------

    async def run(
        self,
        shutdown: trio.Event,
        recover: Callable[[bool], Awaitable[None]] | None = None,
    ) -> None:
        """Open the index (building it when missing or damaged), catch up, serve, close.

        `recover`, if given, is awaited before the index serves anything or catches up
        (with True when the file was opened, False when it was built anew): a forget
        decided before a crash finishes first.
        """
        async with trio.open_nursery() as nursery:
            started = trio.current_time()
            opened, clean = await trio.to_thread.run_sync(self._open_existing)
            nursery.start_soon(self._settle_doubt)
            nursery.start_soon(self.ingest.sweep)
            if self.spec_engine:
                nursery.start_soon(self.searcher.check_engine)
            else:
                self.searcher.engine_checked.set()  # the context ranking is its plain form
            if opened:
                if recover is not None:
                    await recover(True)
                self.ready.set()
                if self.spec_engine:
                    self.statistics.opened()
                try:
                    await self.catch_up()
                except IndexDamaged as exc:
                    # Recall keeps answering from what is indexed; a reindex repairs it.
                    log.error("cannot catch up %s: %s (runbook: %s)", self.path, exc, RUNBOOK)
                    self.files.doubt()
            else:
                self.building.set()
                try:
                    await self.rebuild()
                except (OSError, IndexDamaged) as exc:
                    log.error("cannot build %s: %s (runbook: %s)", self.path, exc, RUNBOOK)
                if recover is not None:
                    await recover(False)
            self.caught_up.set()
            # The moment a turn's recall sees every log: what `just bench age` waits for.
            log.info(
                "the index is caught up with every log, %.2f s after its start",
                trio.current_time() - started,
            )
            if opened and not clean:
                nursery.start_soon(self._after_crash)
            if self.spec_engine:
                nursery.start_soon(self.statistics.keep)
            await shutdown.wait()
            nursery.cancel_scope.cancel()  # a scan of the best scores too: its process is killed
        async with self.files.exclusive():
            vouch = self.is_open and self.files.vouched
            await trio.to_thread.run_sync(self.files.close_all)
            if vouch:
                await trio.to_thread.run_sync(self._save_clean)

    def _save_clean(self) -> None:
        """Record what this run knows of the closed index, for the next start (`_clean`)."""
        index = mark_of(self.path)
        if index is None:
            return
        vocabulary, bounds = self.statistics.marks()
        stop = CleanStop(
            index=index,
            wal=mark_of(wal_of(self.path)),
            vocabulary=vocabulary,
            bounds=bounds,
        )
        try:
            save(self.path, stop)
        except OSError as exc:
            log.warning("cannot record the clean stop of %s: %s", self.path, exc)

    def _open_existing(self) -> tuple[bool, bool]:
        """Open the file: whether it was (else it is built), and whether it was left cleanly.

        After an unclean stop the whole check (`PRAGMA quick_check`: seconds on an old
        home) runs after the catch-up (`_after_crash`), not before it: the first turn
        does not wait on it, and no clean stop vouches for the file until it has passed.
        """
        if not self.path.exists():
            remove(self.path)  # a mark of no file vouches for nothing
            log.info("no index at %s; building it from the session logs", self.path)
            return False, False
        clean = take(self.path)  # before the file is opened: a crash from now on leaves no mark
        if not self.files.open(thorough=False):
            return False, False
        if clean is None:
            self.files.vouched = False
        else:
            self._restore(clean)
        return True, clean is not None

    async def _after_crash(self) -> None:
        """After an unclean stop, out of the way: the whole check, then every log looked at.

        The check may find the file damaged (it is rebuilt); a log's last records may be
        missing from the journal of changes (a power cut takes its unsynced lines).
        """
        started = trio.current_time()
        stop = threading.Event()
        found: list[IndexDamaged] = []

        def check(conn: Connection) -> None:
            conn.set_progress_handler(stop.is_set, 10_000)  # a stop interrupts it
            try:
                _check_whole(conn, self.sources.ranking)
            except IndexDamaged as exc:
                if not stop.is_set():  # else interrupted by a stop: not a finding
                    found.append(exc)
            finally:
                conn.set_progress_handler(None, 0)

        async def stop_when_cancelled() -> None:
            try:
                await trio.sleep_forever()
            finally:
                stop.set()

        async with self.files.reading() as conn, trio.open_nursery() as nursery:
            nursery.start_soon(stop_when_cancelled)
            await trio.to_thread.run_sync(check, conn)  # waits for the thread: it holds conn
            nursery.cancel_scope.cancel()
        if found:
            self.files.vouched = False
            await self._rebuild_damaged(found[0])
            return
        self.files.checked_whole = True
        if not self.files.doubted.is_set():
            self.files.vouched = True
        log.info(
            "checked %s whole after an unclean stop in %.1f s",
            self.path,
            trio.current_time() - started,
        )
        self.ingest.want_sweep()

    def _restore(self, clean: CleanStop) -> None:
        """Take up where the clean stop left: term counts, best scores."""
        self.statistics.restore(clean)
        log.info("%s was stopped cleanly: its check skipped", self.path)

    async def _settle_doubt(self) -> None:
        """Once a read or write failed, check the file whole (once); rebuild it if damaged.

        After a clean stop the start skips that check, so damage done to the file while
        memoryd was stopped (without changing its size or time) is found here, by the
        first catch-up, turn or search that reads a damaged page.
        """
        await self.files.doubted.wait()
        try:
            await self._settle()
        finally:
            self.settled.set()

    async def _settle(self) -> None:
        if self.files.checked_whole or not self.ready.is_set():
            return
        try:
            async with self.files.reading() as conn:
                await trio.to_thread.run_sync(_check_whole, conn, self.sources.ranking)
        except IndexDamaged as exc:
            await self._rebuild_damaged(exc)
        else:
            self.files.checked_whole = True

    async def _rebuild_damaged(self, damage: IndexDamaged) -> None:
        log.error("%s is damaged (%s); rebuilding it (runbook: %s)", self.path, damage, RUNBOOK)
        try:
            await self.rebuild()
        except (OSError, IndexDamaged) as again:
            log.error("cannot build %s: %s (runbook: %s)", self.path, again, RUNBOOK)

    # -- rebuilding --------------------------------------------------------------------

    async def rebuild(self) -> Rebuilt:
        """Build a new index from `sessions/` and archive.md, swap it in, catch up."""
        async with self.files.rebuild_lock:
            target = self.path.with_name(INDEX_FILE + ".new")
            stop = threading.Event()
            log.info("building %s", target)
            try:
                built = await trio.to_thread.run_sync(
                    build, target, self.sources, stop, abandon_on_cancel=True
                )
            except sqlean.Error as exc:
                raise IndexDamaged(f"building {target} failed: {exc}") from exc
            except BaseException:
                stop.set()  # an abandoned build stops at its next session and removes its file
                raise
            async with self.files.exclusive():
                await trio.to_thread.run_sync(self._swap, built.path, built.cursors)
            self.statistics.stop_scan()  # it reads the old file: the new one is scanned next
            self.ready.set()
            self.statistics.recount()
            log.info(
                "built the index: %d logs, %d records, %d archive entries",
                built.logs,
                built.records,
                built.archive,
            )
        await self.catch_up()
        return Rebuilt(built.logs, built.records, built.archive)

    def _swap(self, new: Path, cursors: dict[str, Cursor]) -> None:
        self.files.swap_in(new)
        self.ingest.restart(cursors)
        self.statistics.clear()

    # -- keeping up (`_index_ingest`) --------------------------------------------------

    async def session_updated(self, session: str, rewritten: str | None = None) -> None:
        """Index the records of `session`'s logs past those already indexed (`Ingest`)."""
        await self.ingest.session_updated(session, rewritten)

    async def catch_up(self) -> int:
        """Index what every log gained since it was last read; return the sessions read."""
        return await self.ingest.catch_up()

    async def archive_changed(self) -> None:
        """Index archive.md's new entries (all of them again if it shrank: a hand edit)."""
        await self.ingest.archive_changed()

    # -- searching (`_index_search`) ---------------------------------------------------

    async def search(
        self, query: str, k: int, *, then: Callable[[Search], None] | None = None
    ) -> Search:
        """The k best hits for `query`; none when it has no terms (`Searcher.search`)."""
        return await self.searcher.search(query, k, then=then)

    # -- forgetting (`_index_forget`) --------------------------------------------------

    def forgetting(self) -> AbstractAsyncContextManager[None]:
        """Hold the index for a forget: no rebuild, write, search or scan meanwhile."""
        return self.forget.forgetting()

    async def look(self, needle: str) -> tuple[int, list[str]]:
        """How many rows hold `needle`, and the texts of rows near it (writes nothing)."""
        return await self.forget.look(needle)

    def holding(self, needle: str) -> list[tuple[int, str, str, str]]:
        """Every row holding `needle`: rowid, text, kind, role (blocking; under `forgetting`)."""
        return self.forget.holding(needle)

    def plan_forget(self, needle: str) -> Forgetting:
        """The index's part of forgetting `needle` (blocking; under `forgetting`)."""
        return self.forget.plan_forget(needle)

    def near(self, needle: str) -> list[str]:
        """Texts of rows holding every word of `needle` but not `needle` (blocking)."""
        return self.forget.near(needle)

    def apply_forget(
        self, plan: str, rows: list[proto.LineEdit], archive: bool
    ) -> tuple[list[str], bool]:
        """Put the rows back redacted, read archive rows again (blocking; under `forgetting`).

        Returns the conflicts, and whether the file wants its one `vacuum`.
        """
        return self.forget.apply_forget(plan, rows, archive)

    def recount(self) -> None:
        """Count the terms again (rows were rewritten); from the trio thread."""
        self.statistics.recount()

    def vacuum(self) -> None:
        """Rewrite the whole file once, in memory (blocking; under `forgetting`)."""
        self.forget.vacuum()

    async def truncate_wal(self) -> bool:
        """Checkpoint the WAL into the file and truncate it; False if readers kept it busy."""
        return await self.forget.truncate_wal()

    def verify_forget(self, needle: str) -> list[str]:
        """Where the index still holds `needle`: a row (`holding`), or the file's bytes."""
        return self.forget.verify_forget(needle)


def _check_whole(conn: Connection, ranking: RecallRanking) -> None:
    verify(conn, ranking, thorough=True)
