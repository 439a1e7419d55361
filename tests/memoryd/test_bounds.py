"""The terms' best scores: never below any row's true part of bm25, kept as rows are added."""

from __future__ import annotations

import itertools
import random
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from memoryd_fts import append, connect, scan_bounds

from memoryd._logs import Row
from memoryd._store import Writer
from memoryd.ranking import Frontier, TermBounds, Vocabulary, averages, rank
from memoryd.ranking import _tuning as tuning
from memoryd.ranking._bm25 import Scorer
from memoryd.ranking._bounds import best_part, read_frontiers
from memoryd.ranking._rank import naive

from .test_search import WAYS, corpora, optimised  # noqa: F401 (a fixture)

# Words whose tokens only FTS5 knows for certain (a folded accent, a ligature), beside
# plain ones: rows holding them are tokenized by FTS5 for the bounds.
ODD = ["café", "cafe", "naïve", "ﬁne", "Ø"]


def _scan(conn: object) -> tuple[Vocabulary, TermBounds]:
    vocabulary = Vocabulary()
    vocabulary.scan(conn)
    bounds = TermBounds()
    frequent = vocabulary.frequent()
    assert frequent is not None
    assert scan_bounds(conn, bounds, frequent)
    return vocabulary, bounds


def _parts(conn: object, term: str) -> list[float]:
    """Each row's true part of bm25 for `term` alone (FTS5's, negated)."""
    found = conn.execute(  # type: ignore[attr-defined]
        "SELECT -bm25(hits) FROM hits WHERE hits MATCH ?", (f'"{term}"',)
    )
    return [float(s) for (s,) in found]


@st.composite
def grown(draw: st.DrawFn) -> tuple[list[str], list[str], list[str]]:
    """Rows indexed before the scan, rows added after it (some with odd tokens), a query."""
    rows, query = draw(corpora())
    rng = random.Random(draw(st.integers(min_value=0, max_value=2**32)))
    odd = draw(st.floats(min_value=0.0, max_value=0.5))
    rows = [
        " ".join(w if rng.random() > odd else rng.choice(ODD) for w in row.split()) for row in rows
    ]
    cut = draw(st.integers(min_value=1, max_value=len(rows)))
    return rows[:cut], rows[cut:], [*query, "cafe"]


@settings(max_examples=100, deadline=None)
@given(case=grown())
def test_a_bound_is_never_below_a_row_s_part_and_is_reached(
    case: tuple[list[str], list[str], list[str]],
) -> None:
    before, after, query = case
    conn = connect(before)
    try:
        _, bounds = _scan(conn)
        first = append(conn, after)[0] if after else 0
        if after:
            bounds.added(conn, first, after)
        rows, tokens = averages(conn)
        for term in {w.lower() for w in query}:
            frontier = bounds.frontier(term)
            if frontier is None:
                continue
            idf = Scorer(conn, [term], [len(_parts(conn, term))], rows, tokens).idf[0]
            bound = idf * best_part(frontier, tokens / rows)
            parts = _parts(conn, term)
            assert all(part <= bound for part in parts)
            # Every row counted is in the index: the bound is some row's part.
            assert bound in parts or not parts
            event("bounded")
    finally:
        conn.close()


@pytest.mark.usefixtures("optimised")
@settings(max_examples=200, deadline=None)
@given(case=grown(), k=st.integers(min_value=1, max_value=10), way=st.sampled_from(sorted(WAYS)))
def test_with_the_bounds_the_ranking_is_the_spec_query_s(
    case: tuple[list[str], list[str], list[str]], k: int, way: str
) -> None:
    before, after, query = case
    conn = connect(before)
    try:
        vocabulary, bounds = _scan(conn)
        if after:
            bounds.added(conn, append(conn, after)[0], after)
        terms = [w for w in dict.fromkeys(w.lower() for w in query) if w.isascii()]
        conn.execute("BEGIN")
        with mock.patch.multiple(tuning, **WAYS[way]):
            ranking = rank(conn, terms, k, vocabulary, bounds=bounds)
        baseline = naive(conn, terms, k)
        conn.execute("COMMIT")
    finally:
        conn.close()
    event(ranking.plan)
    assert ranking.exact
    assert ranking.rows == baseline


@settings(max_examples=100, deadline=None)
@given(case=grown())
def test_a_scan_made_elsewhere_keeps_what_a_scan_here_keeps(
    case: tuple[list[str], list[str], list[str]],
) -> None:
    """memoryd's way (`begin_elsewhere`, another connection reads, rows are added before
    it ends, `install`) gives every frequent term the frontier a scan here gives."""
    before, after, _ = case
    here, there = connect(before), connect(before)
    try:
        vocabulary, bounds = _scan(here)
        frequent = vocabulary.frequent()
        assert frequent is not None
        elsewhere = TermBounds()
        generation = elsewhere.begin_elsewhere()
        found = read_frontiers(there, frequent)  # its snapshot predates the rows added next
        if after:
            bounds.added(here, append(here, after)[0], after)
            elsewhere.added(there, append(there, after)[0], after)
        assert found is not None
        assert elsewhere.install(found, generation)
        for term in frequent:
            assert elsewhere.frontier(term) == bounds.frontier(term), term
    finally:
        here.close()
        there.close()


def test_a_scan_of_a_file_since_replaced_keeps_nothing() -> None:
    conn = connect(["a b c"] * 50)
    bounds = TermBounds()
    generation = bounds.begin_elsewhere()
    found = read_frontiers(conn, ["a"])
    assert found == {b"a": {1: 3}}
    bounds.clear()  # a rebuild swapped a new file in meanwhile
    assert not bounds.install(found, generation)
    assert bounds.missing()


def test_rows_added_during_a_scan_are_kept() -> None:
    conn = connect(["a b c d e f"] * 50)
    bounds = TermBounds()
    scanning = conn.execute

    # The scan's snapshot predates a row added "meanwhile": `added` runs when the scan
    # has started but before it keeps what it read.
    def execute(sql: str, *args: object) -> object:
        if sql.startswith("SELECT c.id"):
            rowids = append(conn2, ["a"])
            bounds.added(conn2, rowids[0], ["a"])
        return scanning(sql, *args)

    conn2 = conn
    wrapped = type("Wrapped", (), {"execute": staticmethod(execute)})()
    assert scan_bounds(wrapped, bounds, ["a"])
    assert bounds.frontier("a") == {1: 1}


def test_cleared_bounds_are_loose_until_scanned_again() -> None:
    conn = connect([" ".join(itertools.repeat("a", n)) for n in range(1, 30)])
    _, bounds = _scan(conn)
    assert bounds.frontier("a") is not None
    bounds.clear()
    assert bounds.missing()
    assert bounds.frontier("a") is None


def test_rows_the_writer_adds_are_bounded_before_they_are_committed() -> None:
    conn = connect(["a b c d"] * 30)
    _, bounds = _scan(conn)
    writer = Writer(conn)
    seen: list[Frontier | None] = []

    def inserted(conn: object, first: int, rows: list[Row]) -> None:
        bounds.added(conn, first, [row.text for row in rows])
        seen.append(bounds.frontier("a"))

    writer.inserted = inserted
    row = Row("a a café", "session", "chat-abcdefgh", 0, 0, "t", "user", "private", 0)
    writer.add([row], {})
    # Folded in inside the transaction, as FTS5 tokenized it (three tokens, two "a").
    assert seen == [{1: 4, 2: 3}]
    assert bounds.frontier("cafe") is None  # not a frequent term at the scan: loose
