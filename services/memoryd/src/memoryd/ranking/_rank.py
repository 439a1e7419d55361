"""Ranking recall's hits, blocking: the spec's query, its top k found without it, the hits.

`rank` answers with the spec's bm25 top k. When the self-check at start found the
engine wrong here (`_check`), below `OPTIMISE_FROM_ROWS` rows, when a term is of another
script (only FTS5 knows its tokens, so `Scorer` cannot count them), and when the spec's
query is cheap anyway (every term rare, or an estimated cost under `NAIVE_US`), it runs
the spec's query as it is (`naive`); otherwise `MaxScore` finds the same rows without
scoring every row that holds a term (see `_maxscore`).
"""

from __future__ import annotations

import dataclasses
from typing import assert_never

from proto import HitSource

from . import _tuning
from ._bm25 import Scorer
from ._bounds import TermBounds, best_part
from ._check import UNCHECKED, Agrees, Distrusted, Unchecked, Verdict
from ._fts5 import Connection, averages
from ._maxscore import Budget, MaxScore
from ._query import RANKED, match_string
from ._vocabulary import Vocabulary

__all__ = ["Found", "Ranking", "fetch", "naive", "rank"]


@dataclasses.dataclass(frozen=True)
class Ranking:
    """The best rows, best first: `(rowid, bm25)` pairs (a lower bm25 is better)."""

    rows: list[tuple[int, float]]
    plan: str
    exact: bool
    marked: list[str] = dataclasses.field(default_factory=list)
    """The terms a snippet is centred on: the rarest ones the ranking used."""
    indexed: int = 0
    """The rows in the index when it was ranked (0 when the engine is distrusted: it then
    reads none of FTS5's statistics)."""
    scored: int = 0
    """The rows `Scorer` scored (the benchmark shows it)."""


@dataclasses.dataclass(frozen=True)
class Found:
    """A winning row: its text and where it came from."""

    rowid: int
    text: str
    source: HitSource


def _top(conn: Connection, match: str, limit: int) -> list[tuple[int, float]]:
    return [(int(r), float(s)) for r, s in conn.execute(RANKED, (match, limit))]


def naive(conn: Connection, terms: list[str], k: int) -> list[tuple[int, float]]:
    """The spec's query as it is: every term, ranked by bm25 (the benchmark's baseline)."""
    return _top(conn, match_string(terms), k) if terms else []


def rank(
    conn: Connection,
    terms: list[str],
    k: int,
    vocabulary: Vocabulary,
    budget: Budget | None = None,
    bounds: TermBounds | None = None,
    *,
    verdict: Verdict = UNCHECKED,
) -> Ranking:
    """The k best rows for `terms`, as the spec's query ranks them (see the module doc).

    Runs inside the caller's read transaction, so every count is of one snapshot.
    `verdict` is the self-check's (`self_check`): the engine ranks unless it is
    `Distrusted`.
    """
    match verdict:
        case Distrusted():
            # Nothing of FTS5's private layout is read: that may be what changed.
            found = naive(conn, terms, k)
            return Ranking(found, "naive, engine distrusted", exact=True, marked=terms)
        case Unchecked() | Agrees():
            pass
        case _:
            assert_never(verdict)
    rows, tokens = averages(conn)
    if not terms or rows == 0:
        return Ranking([], "empty", exact=True, marked=terms, indexed=rows)

    def as_is(plan: str) -> Ranking:
        return Ranking(naive(conn, terms, k), plan, exact=True, marked=terms, indexed=rows)

    if rows < _tuning.OPTIMISE_FROM_ROWS:
        return as_is("naive")
    lowered = [t.lower() for t in terms]
    if not all(t.isascii() and t.isalnum() for t in lowered):
        return as_is("naive, a term of another script")
    counts = [vocabulary.count(conn, t) for t in lowered]
    scorer = Scorer(conn, lowered, counts, rows, tokens)
    parts: list[float | None] = [None] * len(lowered)
    if bounds is not None:
        for i, term in enumerate(lowered):
            frontier = bounds.frontier(term)
            parts[i] = None if frontier is None else best_part(frontier, scorer.avgdl)
    search = MaxScore(conn, scorer, counts, rows, k, budget or Budget(), parts)
    if not search.live:
        return as_is("naive, only common words")
    if not (search.middle or search.heavy or search.common):
        return as_is("naive")
    if search.naive_cost() <= _tuning.NAIVE_US:
        return as_is("naive, cheap")
    answer = search.run()
    if answer is None:
        return as_is("naive, too few rows with other words")
    marked = [terms[i] for i in search.rare]
    return Ranking(
        answer,
        search.plan(),
        search.exact,
        marked=marked,
        indexed=rows,
        scored=scorer.rows_scored,
    )


def fetch(conn: Connection, rowids: list[int]) -> list[Found]:
    """The winners' texts and sources, in the order given."""
    if not rowids:
        return []
    marks = ",".join("?" * len(rowids))
    found = {
        row[0]: Found(
            rowid=row[0],
            text=row[1],
            source=HitSource(
                kind=row[2],
                session=row[3],
                epoch=row[4],
                record=row[5],
                time=row[6],
                role=row[7],
                class_=row[8],
                untrusted=bool(row[9]),
            ),
        )
        for row in conn.execute(
            "SELECT s.rowid, h.text, s.kind, s.session, s.epoch, s.record, s.time, s.role, "
            "s.class, s.untrusted FROM sources s JOIN hits h ON h.rowid = s.rowid "
            f"WHERE s.rowid IN ({marks})",
            rowids,
        )
    }
    return [found[rowid] for rowid in rowids if rowid in found]
