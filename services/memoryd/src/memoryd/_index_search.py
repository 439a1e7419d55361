"""Recall's searches of the index, and the ranking engine's self-check at start.

A search borrows one of the readers (`Files.reading`) and ranks in a worker thread, in
one read transaction: by the context ranking (`ranking.rank_context`, the default), or
by the spec's (`ranking.rank`, with what `Statistics` keeps: term counts, best scores,
and the engine's verdict; a search that finds the term counts stale asks for a
recount). The self-check compares the engine with FTS5 once the index is open, off the
serving path: until it has run, the engine ranks unchecked.

Rules: a search fails with `IndexUnavailable` while the index is being built, and with
`IndexDamaged` (the file then doubted, `Files.doubt`) when SQLite cannot read it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import sqlean
import trio

from ._index_files import RUNBOOK, Files, IndexUnavailable
from ._index_stats import Statistics
from ._store import Connection, IndexDamaged, roll_back
from .ranking import (
    OPTIMISE_FROM_ROWS,
    Found,
    Ranking,
    Unchecked,
    Verdict,
    fetch,
    function_words,
    query_terms,
    rank,
    rank_context,
    self_check,
)

__all__ = ["Search", "Searcher"]

log = logging.getLogger("memoryd.index")


@dataclasses.dataclass(frozen=True)
class Search:
    """A search's winners, best first, and how they were ranked."""

    found: list[Found]
    ranking: Ranking


class Searcher:
    """Answers recall from the index's readers, ranked by the checked engine."""

    def __init__(self, files: Files, statistics: Statistics) -> None:
        self.files = files
        self.statistics = statistics
        self.function_words = function_words(files.sources.languages)
        """The words the context ranking leaves out of a query (`[recall] languages`)."""
        self.engine: Verdict = Unchecked()
        """The ranking engine's self-check at start (`ranking.self_check`), for `rank`."""
        self.engine_checked = trio.Event()
        """Set once the self-check has run (or could not read the index)."""

    async def check_engine(self) -> None:
        """Once the index is open, compare the ranking engine with FTS5 (off the serving path)."""
        await self.files.ready.wait()
        try:
            async with self.files.reading() as conn:
                self.engine = await trio.to_thread.run_sync(
                    self_check, conn, self.statistics.vocabulary
                )
        except (sqlean.Error, IndexDamaged) as exc:
            log.warning("cannot check the ranking engine: %s; it ranks unchecked", exc)
        finally:
            self.engine_checked.set()

    async def search(
        self, query: str, k: int, *, then: Callable[[Search], None] | None = None
    ) -> Search:
        """The k best hits for `query`; none when it has no terms.

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
        if not self.files.ready.is_set():
            raise IndexUnavailable("the recall index is being built; try again in a minute")
        async with self.files.reading() as conn:
            try:
                found, stale = await trio.to_thread.run_sync(self._search, conn, terms, k, then)
            except IndexDamaged:
                self.files.doubt()
                raise
        if stale:
            self.statistics.recount()
        return found

    def _search(
        self,
        conn: Connection,
        terms: list[str],
        k: int,
        then: Callable[[Search], None] | None = None,
    ) -> tuple[Search, bool]:
        vocabulary = self.statistics.vocabulary
        try:
            conn.execute("BEGIN")
            try:
                if self.files.sources.ranking == "context":
                    ranked = rank_context(conn, terms, k, self.function_words)
                    ranking = Ranking(ranked.rows, "context", exact=True, marked=ranked.terms)
                else:
                    ranking = rank(
                        conn,
                        terms,
                        k,
                        vocabulary,
                        bounds=self.statistics.bounds,
                        verdict=self.engine,
                    )
                found = fetch(conn, [rowid for rowid, _ in ranking.rows])
            except BaseException:
                # An I/O error may have ended the transaction already; what failed is
                # the error to report, not a COMMIT's complaint about it.
                roll_back(conn)
                raise
            conn.execute("COMMIT")
        except sqlean.Error as exc:
            log.error("searching %s failed: %s (runbook: %s)", self.files.path, exc, RUNBOOK)
            raise IndexDamaged(f"the recall index cannot be read: {exc}") from exc
        stale = ranking.indexed >= OPTIMISE_FROM_ROWS and vocabulary.stale(ranking.indexed)
        search = Search(found, ranking)
        if then is not None:
            then(search)
        return search, stale
