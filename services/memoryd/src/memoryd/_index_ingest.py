"""Keeping the index up with the logs: a finished turn, the start-up catch-up, archive.md.

In memory, per log, a cursor (records read, bytes read, the session's label after
them) spares re-reading a log from the start on each turn; `progress` in the file is
the truth, and a log without a cursor is walked from its start once. A cursor into a
file that has been replaced since (loopd rewrites a log for a forget) is not trusted:
the log is walked again by record count, and its rows are made again from it where they
differ (`_resync`), as they are when loopd says it rewrote the log.

What changed while memoryd did not hear of it is found in the journal of changes
(`sessions/.changed`, `proto.changes_since`), which every writer of a log appends to
first: the file keeps how far it is read (`Writer.place`), and the start-up catch-up
reads the sessions named after that place, and nothing else, however old the home. Each
finished turn moves the place on, so that after a crash the catch-up is as short. When
the journal cannot say (it was started anew, the file never read it), every log is
looked at instead (`_pending`): in the catch-up at start; out of the way (`sweep`) when
found while serving, and after every unclean stop, whose last journal lines a power cut
may have taken.

Rules: every write is under `Files.write_lock`, in a worker thread; a forget drops
every cursor (`lose_places`) and notes where its rows stood (`forgot`), a rebuild's swap
hands over the new file's cursors (`restart`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Set
from typing import TypeVar

import sqlean
import trio

import proto
from proto import ChangesPlace

from ._index_files import Files
from ._index_stats import Statistics
from ._logs import (
    ARCHIVE_LOG,
    Cursor,
    SessionLog,
    archive_rows,
    list_logs,
    log_place,
    session_logs,
)
from ._store import IndexDamaged, Writer, row_value, session_rows, text_hash

__all__ = ["Ingest"]

log = logging.getLogger("memoryd.index")


class Ingest:
    """Adds to the index what the session logs and archive.md gained."""

    def __init__(self, files: Files, statistics: Statistics) -> None:
        self.files = files
        self.statistics = statistics
        self.cursors: dict[str, Cursor] = {}
        self._forgot_from: dict[str, int] = {}
        """Per forget applied here in this run, the first rowid after its rows were put back."""
        self._archive_size: int | None = None
        self.place: ChangesPlace | None = None
        """How far the journal of changes is read, every session it named indexed, as the
        file keeps it; None until the catch-up has read it, or while a sweep stands in."""
        self._sweep = trio.Event()
        """Set when every log must be looked at (`sweep`)."""

    def restart(self, cursors: dict[str, Cursor]) -> None:
        """A new file: take up from `cursors` (a rebuild's, or a clean stop's)."""
        self.cursors = dict(cursors)
        self._archive_size = None
        self.place = None

    def forgot(self, plan: str, first: int) -> None:
        """Forget `plan`'s rows were put back here; rowids from `first` came after them."""
        self._forgot_from.setdefault(plan, first)

    def lose_places(self) -> None:
        """Drop every cursor and archive.md's size: the logs are rewritten (a forget)."""
        self.cursors.clear()
        self._archive_size = None

    async def session_updated(self, session: str, rewritten: str | None = None) -> None:
        """Index the records of `session`'s logs past those already indexed.

        `rewritten`: the forget (its plan id) that rewrote the logs; the rows indexed
        since this part of it are made again from them first (`_resync`). While the index
        is being built (or its file opened) this answers at once: the build, or the
        catch-up after the opening, reads every log anyway, and a turn's end must not wait
        for it. During the start-up catch-up the session is read at once, between two of
        the catch-up's sessions (each holds the write lock alone): a turn's end never
        waits for a home's other logs, and a recall after the reply finds the turn.
        """
        if not self.files.ready.is_set():
            return
        async with self.files.write_lock:
            try:
                since = None if rewritten is None else self._forgot_from.get(rewritten, 0)
                await trio.to_thread.run_sync(self._index_session, session, since)
                following = self.files.caught_up.is_set() and self.place is not None
                if following and not await trio.to_thread.run_sync(self._follow, session):
                    self.want_sweep()
            except IndexDamaged:
                self.files.doubt()
                raise

    def _follow(self, indexed: str) -> bool:
        """Move the place on: index what the journal names since it (`indexed` is done).

        Usually the journal names only the turn's own session. False when it cannot say
        (started anew since): the place stays unknown until a sweep has looked at every log.
        """
        assert self.place is not None
        changes = proto.changes_since(self.files.sources.sessions_dir, self.place)
        if changes.sessions is None:
            log.info("the journal of changes was started anew; every log will be looked at")
            self.place = None
            return False
        for session in sorted(changes.sessions - {indexed}):
            self._index_session(session)
        self._keep_place(changes.place)
        return True

    def _keep_place(self, place: ChangesPlace) -> None:
        if place != self.place:
            try:
                self.files.writing().keep_place(place)
            except sqlean.Error as exc:
                raise IndexDamaged(f"cannot write to {self.files.path}: {exc}") from exc
        self.place = place

    def _index_session(self, session: str, resync_from: int | None = None) -> None:
        """Index what `session`'s logs gained; first make its rows from `resync_from` again."""
        writer = self.files.writing()
        sources = self.files.sources
        logs = session_logs(sources.sessions_dir, session)
        if not logs:
            log.info("session %s has no logs under %s", session, sources.sessions_dir)
            return
        if resync_from is None and any(
            not cursor.still(found.path)
            for found in logs
            if (cursor := self.cursors.get(found.key)) is not None
        ):
            resync_from = 0  # rewritten (a forget) since it was read; which one is not known
        if resync_from is not None:
            self._resync(writer, session, logs, resync_from)
        try:
            indexed = {
                found.key: cursor.records
                if (cursor := self.cursors.get(found.key))
                else writer.progress(found.key)
                for found in logs
            }
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot read {self.files.path}: {exc}") from exc
        rows, counts, cursors = session_rows(logs, self.cursors, indexed, sources.max_class)
        changed = {key: n for key, n in counts.items() if n != indexed.get(key)}
        if rows or changed:
            try:
                writer.add(rows, changed)
            except sqlean.Error as exc:
                raise IndexDamaged(f"cannot write to {self.files.path}: {exc}") from exc
        self.cursors.update(cursors)

    def _resync(self, writer: Writer, session: str, logs: list[SessionLog], since: int) -> None:
        """Put back each row of `session` from rowid `since` that its log no longer gives.

        A forget's part here rewrote the rows holding the text, and noted where the rows
        stood (`since`); loopd rewrote the log after. A turn that ended between the two was
        indexed from the log before: its rows are made again from the log now, matched by
        (epoch, record, role, place). Without a note (memoryd restarted), every row of the
        session is looked at: one scan of `sources`.
        """
        made, _, _ = session_rows(logs, {}, {}, self.files.sources.max_class)
        ranking = writer.ranking
        try:
            now = _by_place(
                (r.epoch, r.record, r.role, row_value(ranking, r.text, r.context)) for r in made
            )
            held = _by_place(
                (epoch, record, role, (rowid, value))
                for rowid, epoch, record, role, value in writer.session_values(session, since)
            )
            steps = [
                (rowid, text_hash(text), now[key])
                for key, (rowid, text) in held.items()
                if key in now and now[key] != text
            ]
            if steps:
                with self.statistics.vocabulary.removing():
                    writer.put_back(steps)
                self.statistics.bounds.clear()
                log.info("made %d row(s) of session %s again from its log", len(steps), session)
                if self.files.checkpoint():  # its old text may sit in the WAL
                    log.info("the WAL kept old rows (a reader); the next forget truncates it")
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot write to {self.files.path}: {exc}") from exc
        for found in logs:
            self.cursors.pop(found.key, None)

    async def catch_up(self) -> int:
        """Index what the logs gained since they were last read; return the sessions read.

        The sessions the journal of changes names since the file's place; every log looked
        at when it cannot say. A turn that ends meanwhile is indexed at once, between two
        of these sessions (`session_updated`).
        """
        if not self.files.ready.is_set():
            return 0
        async with self.files.write_lock:
            place = await trio.to_thread.run_sync(self._stored_place)
        sessions_dir = self.files.sources.sessions_dir
        changes = await trio.to_thread.run_sync(proto.changes_since, sessions_dir, place)
        pending: Set[str] | None = changes.sessions
        if pending is None:
            log.info(
                "the journal of changes cannot say what changed since the index read it "
                "(%s); looking at every log",
                "the index never read it" if place is None else "it was started anew",
            )
            pending = await self._look_at_every_log()
        for session in sorted(pending):
            async with self.files.write_lock:
                await trio.to_thread.run_sync(self._index_session, session)
        async with self.files.write_lock:
            await trio.to_thread.run_sync(self._keep_place, changes.place)
        if pending:
            log.info("caught up %d session(s) with their logs", len(pending))
        await self.archive_changed()
        return len(pending)

    def want_sweep(self) -> None:
        """Have every log looked at, out of the way (`sweep`)."""
        self._sweep.set()

    async def sweep(self) -> None:
        """Look at every log whenever asked (`want_sweep`), in the background; forever.

        The journal's place at the start of a look stands for it: every log written
        before it is looked at. Progress and findings are logged.
        """
        while True:
            await self._sweep.wait()
            self._sweep = trio.Event()
            if not self.files.ready.is_set():
                continue
            started = trio.current_time()
            sessions_dir = self.files.sources.sessions_dir
            place = (await trio.to_thread.run_sync(proto.changes_since, sessions_dir, None)).place
            log.info("looking at every session log, in the background")
            pending = await self._look_at_every_log()
            for session in sorted(pending):
                async with self.files.write_lock:
                    await trio.to_thread.run_sync(self._index_session, session)
            async with self.files.write_lock:
                if self.place is None:
                    await trio.to_thread.run_sync(self._keep_place, place)
            log.info(
                "looked at every session log in %.1f s: %d session(s) had records not indexed",
                trio.current_time() - started,
                len(pending),
            )

    def _stored_place(self) -> ChangesPlace | None:
        try:
            return self.files.writing().place()
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot read {self.files.path}: {exc}") from exc

    async def _look_at_every_log(self) -> set[str]:
        """The sessions whose logs changed since they were indexed (none is read here)."""
        async with self.files.write_lock:
            indexed = await trio.to_thread.run_sync(self._all_progress)
            cursors = dict(self.cursors)
        return await trio.to_thread.run_sync(self._pending, indexed, cursors)

    def _all_progress(self) -> dict[str, int]:
        try:
            return self.files.writing().all_progress()
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot read {self.files.path}: {exc}") from exc

    def _pending(self, indexed: dict[str, int], cursors: dict[str, Cursor]) -> set[str]:
        """The sessions whose logs changed since they were indexed.

        A log with a cursor changed when it grew or was rewritten; one without (after an
        unclean stop, or not read in this run) when it holds more lines than `progress`
        counts.
        """
        pending: set[str] = set()
        for found in list_logs(self.files.sources.sessions_dir):
            if found.session in pending:
                continue
            cursor = cursors.get(found.key)
            try:
                if cursor is not None:
                    changed = (
                        not cursor.still(found.path) or found.path.stat().st_size > cursor.offset
                    )
                else:
                    changed = log_place(found.path)[0] > indexed.get(found.key, 0)
            except OSError as exc:
                log.warning("cannot read %s: %s; skipped it", found.path, exc)
                continue
            if changed:
                pending.add(found.session)
        return pending

    async def archive_changed(self) -> None:
        """Index archive.md's new entries (all of them again if it shrank: a hand edit)."""
        if not self.files.ready.is_set():
            return
        async with self.files.write_lock:
            await trio.to_thread.run_sync(self._index_archive)

    def _index_archive(self) -> None:
        writer = self.files.writing()
        sources = self.files.sources
        try:
            size = sources.archive.stat().st_size
        except FileNotFoundError:
            size = 0
        if size == self._archive_size:
            return
        rows, count = archive_rows(sources.archive, max_class=sources.max_class)
        try:
            indexed = writer.progress(ARCHIVE_LOG)
            if count < indexed:
                log.warning(
                    "archive.md has %d entries but %d are indexed (edited by hand?); "
                    "indexing it again",
                    count,
                    indexed,
                )
                with self.statistics.vocabulary.removing():
                    writer.replace_archive(rows, count)
            elif count > indexed:
                writer.add(rows[indexed:], {ARCHIVE_LOG: count})
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot write to {self.files.path}: {exc}") from exc
        self._archive_size = size


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
