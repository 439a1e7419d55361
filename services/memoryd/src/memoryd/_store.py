"""The index file and its writes, blocking; callers run these in a worker thread.

`{home}/index/memory.sqlite3` holds the spec's schema and nothing else: `hits` (FTS5, the
text; for the context ranking, stemmed, with the message each row follows beside it),
`sources` (where each row came from, and its label) and `progress` (how many
records of each session log are read; `archive.md`'s row counts archive entries, and
`CHANGES_KEY`'s how far the journal of changes is read). It is
opened in WAL mode with `synchronous=NORMAL`, autocommit off (`isolation_level=None`)
and explicit transactions. A connection is used by one thread at a time; the caller
guarantees it.

A rebuild writes a new file next to the live one without a journal (a failed build is
discarded, never used), switches it to WAL, checkpoints it, and leaves the rename to the
caller, who must close every connection to the old file first: a WAL file is found by
name, so an old connection would otherwise write into the new file's journal.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
import sqlean

import proto
from proto import ChangesPlace, Class, FunctionWordsLanguage, Label, RecallRanking

from ._logs import (
    ARCHIVE_LOG,
    Cursor,
    Row,
    SessionLog,
    archive_rows,
    list_logs,
    read_log,
)
from .ranking import averages

__all__ = [
    "CHANGES_KEY",
    "CONTEXT_HITS",
    "INDEX_FILE",
    "SCHEMA",
    "Built",
    "IndexDamaged",
    "OtherRanking",
    "Sources",
    "Writer",
    "build",
    "connect",
    "private",
    "remove_file",
    "roll_back",
    "row_value",
    "schema",
    "set_secure_fts",
    "text_hash",
    "verify",
]

log = logging.getLogger("memoryd.index")

INDEX_FILE = "memory.sqlite3"
SCHEMA = (
    "CREATE VIRTUAL TABLE hits USING fts5(text, tokenize = 'unicode61')",
    "CREATE TABLE sources (rowid INTEGER PRIMARY KEY, kind TEXT, session TEXT, epoch INTEGER, "
    "record INTEGER, time TEXT, role TEXT, class TEXT, untrusted INTEGER)",
    "CREATE TABLE progress (log TEXT PRIMARY KEY, records INTEGER)",
)
CONTEXT_HITS = "CREATE VIRTUAL TABLE hits USING fts5(text, context, tokenize = 'porter unicode61')"
"""`hits` as the context ranking keeps it (`[recall] ranking = "context"`, the default): each
row's text and the message it follows (`Row.context`), stemmed; the other two tables are
the spec's."""
_TABLES = ("hits", "sources", "progress")
CHANGES_KEY = ""
"""`progress`'s row for the journal of changes (`proto.changes_since`): the empty key (no
log's), its count the journal's id (as a number) times 2**32 plus the bytes of it read,
every session named before them indexed. A number, not text: a forget's check after looks
for the text in the file's bytes, and a word of ours there would look like the owner's."""
_SUFFIXES = ("", "-journal", "-wal", "-shm")

Connection = Any
"""A `sqlean.Connection` (sqlean ships no type information)."""


class IndexDamaged(Exception):
    """The index file cannot be opened or read, or does not hold the spec's schema."""

    code = "memory-index-damaged"


class OtherRanking(IndexDamaged):
    """The file was built for the other ranking (`[recall] ranking` changed): rebuilt."""


@dataclasses.dataclass(frozen=True)
class Sources:
    """What the index is built from, what it leaves out, and how it is kept and ranked."""

    sessions_dir: Path
    archive: Path
    max_class: Class
    ranking: RecallRanking
    """`hits`' schema and recall's ranking: the spec's, or the context ranking's (no
    default: memoryd's is its config's, and a build must match the file it stands for)."""
    languages: tuple[FunctionWordsLanguage, ...] = ("en",)
    """Whose function words the context ranking leaves out of a query."""


def schema(ranking: RecallRanking) -> tuple[str, ...]:
    """The index's tables for `ranking`: the spec's, with `hits` the ranking's own."""
    return SCHEMA if ranking == "spec" else (CONTEXT_HITS, *SCHEMA[1:])


def connect(path: Path) -> Connection:
    """Open `path` (created if missing, 0600) in WAL mode; `IndexDamaged` if it cannot be."""
    if not path.exists():
        _create_private(path)
    try:
        conn = sqlean.connect(os.fspath(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        private(conn)
    except sqlean.Error as exc:
        raise IndexDamaged(f"{path} cannot be opened: {exc}") from exc
    return conn


def private(conn: Connection) -> None:
    """What every connection to an index sets: deleted text leaves no trace in the file.

    `secure_delete` zeroes freed content (per connection, and its default depends on the
    build); `temp_store=MEMORY` keeps temporary tables (the bounds' tokenizer, a VACUUM's
    copy) out of temporary files.
    """
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("PRAGMA temp_store=MEMORY")


def set_secure_fts(conn: Connection) -> None:
    """Set FTS5's `secure-delete` on `hits`: a delete leaves none of a row's tokens behind.

    Kept in FTS5's own configuration (`ranking.stored.secure_fts` reads it), so the
    tables' `sql` (what `verify` compares) is unchanged.
    """
    conn.execute("INSERT INTO hits(hits, rank) VALUES('secure-delete', 1)")


def _create_private(path: Path) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def _normalised(sql: str) -> str:
    return " ".join(sql.split())


def verify(conn: Connection, ranking: RecallRanking, *, thorough: bool = False) -> None:
    """Check that the schema is `ranking`'s and the tables read; `IndexDamaged` if not.

    Args:
        conn: An open connection.
        ranking: The ranking the file must be kept for (`OtherRanking` if it is the other's).
        thorough: Also run `PRAGMA quick_check` (reads every page: seconds at 1M rows).
    """
    try:
        found = dict(
            conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE name IN (?, ?, ?)", _TABLES
            ).fetchall()
        )
        other: RecallRanking = "context" if ranking == "spec" else "spec"
        if _normalised(found.get("hits") or "") == _normalised(schema(other)[0]):
            raise OtherRanking(f"it was built for the {other} ranking, not the {ranking} one")
        for name, sql in zip(_TABLES, schema(ranking), strict=True):
            if _normalised(found.get(name) or "") != _normalised(sql):
                raise IndexDamaged(f"table {name!r} is missing or not the spec's")
        conn.execute("SELECT count(*) FROM progress").fetchone()
        averages(conn)  # a damaged FTS5 table fails here already
        if thorough:
            result = conn.execute("PRAGMA quick_check").fetchall()
            if result != [("ok",)]:
                raise IndexDamaged(f"quick_check says {result[0][0]!r}")
    except sqlean.Error as exc:
        raise IndexDamaged(str(exc)) from exc


def create_schema(conn: Connection, ranking: RecallRanking = "spec") -> None:
    """Create the three tables in an empty file, `hits` as `ranking` keeps it."""
    conn.execute("BEGIN")
    for statement in schema(ranking):
        conn.execute(statement)
    set_secure_fts(conn)
    conn.execute("COMMIT")


def remove_file(path: Path) -> None:
    """Delete an index file and its journal, WAL and shared-memory files, if present."""
    for suffix in _SUFFIXES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)


class Writer:
    """The one connection that writes the live index; used by one thread at a time."""

    def __init__(self, conn: Connection, ranking: RecallRanking = "spec") -> None:
        self.conn = conn
        self.ranking: RecallRanking = ranking
        row = conn.execute("SELECT coalesce(max(rowid), 0) FROM sources").fetchone()
        self.next_rowid: int = row[0] + 1
        self.inserted: Callable[[Connection, int, list[Row]], None] | None = None
        """Called with the rows and the first rowid before they are committed (a search
        that can see them must find them in whatever is kept about them)."""

    def progress(self, key: str) -> int:
        """How many records of `key` are indexed (0 when none)."""
        row = self.conn.execute("SELECT records FROM progress WHERE log = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    def all_progress(self) -> dict[str, int]:
        """Every log's count."""
        return {k: int(v) for k, v in self.conn.execute("SELECT log, records FROM progress")}

    def place(self) -> ChangesPlace | None:
        """How far the journal of changes is read (None: this file never read it)."""
        row = self.conn.execute(
            "SELECT records FROM progress WHERE log = ?", (CHANGES_KEY,)
        ).fetchone()
        if row is None:
            return None
        journal, offset = divmod(int(row[0]), 2**32)
        return ChangesPlace(journal=f"{journal:08x}" if journal else "", offset=offset)

    def keep_place(self, place: ChangesPlace) -> None:
        """Record how far the journal of changes is read (every session before it indexed)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            _keep_place(self.conn, place)
            self.conn.execute("COMMIT")
        except BaseException:
            roll_back(self.conn)
            raise

    def add(self, rows: list[Row], progress: dict[str, int]) -> None:
        """Insert `rows` and set `progress`, in one transaction."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            first = self.next_rowid
            _insert(self.conn, rows, first, self.ranking)
            if self.inserted is not None:
                self.inserted(self.conn, first, rows)
            self.conn.executemany(
                "INSERT INTO progress (log, records) VALUES (?, ?) "
                "ON CONFLICT (log) DO UPDATE SET records = excluded.records",
                progress.items(),
            )
            self.conn.execute("COMMIT")
        except BaseException:
            roll_back(self.conn)
            raise
        self.next_rowid = first + len(rows)

    def replace_archive(self, rows: list[Row], count: int) -> None:
        """Drop every archive row and insert `rows` (archive.md was edited, not appended)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute(
                "DELETE FROM hits WHERE rowid IN (SELECT rowid FROM sources WHERE kind = ?)",
                ("archive",),
            )
            self.conn.execute("DELETE FROM sources WHERE kind = ?", ("archive",))
            first = self.next_rowid
            _insert(self.conn, rows, first, self.ranking)
            if self.inserted is not None:
                self.inserted(self.conn, first, rows)
            self.conn.execute(
                "INSERT OR REPLACE INTO progress (log, records) VALUES (?, ?)",
                (ARCHIVE_LOG, count),
            )
            self.conn.execute("COMMIT")
        except BaseException:
            roll_back(self.conn)
            raise
        self.next_rowid = first + len(rows)

    def session_values(
        self, session: str, since: int = 0
    ) -> list[tuple[int, int | None, int, str, str]]:
        """The rows of a session's logs from rowid `since`: rowid, epoch, record, role, value.

        A range of `sources` by its key from `since` (0: a scan of it all, which has no
        index by session): for a log a forget rewrote. The value is `row_value`'s.
        """
        sources = self.conn.execute(
            "SELECT rowid, epoch, record, role FROM sources "
            "WHERE rowid >= ? AND kind = 'session' AND session = ? ORDER BY rowid",
            (since, session),
        ).fetchall()
        texts = self.values([int(row[0]) for row in sources])
        return [(int(a), e, int(r), str(role), texts[a]) for a, e, r, role in sources if a in texts]

    def values(self, rowids: list[int]) -> dict[int, str]:
        """The `row_value` of each of `rowids` that is a row (by key: FTS5 is never scanned)."""
        columns = "text" if self.ranking == "spec" else "text, context"
        found: dict[int, str] = {}
        for start in range(0, len(rowids), 500):
            part = rowids[start : start + 500]
            marks = ",".join("?" * len(part))
            for rowid, *stored in self.conn.execute(
                f"SELECT rowid, {columns} FROM hits WHERE rowid IN ({marks})", part
            ):
                found[int(rowid)] = row_value(self.ranking, *(str(c or "") for c in stored))
        return found

    def put_back(self, steps: list[tuple[int, str, str]]) -> tuple[int, int, list[str]]:
        """Put rows back with a new value, same rowid and source: `(rowid, old hash, new)`.

        Values are `row_value`'s. Idempotent, like a plan's file edits: a row whose value
        hashes to `old` is rewritten, one that is `new` already is skipped, anything else
        is a conflict (reported, left). Returns what was applied, skipped, and the
        conflicts.
        """
        applied = skipped = 0
        conflicts: list[str] = []
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for rowid, old, new in steps:
                now = self.values([rowid]).get(rowid)
                if now is None:
                    conflicts.append(f"index row {rowid}: the row is gone")
                elif now == new:
                    skipped += 1
                elif text_hash(now) == old:
                    self._set(rowid, new)
                    applied += 1
                else:
                    conflicts.append(f"index row {rowid}: changed since the plan was made")
            self.conn.execute("COMMIT")
        except BaseException:
            roll_back(self.conn)
            raise
        return applied, skipped, conflicts

    def _set(self, rowid: int, value: str) -> None:
        if self.ranking == "spec":
            self.conn.execute("UPDATE hits SET text = ? WHERE rowid = ?", (value, rowid))
            return
        text, context = _PAIR.decode(value)
        self.conn.execute(
            "UPDATE hits SET text = ?, context = ? WHERE rowid = ?", (text, context, rowid)
        )


_PAIR = msgspec.json.Decoder(tuple[str, str])


def row_value(ranking: RecallRanking, text: str, context: str = "") -> str:
    """A row as a forget's plan and a resync compare and write it.

    The text (the spec's ranking), or the text and the message it follows as a JSON pair
    (the context ranking).
    """
    if ranking == "spec":
        return text
    return msgspec.json.encode((text, context)).decode()


def text_hash(text: str) -> str:
    """The hash a forget's plan keeps of a row's text (`put_back` compares it): sha256, hex."""
    return hashlib.sha256(text.encode()).hexdigest()


def roll_back(conn: Connection) -> None:
    """End `conn`'s transaction, if SQLite has not ended it already."""
    # SQLite may have rolled back already (a full disk does): nothing left to undo.
    try:
        conn.execute("ROLLBACK")
    except sqlean.Error as exc:
        log.debug("rollback: %s", exc)


def _insert(conn: Connection, rows: list[Row], first: int, ranking: RecallRanking) -> None:
    if ranking == "spec":
        conn.executemany(
            "INSERT INTO hits (rowid, text) VALUES (?, ?)",
            [(first + i, row.text) for i, row in enumerate(rows)],
        )
    else:
        conn.executemany(
            "INSERT INTO hits (rowid, text, context) VALUES (?, ?, ?)",
            [(first + i, row.text, row.context) for i, row in enumerate(rows)],
        )
    conn.executemany(
        "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(first + i, *row.source()) for i, row in enumerate(rows)],
    )


def session_rows(
    logs: Iterable[SessionLog],
    cursors: dict[str, Cursor],
    indexed: dict[str, int],
    max_class: Class,
) -> tuple[list[Row], dict[str, int], dict[str, Cursor]]:
    """The new rows of one session's logs (in epoch order), their counts and cursors.

    Each log is read from its cursor in `cursors`, or from the start, walking the
    records already indexed (`indexed`) for the label and the last message only (a
    cursor that does not know that message is not used); both carry from one epoch to
    the next.
    """
    rows: list[Row] = []
    counts: dict[str, int] = {}
    moved: dict[str, Cursor] = {}
    carry = Label()
    said = ""
    for found in logs:
        done = indexed.get(found.key, 0)
        start = cursors.get(found.key)
        if start is None or not start.still(found.path):
            # Not read yet in this run, or the log was rewritten: walked from its start.
            start = Cursor(records=0, offset=0, label=carry, said=said)
        try:
            new, cursor = read_log(found, start, indexed=done, max_class=max_class)
        except OSError as exc:
            log.warning("cannot read %s: %s; skipped it", found.path, exc)
            break  # a later epoch's label depends on this one
        if cursor.records < done:
            log.warning(
                "%s has %d records but %d are indexed (was it rewritten?); "
                "run bxctl reindex to start over",
                found.path,
                cursor.records,
                done,
            )
        else:
            moved[found.key] = cursor  # never a cursor behind what is indexed
        rows.extend(new)
        counts[found.key] = max(done, cursor.records)
        carry, said = cursor.label or Label(), cursor.said or ""
    return rows, counts, moved


@dataclasses.dataclass
class Built:
    """A finished rebuild, not yet swapped in."""

    path: Path
    logs: int
    records: int
    archive: int
    cursors: dict[str, Cursor]


class BuildStopped(Exception):
    """A rebuild was asked to stop (memoryd is shutting down)."""


def build(target: Path, sources: Sources, stop: threading.Event) -> Built:
    """Build a complete index into `target` (replacing any leftover there).

    Every session log under `sources.sessions_dir` and archive.md are read in one
    transaction. The file ends in WAL mode, checkpointed and fsynced, ready to rename.

    Raises:
        BuildStopped: `stop` was set; `target` is removed.
        OSError, sqlean.Error: the build failed; `target` is removed.
    """
    remove_file(target)
    _create_private(target)
    conn = sqlean.connect(os.fspath(target), isolation_level=None, check_same_thread=False)
    try:
        private(conn)
        built = _fill(conn, target, sources, stop)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except BaseException:
        conn.close()
        remove_file(target)
        raise
    conn.close()
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return built


def _fill(conn: Connection, target: Path, sources: Sources, stop: threading.Event) -> Built:
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    create_schema(conn, sources.ranking)
    conn.execute("BEGIN")
    cursors: dict[str, Cursor] = {}
    counts: dict[str, int] = {}
    # Before the logs are listed: a log written from here on is named after this place.
    place = proto.changes_since(sources.sessions_dir, None).place
    logs = list_logs(sources.sessions_dir)
    next_rowid = 1
    by_session: dict[str, list[SessionLog]] = {}
    for found in logs:
        by_session.setdefault(found.session, []).append(found)
    for session_logs in by_session.values():
        if stop.is_set():
            raise BuildStopped("the rebuild was stopped")
        rows, new_counts, new_cursors = session_rows(session_logs, {}, {}, sources.max_class)
        _insert(conn, rows, next_rowid, sources.ranking)
        next_rowid += len(rows)
        counts.update(new_counts)
        cursors.update(new_cursors)
    records = next_rowid - 1
    archive, archive_count = archive_rows(sources.archive, max_class=sources.max_class)
    _insert(conn, archive, next_rowid, sources.ranking)
    counts[ARCHIVE_LOG] = archive_count
    conn.executemany("INSERT INTO progress (log, records) VALUES (?, ?)", counts.items())
    _keep_place(conn, place)
    conn.execute("COMMIT")
    return Built(target, len(logs), records, archive_count, cursors)


def _keep_place(conn: Connection, place: ChangesPlace) -> None:
    """`place` as `progress`'s `CHANGES_KEY` row (inside the caller's transaction)."""
    journal = int(place.journal, 16) if place.journal else 0
    conn.execute(
        "INSERT INTO progress (log, records) VALUES (?, ?) "
        "ON CONFLICT (log) DO UPDATE SET records = excluded.records",
        (CHANGES_KEY, journal * 2**32 + place.offset),
    )
