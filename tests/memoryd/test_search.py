"""Ranking: the branch and bound answers with the spec's bm25 top k, rows and scores."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from memoryd_fts import connect

from memoryd.ranking import Ranking, Vocabulary, averages, query_terms, rank
from memoryd.ranking import _tuning as tuning
from memoryd.ranking._maxscore import Budget
from memoryd.ranking._query import match_string
from memoryd.ranking._rank import naive

COMMON = ["the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "we", "what", "did"]
RARE = [f"w{n}" for n in range(400)]
VOCABULARY = COMMON + RARE
WEIGHTS = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(VOCABULARY))))


@pytest.fixture(scope="module")
def corpus() -> Iterator[Any]:
    rng = random.Random(5)
    rows = [
        " ".join(rng.choices(VOCABULARY, cum_weights=WEIGHTS, k=rng.randint(3, 30)))
        for _ in range(3000)
    ]
    conn = connect(rows)
    yield conn
    conn.close()


@pytest.fixture
def optimised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tuning, "OPTIMISE_FROM_ROWS", 0)
    monkeypatch.setattr(tuning, "NAIVE_US", 0)


def ranked(
    conn: Any, terms: list[str], k: int, vocabulary: Vocabulary, budget: Budget | None = None
) -> tuple[Ranking, list[tuple[int, float]]]:
    """Our ranking and the spec's query, in one read transaction."""
    conn.execute("BEGIN")
    try:
        return rank(conn, terms, k, vocabulary, budget), naive(conn, terms, k)
    finally:
        conn.execute("COMMIT")


def test_averages_are_fts5s_own_totals(corpus: Any) -> None:
    rows, tokens = averages(corpus)
    assert rows == corpus.execute("SELECT count(*) FROM hits").fetchone()[0] == 3000
    sizes = corpus.execute(
        "SELECT sum(length(text) - length(replace(text, ' ', '')) + 1) FROM hits"
    )
    assert tokens == sizes.fetchone()[0]


# How rows are read is chosen by estimated costs; these force each way in turn.
WAYS: dict[str, dict[str, Any]] = {
    "costed": {"BATCH": 32},
    "ranked": {"LIST_US": 1e9, "SMALL_ROWS": 0},
    "listed": {"LIST_US": 0.0, "SCORE_ROW_US": 0.0, "SMALL_ROWS": 10**9, "LIST_ROWS": 40},
    "split": {"EVAL_ROWS": 0, "SMALL_ROWS": 0, "FIRST_LIMIT": 2, "BATCH": 1},
}


@pytest.mark.usefixtures("optimised")
@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.sampled_from([*VOCABULARY[:60], "nowhere"]), min_size=1, max_size=8),
    k=st.integers(min_value=1, max_value=10),
    scanned=st.booleans(),
    way=st.sampled_from(sorted(WAYS)),
)
def test_the_ranking_is_the_spec_query_s(
    corpus: Any, words: list[str], k: int, scanned: bool, way: str
) -> None:
    vocabulary = Vocabulary()
    if scanned:
        vocabulary.scan(corpus)
    terms = query_terms(" ".join(words))
    with mock.patch.multiple(tuning, **WAYS[way]):
        ranking, baseline = ranked(corpus, terms, k, vocabulary)
    event(ranking.plan)
    assert ranking.exact
    # The same rows in the same order with the same scores, to the bit: `Scorer` is
    # FTS5's bm25, and ties are in rowid order as FTS5 returns them.
    assert ranking.rows == baseline


def _random_rows(draw: st.DrawFn) -> list[str]:
    size = draw(st.integers(min_value=4, max_value=40))
    words = [f"t{n}" for n in range(size)]
    skew = draw(st.floats(min_value=0.5, max_value=2.0))
    weights = list(itertools.accumulate(1.0 / (r + 1) ** skew for r in range(size)))
    seed = draw(st.integers(min_value=0, max_value=2**32))
    rng = random.Random(seed)
    count = draw(st.integers(min_value=1, max_value=400))
    return [
        " ".join(rng.choices(words, cum_weights=weights, k=rng.randint(1, 25)))
        for _ in range(count)
    ]


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    rows = _random_rows(draw)
    vocabulary = [*sorted({w for row in rows for w in row.split()}), "absent"]
    query = draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=9))
    return rows, query


@pytest.mark.usefixtures("optimised")
@settings(max_examples=150, deadline=None)
@given(
    corpus=corpora(), k=st.integers(min_value=1, max_value=10), way=st.sampled_from(sorted(WAYS))
)
def test_on_random_corpora_the_ranking_is_the_spec_query_s(
    corpus: tuple[list[str], list[str]], k: int, way: str
) -> None:
    rows, words = corpus
    conn = connect(rows)
    try:
        vocabulary = Vocabulary()
        vocabulary.scan(conn)
        terms = query_terms(" ".join(words))
        with mock.patch.multiple(tuning, **WAYS[way]):
            ranking, baseline = ranked(conn, terms, k, vocabulary)
    finally:
        conn.close()
    event(ranking.plan)
    assert ranking.exact
    assert ranking.rows == baseline


@pytest.mark.usefixtures("optimised")
@settings(max_examples=100, deadline=None)
@given(
    words=st.lists(st.sampled_from(VOCABULARY[:40]), min_size=2, max_size=8),
    patterns=st.sampled_from([0.0, 1.0, 300.0]),
    scored=st.sampled_from([1, 20, 200]),
)
def test_a_spent_budget_is_said_and_the_rows_are_still_true(
    corpus: Any, words: list[str], patterns: float, scored: int
) -> None:
    terms = query_terms(" ".join(words))
    budget = Budget(patterns=patterns, rows=scored, nodes=3)
    ranking, baseline = ranked(corpus, terms, 10, Vocabulary(), budget)
    event(f"{ranking.plan}, {'exact' if ranking.exact else 'not proven'}")
    if ranking.exact:
        assert ranking.rows == baseline
    # Whatever was cut short: as many rows as the spec's query, each with its true score.
    assert len(ranking.rows) == len(baseline)
    marks = ",".join("?" * len(ranking.rows))
    truth = dict(
        corpus.execute(
            f"SELECT rowid, bm25(hits) FROM hits WHERE hits MATCH ? AND rowid IN ({marks})",
            (match_string(terms), *(r for r, _ in ranking.rows)),
        )
    )
    assert {rowid: truth[rowid] for rowid, _ in ranking.rows} == dict(ranking.rows)
    assert ranking.rows == sorted(ranking.rows, key=lambda r: (r[1], r[0]))


@pytest.mark.usefixtures("optimised")
def test_common_words_still_break_ties() -> None:
    # "the" is in 45 of 50 rows: its IDF is clamped. Six rows hold "zork", all four tokens
    # long: their scores tie but for "the", which only three of them hold.
    rows = ["the filler text here"] * 44 + ["zork a b c"] * 3 + ["zork the b c"] * 3
    conn = connect(rows)
    vocabulary = Vocabulary()
    vocabulary.scan(conn)
    ranking, baseline = ranked(conn, ["the", "zork"], 3, vocabulary)
    assert ranking.plan == "pruned"
    assert ranking.rows == baseline
    assert {rowid for rowid, _ in ranking.rows} == {48, 49, 50}
    assert ranking.marked == ["zork"]


@pytest.mark.usefixtures("optimised")
def test_rare_words_need_not_rank_every_row(corpus: Any) -> None:
    vocabulary = Vocabulary()
    vocabulary.scan(corpus)
    terms = query_terms("what did we say about w40 and w41")
    ranking, baseline = ranked(corpus, terms, 10, vocabulary)
    assert ranking.rows == baseline
    holding = corpus.execute(
        "SELECT count(*) FROM hits WHERE hits MATCH ?", (match_string(terms),)
    ).fetchone()[0]
    assert ranking.scored < holding / 5


@pytest.mark.usefixtures("optimised")
def test_queries_the_spec_query_answers_cheaply_run_as_they_are(corpus: Any) -> None:
    for terms, plan in [
        (["w300", "w301"], "naive"),  # every term rare
        (["the", "of"], "naive, only common words"),
        (["हिन्दी", "w3"], "naive, a term of another script"),
    ]:
        ranking, baseline = ranked(corpus, terms, 5, Vocabulary())
        assert (ranking.plan, ranking.exact, ranking.rows) == (plan, True, baseline)


def test_small_indexes_run_the_naive_query(corpus: Any) -> None:
    ranking, baseline = ranked(corpus, ["the", "w3"], 5, Vocabulary())
    assert (ranking.plan, ranking.exact) == ("naive", True)
    assert ranking.rows == baseline


@pytest.mark.usefixtures("optimised")
def test_rows_with_only_common_words_fill_the_answer_as_the_spec_query_does() -> None:
    # "nowhere" is in no row; the spec's query still answers with rows holding "the".
    rows = ["the filler text here"] * 44 + ["zork a b c"] * 6
    conn = connect(rows)
    vocabulary = Vocabulary()
    vocabulary.scan(conn)
    ranking, baseline = ranked(conn, ["the", "zork"], 8, vocabulary)
    assert ranking.plan == "naive, too few rows with other words"
    assert ranking.rows == baseline
    ranking, baseline = ranked(conn, ["the", "nowhere"], 3, vocabulary)
    assert ranking.rows == baseline
