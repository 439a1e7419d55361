"""The index's part of a forget: find the rows holding a text, put them back redacted.

A forget (`forgetting`, `plan_forget`, `apply_forget`) holds the whole index, rewrites
the rows holding the text in place (same rowid, same source), then has the WAL
checkpointed and truncated (`truncate_wal`). Every connection runs with `secure_delete`,
and FTS5's `secure-delete` is set on `hits`, so nothing of a deleted row is left in
either file; an index built before that setting is vacuumed once.

A row holds the text when taking it out would change the row (`redact_row`): the rule
of the forget that writes it, and of the check after (`verify_forget`), which also looks
for the text in the file's and the WAL's bytes (`raw_holders`). The rows are found by
one scan of FTS5's stored text (`holding_rows`), read through `ranking.stored`: FTS5's
private tables have one reader in memoryd, and it is not here.

Rules: the blocking methods run in a worker thread, under `forgetting` (or, for `look`,
the write lock): no rebuild, write, search or scan of the best scores meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import mmap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import sqlean
import trio

import proto

from ._index_files import Files
from ._index_ingest import Ingest
from ._index_stats import Statistics
from ._logs import archive_rows, redact_row
from ._store import Connection, IndexDamaged, row_value, set_secure_fts, text_hash
from .ranking.stored import secure_fts, texts_where

__all__ = [
    "CHECKPOINT_TRIES",
    "NEAR_CANDIDATES",
    "Forgetting",
    "IndexForget",
    "holding_rows",
    "raw_holders",
]

log = logging.getLogger("memoryd.index")

CHECKPOINT_TRIES = 12
"""How often a forget asks for the WAL's truncation (backing off, about 40 s in all)."""

NEAR_CANDIDATES = 200
"""How many rows holding every word a preview reads to find its near matches."""


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


class IndexForget:
    """Finds and rewrites the index's rows holding a text, and checks the files after."""

    def __init__(self, files: Files, statistics: Statistics, ingest: Ingest) -> None:
        self.files = files
        self.statistics = statistics
        self.ingest = ingest

    @asynccontextmanager
    async def forgetting(self) -> AsyncIterator[None]:
        """Hold the index for a forget: no rebuild, write, search or scan meanwhile."""
        async with self.files.rebuild_lock:
            self.statistics.stop_scan()  # it holds a read of the file: the WAL could not shrink
            async with self.files.exclusive():
                yield

    async def look(self, needle: str) -> tuple[int, list[str]]:
        """How many rows hold `needle`, and the texts of rows near it (writes nothing)."""
        await self.files.caught_up.wait()
        async with self.files.write_lock:
            held = await trio.to_thread.run_sync(self.holding, needle)
            near = await trio.to_thread.run_sync(self.near, needle)
        return len(held), near

    def holding(self, needle: str) -> list[tuple[int, str, str, str]]:
        """Every row whose text holds `needle`: rowid, text, kind, role (blocking).

        A row holds it when taking it out would change the row (`redact_row`): the rule
        of the forget that writes it, and of the check after. Rows holding it only as the
        message they follow (`_held`) are left out: they are not messages holding it.
        """
        return [
            (held.rowid, held.text, held.kind, held.role)
            for held in self._held(needle)
            if held.new_text != held.text
        ]

    def _held(self, needle: str) -> list[_Held]:
        """Every row holding `needle` in its text or in the message it follows."""
        try:
            found = holding_rows(self.files.writing().conn, needle)
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot read {self.files.path}: {exc}") from exc
        held = [_Held.of(row, needle) for row in found]
        return [row for row in held if row.new_text != row.text or row.new_context != row.context]

    def plan_forget(self, needle: str) -> Forgetting:
        """The index's part of forgetting `needle` (blocking; under `forgetting`).

        A row is put back with its text and the message it follows both redacted: the
        message a row follows is the text of the row before it, redacted the same way.
        """
        rows: list[proto.LineEdit] = []
        archive = False
        ranking = self.files.sources.ranking
        held = self._held(needle)
        for row in held:
            if row.kind == "archive":
                archive = True
                continue
            old = text_hash(row_value(ranking, row.text, row.context))
            new = row_value(ranking, row.new_text, row.new_context)
            rows.append(proto.LineEdit(line=row.rowid, old=old, new=new))
        count = sum(1 for row in held if row.new_text != row.text)
        return Forgetting(rows=rows, archive=archive, held=count)

    def near(self, needle: str) -> list[str]:
        """Texts of rows holding every word of `needle` but not `needle` (blocking)."""
        needle_words = proto.words(needle)
        if not needle_words:
            return []
        query = " ".join(f'"{word}"' for word in needle_words)
        try:
            found = (
                self.files.writing()
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
        writer = self.files.writing()
        self.ingest.forgot(plan, writer.next_rowid)  # rows after it: the ingest's `_resync`'s
        conflicts: list[str] = []
        try:
            vacuum = not secure_fts(writer.conn)
            if vacuum:
                writer.conn.execute("BEGIN IMMEDIATE")
                set_secure_fts(writer.conn)
                writer.conn.execute("COMMIT")
            with self.statistics.vocabulary.removing():
                _, _, conflicts = writer.put_back([(r.line, r.old, r.new) for r in rows])
                if archive:
                    sources = self.files.sources
                    found, count = archive_rows(sources.archive, max_class=sources.max_class)
                    writer.replace_archive(found, count)
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot write to {self.files.path}: {exc}") from exc
        finally:
            self.statistics.bounds.clear()
            self.ingest.lose_places()
        return conflicts, vacuum

    def vacuum(self) -> None:
        """Rewrite the whole file once, in memory (blocking; under `forgetting`)."""
        conn = self.files.writing().conn
        try:
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.execute("VACUUM")
        except sqlean.Error as exc:
            raise IndexDamaged(f"cannot vacuum {self.files.path}: {exc}") from exc

    async def truncate_wal(self) -> bool:
        """Checkpoint the WAL into the file and truncate it; False if readers kept it busy.

        Under `forgetting`: memoryd's own readers are idle; a scan of the best scores
        started meanwhile is cancelled again, and the call backs off between tries.
        """
        delay = 0.05
        for _ in range(CHECKPOINT_TRIES):
            busy = await trio.to_thread.run_sync(self.files.checkpoint)
            if not busy:
                return True
            self.statistics.stop_scan()
            await trio.sleep(delay)
            delay = min(delay * 2, 8.0)
        return False

    def verify_forget(self, needle: str) -> list[str]:
        """Where the index still holds `needle`: a row (`holding`), or the file's bytes."""
        try:
            found = [f"index row {row.rowid}: still holds it" for row in self._held(needle)]
        except IndexDamaged as exc:
            found = [f"index: cannot be read: {exc}"]
        path = self.files.path
        files = [path, Path(f"{path}-wal")]
        return found + [f"{name}: its bytes still hold it" for name in raw_holders(files, needle)]


@dataclasses.dataclass(frozen=True)
class _Held:
    """A row that may hold a text, and the row with the text taken out of it."""

    rowid: int
    text: str
    context: str
    kind: str
    role: str
    new_text: str
    new_context: str

    @classmethod
    def of(cls, row: tuple[int, str, str, str, str], needle: str) -> _Held:
        rowid, text, context, kind, role = row
        # The message a row follows is a message's row (the owner's or the assistant's).
        return cls(
            rowid,
            text,
            context,
            kind,
            role,
            redact_row(text, role, needle),
            redact_row(context, "user", needle) if context else context,
        )


def holding_rows(conn: Connection, needle: str) -> list[tuple[int, str, str, str, str]]:
    """Every row that may hold `needle`: rowid, text, context, kind and role.

    `redact_row` tells whether it does. The context is the message the row follows (""
    where the index keeps none).

    A scan of the stored text with a Python function (`proto.holds`), not a MATCH: a
    text is not a sequence of FTS5 tokens (a part of a word, punctuation, an invisible
    character). A row with an escape may hold it in JSON: its text, or a tool call's
    arguments (`name arguments`), decoded.
    """

    def holds(text: object) -> bool:
        if not isinstance(text, str):
            return False
        return proto.holds(text, needle) or (
            "\\" in text
            and (proto.holds_text(text, needle) or proto.holds_text(text.partition(" ")[2], needle))
        )

    found = texts_where(conn, holds)
    if not found:
        return []
    sources: dict[int, tuple[str, str]] = {}
    ids = [rowid for rowid, _ in found]
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for rowid, kind, role in conn.execute(
            f"SELECT rowid, kind, role FROM sources WHERE rowid IN ({marks})", part
        ):
            sources[int(rowid)] = (str(kind), str(role))
    return [
        (
            int(rowid),
            texts[0],
            texts[1] if len(texts) > 1 else "",
            *sources.get(rowid, ("session", "")),
        )
        for rowid, texts in found
    ]


def raw_holders(paths: list[Path], needle: str) -> list[str]:
    """The files among `paths` whose bytes hold `needle`, as given or folded (utf-8).

    The after-check of files that are not text (the index and its WAL): what `holds`
    finds in their rows is checked row by row; this looks for what no row shows (a
    page freed but not cleared).
    """
    wanted = {needle.encode(), proto.fold(needle).encode()}
    found: list[str] = []
    for path in paths:
        try:
            with path.open("rb") as f:
                if path.stat().st_size == 0:
                    continue
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    if any(data.find(w) >= 0 for w in wanted):
                        found.append(str(path))
        except FileNotFoundError:
            continue
    return found
