"""The recall index as memoryd runs it: kept up with the logs, searched, rebuilt beside itself.

SQLite runs in worker threads. One writer connection, behind `_write_lock`, adds rows
(a finished turn, the start-up catch-up, archive.md growing); `READERS` reading
connections, each lent to one search at a time, answer recall while the writer works
(WAL). A rebuild writes a new file with its own connection, so recall keeps answering
from the old one; the swap then waits for the writer and every reader, closes them all,
renames the new file over the old one and opens it again, and catches up whatever the
logs gained meanwhile.

In memory, per log, a cursor (records read, bytes read, the session's label after
them) spares re-reading a log from the start on each turn; `progress` in the file is
the truth, and a log without a cursor is walked from its start once. A cursor into a
file that has been replaced since (loopd rewrites a log for a forget) is not trusted:
the log is walked again by record count, and its rows are made again from it where they
differ (`_resync`), as they are when loopd says it rewrote the log.

A forget (`forgetting`, `plan_forget`, `apply_forget`) holds the whole index, rewrites
the rows holding the text in place (same rowid, same source), then has the WAL
checkpointed and truncated. Every connection runs with `secure_delete`, and FTS5's
`secure-delete` is set on `hits`, so nothing of a deleted row is left in either file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import sqlean
import trio

import proto

from ._clean import BoundsMark, CleanStop, LogMark, VocabularyMark, mark_of, save, take, wal_of
from ._logs import (
    ARCHIVE_LOG,
    Cursor,
    Row,
    SessionLog,
    archive_rows,
    count_records,
    list_logs,
    redact_row,
    session_logs,
)
from ._store import (
    INDEX_FILE,
    Connection,
    IndexDamaged,
    Sources,
    Writer,
    build,
    connect,
    holding_rows,
    raw_holders,
    remove_file,
    roll_back,
    session_rows,
    set_secure_fts,
    verify,
)
from .ranking import (
    OPTIMISE_FROM_ROWS,
    Found,
    Ranking,
    ScanFailed,
    TermBounds,
    Unchecked,
    Verdict,
    Vocabulary,
    fetch,
    prepare,
    query_terms,
    rank,
    scan_elsewhere,
    secure_fts,
    self_check,
)

__all__ = [
    "READERS",
    "Forgetting",
    "Index",
    "IndexDamaged",
    "IndexUnavailable",
    "Rebuilt",
    "Search",
]

log = logging.getLogger("memoryd.index")

READERS = 2
RUNBOOK = "memory-index-damaged"
BOUNDS_AGAIN_FROM = OPTIMISE_FROM_ROWS
"""The best scores are read again once the index has doubled, from this many rows (below
them recall runs the spec's query as it is, without them)."""


class IndexUnavailable(IndexDamaged):
    """The index is not open: it is being built, or its file could not be opened."""


@dataclasses.dataclass(frozen=True)
class Rebuilt:
    """What a rebuild read: session logs, rows from them, archive entries."""

    logs: int
    records: int
    archive: int


@dataclasses.dataclass(frozen=True)
class Forgetting:
    """The index's part of a forget, worked out with the text: no text in it.

    `rows`: each session row holding it (`line` its rowid, `old` the hash of its text now,
    `new` the text redacted); `archive`: whether archive rows hold it (they are read
    again from archive.md, whose records holding it the forget removes).
    """

    rows: list[proto.LineEdit]
    archive: bool
    held: int = 0
    """How many rows held it (session and archive rows), for the counts."""


CHECKPOINT_TRIES = 12
"""How often a forget asks for the WAL's truncation (backing off, about 40 s in all)."""

NEAR_CANDIDATES = 200
"""How many rows holding every word a preview reads to find its near matches."""


@dataclasses.dataclass(frozen=True)
class Search:
    """A search's winners, best first, and how they were ranked."""

    found: list[Found]
    ranking: Ranking


class Index:
    """`{home}/index/memory.sqlite3`, built from `sessions/` and archive.md (spec §6)."""

    def __init__(self, index_dir: Path, sources: Sources) -> None:
        self.path = index_dir / INDEX_FILE
        self.sources = sources
        self.vocabulary = Vocabulary()
        self.bounds = TermBounds()
        self._scanning: trio.CancelScope | None = None
        """The scan of the terms' best scores, while one runs."""
        self._bounds_rows = 0
        """The rows counted when the last scan of the best scores began."""
        self.ready = trio.Event()
        """Set once the index is open (built, if it had to be)."""
        self.caught_up = trio.Event()
        """Set once the start-up catch-up has read every log."""
        self._writer: Writer | None = None
        self._readers: list[Connection] = []
        self._slots = trio.Semaphore(READERS)
        self._write_lock = trio.Lock()
        self._rebuild_lock = trio.Lock()
        self._cursors: dict[str, Cursor] = {}
        self._forgot_from: dict[str, int] = {}
        """Per forget applied here in this run, the first rowid after its rows were put back."""
        self._archive_size: int | None = None
        self._rescan = trio.Event()
        self._checked_whole = False
        """Whether this run's index has passed `PRAGMA quick_check` (or was built anew)."""
        self._doubted = trio.Event()
        """Set when reading or writing the index failed: it is checked whole then, once."""
        self.settled = trio.Event()
        """Set once a failed read or write has been settled: the file checked whole, and
        rebuilt if it was damaged."""
        self._vouched = True
        """Whether a clean stop may vouch for the file (nothing failed on it this run)."""
        self.engine: Verdict = Unchecked()
        """The ranking engine's self-check at start (`ranking.self_check`), for `rank`."""
        self.engine_checked = trio.Event()
        """Set once the self-check has run (or could not read the index)."""

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
            opened = await trio.to_thread.run_sync(self._open_existing)
            nursery.start_soon(self._settle_doubt)
            nursery.start_soon(self._check_engine)
            if opened:
                if recover is not None:
                    await recover(True)
                self.ready.set()
                if self.vocabulary.rows() is None or self.bounds.missing():
                    self._rescan.set()
                try:
                    await self.catch_up()
                except IndexDamaged as exc:
                    # Recall keeps answering from what is indexed; a reindex repairs it.
                    log.error("cannot catch up %s: %s (runbook: %s)", self.path, exc, RUNBOOK)
                    self._doubt()
            else:
                try:
                    await self.rebuild()
                except (OSError, IndexDamaged) as exc:
                    log.error("cannot build %s: %s (runbook: %s)", self.path, exc, RUNBOOK)
                if recover is not None:
                    await recover(False)
            self.caught_up.set()
            nursery.start_soon(self._keep_vocabulary)
            await shutdown.wait()
            nursery.cancel_scope.cancel()  # a scan of the best scores too: its process is killed
        async with self._exclusive():
            vouch = self.is_open and self._vouched
            await trio.to_thread.run_sync(self._close_all)
            if vouch:
                await trio.to_thread.run_sync(self._save_clean)

    def _save_clean(self) -> None:
        """Record what this run knows of the closed index, for the next start (`_clean`)."""
        index = mark_of(self.path)
        if index is None:
            return
        vocabulary = self.vocabulary.snapshot()
        frontiers = self.bounds.kept()
        stop = CleanStop(
            index=index,
            wal=mark_of(wal_of(self.path)),
            logs=[LogMark.of(key, cursor) for key, cursor in self._cursors.items()],
            vocabulary=None
            if vocabulary is None
            else VocabularyMark(counts=vocabulary[0], rows=vocabulary[1], last=vocabulary[2]),
            bounds=None
            if frontiers is None
            else BoundsMark(frontiers=list(frontiers.items()), rows=self._bounds_rows),
        )
        try:
            save(self.path, stop)
        except OSError as exc:
            log.warning("cannot record the clean stop of %s: %s", self.path, exc)

    def _doubt(self) -> None:
        """Reading or writing the index failed: no clean stop vouches for it, and check it."""
        self._vouched = False
        self._doubted.set()

    async def _check_engine(self) -> None:
        """Once the index is open, compare the ranking engine with FTS5 (off the serving path)."""
        await self.ready.wait()
        try:
            async with self._reading() as conn:
                self.engine = await trio.to_thread.run_sync(self_check, conn, self.vocabulary)
        except (sqlean.Error, IndexDamaged) as exc:
            log.warning("cannot check the ranking engine: %s; it ranks unchecked", exc)
        finally:
            self.engine_checked.set()

    async def _settle_doubt(self) -> None:
        """Once a read or write failed, check the file whole (once); rebuild it if damaged.

        After a clean stop the start skips that check, so damage done to the file while
        memoryd was stopped (without changing its size or time) is found here, by the
        first catch-up, turn or search that reads a damaged page.
        """
        await self._doubted.wait()
        try:
            await self._settle()
        finally:
            self.settled.set()

    async def _settle(self) -> None:
        if self._checked_whole or not self.ready.is_set():
            return
        try:
            async with self._reading() as conn:
                await trio.to_thread.run_sync(_check_whole, conn)
        except IndexDamaged as exc:
            log.error("%s is damaged (%s); rebuilding it (runbook: %s)", self.path, exc, RUNBOOK)
            try:
                await self.rebuild()
            except (OSError, IndexDamaged) as again:
                log.error("cannot build %s: %s (runbook: %s)", self.path, again, RUNBOOK)
        else:
            self._checked_whole = True

    async def _keep_vocabulary(self) -> None:
        """Rescan the frequent terms' counts whenever a search finds them stale.

        After a new file, the frequent terms' best scores are read too (they are kept up
        as rows are added, so they never go stale).
        """
        while True:
            await self._rescan.wait()
            self._rescan = trio.Event()
            if not self.ready.is_set():
                continue
            started = trio.current_time()
            try:
                async with self._reading() as conn:
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
                async with self._write_lock:  # no row is half-way to the file meanwhile
                    generation = self.bounds.begin_elsewhere()
                    self._bounds_rows = self.vocabulary.rows() or 0
                found = await scan_elsewhere(self.path, frequent) if frequent else {}
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

    def _open_existing(self) -> bool:
        clean = take(self.path)  # before the file is opened: a crash from now on leaves no mark
        if not self.path.exists():
            log.info("no index at %s; building it from the session logs", self.path)
            return False
        conn = None
        try:
            conn = connect(self.path)
            verify(conn, thorough=clean is None)
            self._install(conn)
        except (IndexDamaged, OSError) as exc:
            if conn is not None:
                self._close_all(conn)
            log.error("%s is damaged (%s); rebuilding it (runbook: %s)", self.path, exc, RUNBOOK)
            return False
        if clean is None:
            self._checked_whole = True
        else:
            self._restore(clean)
        return True

    def _restore(self, clean: CleanStop) -> None:
        """Take up where the clean stop left: cursors, term counts, best scores."""
        self._cursors = clean.cursors()
        if clean.vocabulary is not None:
            mark = clean.vocabulary
            self.vocabulary.restore(mark.counts, mark.rows, mark.last)
        if clean.bounds is not None:
            self.bounds.restore(dict(clean.bounds.frontiers))
            self._bounds_rows = clean.bounds.rows
        log.info(
            "%s was stopped cleanly: its check skipped, %d logs' places kept",
            self.path,
            len(clean.logs),
        )

    def _install(self, conn: Connection) -> None:
        self._writer = Writer(conn)
        self._writer.inserted = self._bound
        self._readers = []
        for _ in range(READERS):
            reader = connect(self.path)
            prepare(reader)
            self._readers.append(reader)

    def _close_all(self, *more: Connection) -> None:
        writer = [self._writer.conn] if self._writer else []
        for conn in {id(c): c for c in [*self._readers, *writer, *more]}.values():
            try:
                conn.close()
            except sqlean.Error as exc:
                log.warning("closing %s: %s", self.path, exc)
        self._readers, self._writer = [], None

    @asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """Hold the writer and every reader: nobody touches the file meanwhile."""
        async with self._write_lock:
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
    async def _reading(self) -> AsyncIterator[Connection]:
        async with self._slots:
            if not self._readers:
                raise IndexUnavailable(f"the recall index {self.path} is not open")
            conn = self._readers.pop()
            try:
                yield conn
            finally:
                self._readers.append(conn)

    def _writing(self) -> Writer:
        if self._writer is None:
            raise IndexUnavailable(f"the recall index {self.path} is not open")
        return self._writer

    # -- keeping up --------------------------------------------------------------------

    async def session_updated(self, session: str, rewritten: str | None = None) -> None:
        """Index the records of `session`'s logs past those already indexed.

        `rewritten`: the forget (its plan id) that rewrote the logs; the rows indexed
        since this part of it are made again from them first (`_resync`). While the index
        is being built (or its file opened) this answers at once: the build, or the
        catch-up after the opening, reads every log anyway, and a turn's end must not wait
        for it. During the start-up catch-up it
        waits, so that a recall after the reply finds the turn.
        """
        if not self.ready.is_set():
            return
        await self.caught_up.wait()
        async with self._write_lock:
            try:
                since = None if rewritten is None else self._forgot_from.get(rewritten, 0)
                await trio.to_thread.run_sync(self._index_session, session, since)
            except IndexDamaged:
                self._doubt()
                raise

    def _index_session(self, session: str, resync_from: int | None = None) -> None:
        """Index what `session`'s logs gained; first make its rows from `resync_from` again."""
        writer = self._writing()
        logs = session_logs(self.sources.sessions_dir, session)
        if not logs:
            log.info("session %s has no logs under %s", session, self.sources.sessions_dir)
            return
        if resync_from is not None:
            self._resync(writer, session, logs, resync_from)
        try:
            indexed = {
                found.key: cursor.records
                if (cursor := self._cursors.get(found.key))
                else writer.progress(found.key)
                for found in logs
            }
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot read {self.path}: {exc}") from exc
        rows, counts, cursors = session_rows(logs, self._cursors, indexed, self.sources.max_class)
        changed = {key: n for key, n in counts.items() if n != indexed.get(key)}
        if rows or changed:
            try:
                writer.add(rows, changed)
            except sqlean.Error as exc:
                raise IndexDamaged(f"cannot write to {self.path}: {exc}") from exc
        self._cursors.update(cursors)

    def _resync(self, writer: Writer, session: str, logs: list[SessionLog], since: int) -> None:
        """Put back each row of `session` from rowid `since` whose text its log no longer gives.

        A forget's part here rewrote the rows holding the text, and noted where the rows
        stood (`since`); loopd rewrote the log after. A turn that ended between the two was
        indexed from the log before: its rows are made again from the log now, matched by
        (epoch, record, role, place). Without a note (memoryd restarted), every row of the
        session is looked at: one scan of `sources`.
        """
        made, _, _ = session_rows(logs, {}, {}, self.sources.max_class)
        try:
            now = _by_place((r.epoch, r.record, r.role, r.text) for r in made)
            held = _by_place(
                (epoch, record, role, (rowid, text))
                for rowid, epoch, record, role, text in writer.session_texts(session, since)
            )
            steps = [
                (rowid, _hash(text), now[key])
                for key, (rowid, text) in held.items()
                if key in now and now[key] != text
            ]
            if steps:
                with self.vocabulary.removing():
                    writer.put_back(steps)
                self.bounds.clear()
                log.info("made %d row(s) of session %s again from its log", len(steps), session)
                if self._checkpoint():  # its old text may sit in the WAL
                    log.info("the WAL kept old rows (a reader); the next forget truncates it")
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot write to {self.path}: {exc}") from exc
        for found in logs:
            self._cursors.pop(found.key, None)

    def _bound(self, conn: Connection, first: int, rows: list[Row]) -> None:
        """Fold rows about to be committed into the terms' best scores (or forget those)."""
        try:
            self.bounds.added(conn, first, [row.text for row in rows])
        except sqlean.Error as exc:
            # Without these rows the bounds could be too low: use the loose ones until
            # the next scan.
            log.warning("cannot read the best scores of new rows: %s; rescanning later", exc)
            self.bounds.clear()

    async def catch_up(self) -> int:
        """Index what every log gained since it was last read; return the sessions read."""
        if not self.ready.is_set():
            return 0
        async with self._write_lock:
            indexed = await trio.to_thread.run_sync(self._all_progress)
        pending = await trio.to_thread.run_sync(self._pending, indexed)
        for session, rewritten in pending.items():
            async with self._write_lock:
                since = 0 if rewritten else None  # which forget is not known: every row
                await trio.to_thread.run_sync(self._index_session, session, since)
        if pending:
            log.info("caught up %d session(s) with their logs", len(pending))
        await self.archive_changed()
        return len(pending)

    def _all_progress(self) -> dict[str, int]:
        try:
            return self._writing().all_progress()
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot read {self.path}: {exc}") from exc

    def _pending(self, indexed: dict[str, int]) -> dict[str, bool]:
        """The sessions whose logs grew, each with whether one was rewritten (a forget)."""
        pending: dict[str, bool] = {}
        for found in list_logs(self.sources.sessions_dir):
            if pending.get(found.session):
                continue
            cursor = self._cursors.get(found.key)
            try:
                if cursor is not None and not cursor.still(found.path):
                    pending[found.session] = True  # rewritten: its rows are made again
                    continue
                if cursor is not None:
                    grown = found.path.stat().st_size > cursor.offset
                else:
                    grown = count_records(found.path) > indexed.get(found.key, 0)
            except OSError as exc:
                log.warning("cannot read %s: %s; skipped it", found.path, exc)
                continue
            if grown:
                pending.setdefault(found.session, False)
        return pending

    async def archive_changed(self) -> None:
        """Index archive.md's new entries (all of them again if it shrank: a hand edit)."""
        if not self.ready.is_set():
            return
        async with self._write_lock:
            await trio.to_thread.run_sync(self._index_archive)

    def _index_archive(self) -> None:
        writer = self._writing()
        try:
            size = self.sources.archive.stat().st_size
        except FileNotFoundError:
            size = 0
        if size == self._archive_size:
            return
        rows, count = archive_rows(self.sources.archive, max_class=self.sources.max_class)
        try:
            indexed = writer.progress(ARCHIVE_LOG)
            if count < indexed:
                log.warning(
                    "archive.md has %d entries but %d are indexed (edited by hand?); "
                    "indexing it again",
                    count,
                    indexed,
                )
                with self.vocabulary.removing():
                    writer.replace_archive(rows, count)
            elif count > indexed:
                writer.add(rows[indexed:], {ARCHIVE_LOG: count})
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot write to {self.path}: {exc}") from exc
        self._archive_size = size

    # -- searching ---------------------------------------------------------------------

    async def search(
        self, query: str, k: int, *, then: Callable[[Search], None] | None = None
    ) -> Search:
        """The k best hits for `query` (spec §5); none when it has no terms.

        `then`, if given, is called with the answer in the worker thread that searched
        (blocking work that must follow the search, such as the recall log's line, costs
        no second trip to a thread).
        """
        terms = query_terms(query)
        if not terms:
            nothing = Search([], Ranking([], "no terms", exact=True))
            if then is not None:
                await trio.to_thread.run_sync(then, nothing)
            return nothing
        if not self.ready.is_set():
            raise IndexUnavailable("the recall index is being built; try again in a minute")
        async with self._reading() as conn:
            try:
                found, stale = await trio.to_thread.run_sync(self._search, conn, terms, k, then)
            except IndexDamaged:
                self._doubt()
                raise
        if stale:
            self._rescan.set()
        return found

    def _search(
        self,
        conn: Connection,
        terms: list[str],
        k: int,
        then: Callable[[Search], None] | None = None,
    ) -> tuple[Search, bool]:
        try:
            conn.execute("BEGIN")
            try:
                ranking = rank(
                    conn, terms, k, self.vocabulary, bounds=self.bounds, verdict=self.engine
                )
                found = fetch(conn, [rowid for rowid, _ in ranking.rows])
            except BaseException:
                # An I/O error may have ended the transaction already; what failed is
                # the error to report, not a COMMIT's complaint about it.
                roll_back(conn)
                raise
            conn.execute("COMMIT")
        except sqlean.Error as exc:
            log.error("searching %s failed: %s (runbook: %s)", self.path, exc, RUNBOOK)
            raise IndexDamaged(f"the recall index cannot be read: {exc}") from exc
        stale = ranking.indexed >= OPTIMISE_FROM_ROWS and self.vocabulary.stale(ranking.indexed)
        search = Search(found, ranking)
        if then is not None:
            then(search)
        return search, stale

    # -- rebuilding --------------------------------------------------------------------

    async def rebuild(self) -> Rebuilt:
        """Build a new index from `sessions/` and archive.md, swap it in, catch up."""
        async with self._rebuild_lock:
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
            async with self._exclusive():
                await trio.to_thread.run_sync(self._swap, built.path, built.cursors)
            if self._scanning is not None:
                self._scanning.cancel()  # it reads the old file: the new one is scanned next
            self.ready.set()
            self._rescan.set()
            log.info(
                "built the index: %d logs, %d records, %d archive entries",
                built.logs,
                built.records,
                built.archive,
            )
        await self.catch_up()
        return Rebuilt(built.logs, built.records, built.archive)

    def _swap(self, new: Path, cursors: dict[str, Cursor]) -> None:
        self._close_all()
        for suffix in ("-wal", "-shm"):
            # Only now, with every connection closed, is the old WAL nobody's.
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        try:
            os.replace(new, self.path)
            proto.fsync_dir(self.path.parent)
        except OSError:
            remove_file(new)
            if self.path.exists():
                self._install(connect(self.path))
            raise
        self._install(connect(self.path))
        self._checked_whole = self._vouched = True  # a new file: nothing failed on it yet
        self._cursors = dict(cursors)
        self._archive_size = None
        self.vocabulary.clear()
        self.bounds.clear()

    # -- forgetting --------------------------------------------------------------------

    @asynccontextmanager
    async def forgetting(self) -> AsyncIterator[None]:
        """Hold the index for a forget: no rebuild, write, search or scan meanwhile."""
        async with self._rebuild_lock:
            if self._scanning is not None:
                self._scanning.cancel()  # it holds a read of the file: the WAL could not shrink
            async with self._exclusive():
                yield

    async def look(self, needle: str) -> tuple[int, list[str]]:
        """How many rows hold `needle`, and the texts of rows near it (writes nothing)."""
        await self.caught_up.wait()
        async with self._write_lock:
            held = await trio.to_thread.run_sync(self.holding, needle)
            near = await trio.to_thread.run_sync(self.near, needle)
        return len(held), near

    def holding(self, needle: str) -> list[tuple[int, str, str, str]]:
        """Every row holding `needle`: rowid, text, kind, role (blocking; under `forgetting`).

        A row holds it when taking it out would change the row (`redact_row`): the rule
        of the forget that writes it, and of the check after.
        """
        try:
            found = holding_rows(self._writing().conn, needle)
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot read {self.path}: {exc}") from exc
        return [row for row in found if redact_row(row[1], row[3], needle) != row[1]]

    def plan_forget(self, needle: str) -> Forgetting:
        """The index's part of forgetting `needle` (blocking; under `forgetting`)."""
        rows: list[proto.LineEdit] = []
        archive = False
        held = self.holding(needle)
        for rowid, text, kind, role in held:
            if kind == "archive":
                archive = True
                continue
            new = redact_row(text, role, needle)
            rows.append(proto.LineEdit(line=rowid, old=_hash(text), new=new))
        return Forgetting(rows=rows, archive=archive, held=len(held))

    def near(self, needle: str) -> list[str]:
        """Texts of rows holding every word of `needle` but not `needle` (blocking)."""
        needle_words = proto.words(needle)
        if not needle_words:
            return []
        query = " ".join(f'"{word}"' for word in needle_words)
        try:
            found = (
                self._writing()
                .conn.execute(
                    "SELECT text FROM hits WHERE hits MATCH ? LIMIT ?", (query, NEAR_CANDIDATES)
                )
                .fetchall()
            )
        except sqlean.Error as exc:
            log.warning("cannot look for near matches: %s", exc)
            return []
        return [str(text) for (text,) in found if proto.is_near(str(text), needle)]

    def apply_forget(
        self, plan: str, rows: list[proto.LineEdit], archive: bool
    ) -> tuple[list[str], bool]:
        """Put the rows back redacted and read archive rows again (blocking; under `forgetting`).

        Sets FTS5's `secure-delete` first where the index was built before it. Every
        cursor is dropped: loopd rewrites the session logs in its own step, so byte offsets
        into them no longer hold. Returns the conflicts, and whether the file wants its
        one `VACUUM` (it was built before `secure-delete`: its freed pages may hold text).
        """
        writer = self._writing()
        self._forgot_from.setdefault(plan, writer.next_rowid)  # rows after it: `_resync`'s
        conflicts: list[str] = []
        try:
            vacuum = not secure_fts(writer.conn)
            if vacuum:
                writer.conn.execute("BEGIN IMMEDIATE")
                set_secure_fts(writer.conn)
                writer.conn.execute("COMMIT")
            with self.vocabulary.removing():
                _, _, conflicts = writer.put_back([(r.line, r.old, r.new) for r in rows])
                if archive:
                    found, count = archive_rows(
                        self.sources.archive, max_class=self.sources.max_class
                    )
                    writer.replace_archive(found, count)
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot write to {self.path}: {exc}") from exc
        finally:
            self.bounds.clear()
            self._cursors.clear()
            self._archive_size = None
        return conflicts, vacuum

    @property
    def is_open(self) -> bool:
        """Whether the file is open (at start, before it is `ready`, too)."""
        return self._writer is not None

    def recount(self) -> None:
        """Count the terms again (rows were rewritten); from the trio thread."""
        self._rescan.set()

    def vacuum(self) -> None:
        """Rewrite the whole file once, in memory (blocking; under `forgetting`)."""
        conn = self._writing().conn
        try:
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.execute("VACUUM")
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot vacuum {self.path}: {exc}") from exc

    async def truncate_wal(self) -> bool:
        """Checkpoint the WAL into the file and truncate it; False if readers kept it busy.

        Under `forgetting`: memoryd's own readers are idle; a scan of the best scores
        started meanwhile is cancelled again, and the call backs off between tries.
        """
        delay = 0.05
        for _ in range(CHECKPOINT_TRIES):
            busy = await trio.to_thread.run_sync(self._checkpoint)
            if not busy:
                return True
            if self._scanning is not None:
                self._scanning.cancel()
            await trio.sleep(delay)
            delay = min(delay * 2, 8.0)
        return False

    def _checkpoint(self) -> bool:
        try:
            row = self._writing().conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlean.Error as exc:
            log.warning("checkpoint of %s: %s", self.path, exc)
            return True
        return bool(row[0])

    def verify_forget(self, needle: str) -> list[str]:
        """Where the index still holds `needle`: a row (`holding`), or the file's bytes."""
        try:
            found = [f"index row {rowid}: still holds it" for rowid, *_ in self.holding(needle)]
        except IndexDamaged as exc:
            found = [f"index: cannot be read: {exc}"]
        files = [self.path, Path(f"{self.path}-wal")]
        return found + [f"{name}: its bytes still hold it" for name in raw_holders(files, needle)]


def _check_whole(conn: Connection) -> None:
    verify(conn, thorough=True)


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_Key = tuple[int | None, int, str, int]
V = TypeVar("V")


def _by_place(rows: Iterable[tuple[int | None, int, str, V]]) -> dict[_Key, V]:
    """Values by (epoch, record, role, place among the record's rows of that role)."""
    found: dict[_Key, V] = {}
    places: dict[tuple[int | None, int, str], int] = {}
    for epoch, record, role, value in rows:
        place = places.get((epoch, record, role), 0)
        places[(epoch, record, role)] = place + 1
        found[(epoch, record, role, place)] = value
    return found
