"""Ranking: the shortcuts around common words give the spec's bm25 ranking."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from typing import Any

import pytest
import sqlean
from hypothesis import event, given, settings
from hypothesis import strategies as st

from memoryd import _search
from memoryd._query import query_terms
from memoryd._search import Vocabulary, averages, naive, prepare, rank
from memoryd._store import SCHEMA

COMMON = ["the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "we", "what", "did"]
RARE = [f"w{n}" for n in range(400)]
VOCABULARY = COMMON + RARE
WEIGHTS = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(VOCABULARY))))


def connect(rows: list[str]) -> Any:
    conn = sqlean.connect(":memory:", isolation_level=None)
    for statement in SCHEMA:
        conn.execute(statement)
    conn.executemany("INSERT INTO hits (rowid, text) VALUES (?, ?)", enumerate(rows, 1))
    conn.executemany(
        "INSERT INTO sources VALUES "
        "(?, 'session', 'chat-abcdefgh', 0, ?, 't', 'user', 'private', 0)",
        ((n, n) for n in range(1, len(rows) + 1)),
    )
    prepare(conn)
    return conn


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
    monkeypatch.setattr(_search, "OPTIMISE_FROM_ROWS", 0)


def scores(ranked: list[tuple[int, float]]) -> list[float]:
    return sorted(round(score, 9) for _, score in ranked)


def test_averages_are_fts5s_own_totals(corpus: Any) -> None:
    rows, tokens = averages(corpus)
    assert rows == corpus.execute("SELECT count(*) FROM hits").fetchone()[0] == 3000
    sizes = corpus.execute(
        "SELECT sum(length(text) - length(replace(text, ' ', '')) + 1) FROM hits"
    )
    assert tokens == sizes.fetchone()[0]


@pytest.mark.usefixtures("optimised")
@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(st.sampled_from([*VOCABULARY[:60], "nowhere"]), min_size=1, max_size=8),
    k=st.integers(min_value=1, max_value=10),
    scanned=st.booleans(),
)
def test_a_proven_ranking_is_the_naive_one(
    corpus: Any, words: list[str], k: int, scanned: bool
) -> None:
    vocabulary = Vocabulary()
    if scanned:
        vocabulary.scan(corpus)
    terms = query_terms(" ".join(words))
    corpus.execute("BEGIN")
    try:
        ranking = rank(corpus, terms, k, vocabulary)
        baseline = naive(corpus, terms, k)
    finally:
        corpus.execute("COMMIT")
    event(f"{ranking.plan}, {'exact' if ranking.exact else 'not proven'}")
    assert len(ranking.rows) == len(baseline)
    if ranking.exact:
        # the same rows, but for rows whose scores tie exactly (the naive order is arbitrary)
        assert scores(ranking.rows) == pytest.approx(scores(baseline), abs=1e-5)


@pytest.mark.usefixtures("optimised")
def test_common_words_leave_the_match_and_still_break_ties() -> None:
    # "the" is in 45 of 50 rows: its IDF is clamped. Six rows hold "zork", all four tokens
    # long: their scores tie but for "the", which only three of them hold.
    rows = ["the filler text here"] * 44 + ["zork a b c"] * 3 + ["zork the b c"] * 3
    conn = connect(rows)
    vocabulary = Vocabulary()
    vocabulary.scan(conn)
    ranking = rank(conn, ["the", "zork"], 3, vocabulary)
    assert ranking.plan == "without common words, ties rescored"
    assert {rowid for rowid, _ in ranking.rows} == {48, 49, 50}
    assert {rowid for rowid, _ in naive(conn, ["the", "zork"], 3)} == {48, 49, 50}
    assert ranking.marked == ["zork"]


@pytest.mark.usefixtures("optimised")
def test_selective_terms_rank_first_with_every_term_counted(corpus: Any) -> None:
    vocabulary = Vocabulary()
    vocabulary.scan(corpus)
    plans = set()
    for query in ["what did we say about w40 and w41", "the w7 of w300", "you w12 that w90"]:
        terms = query_terms(query)
        ranking = rank(corpus, terms, 10, vocabulary)
        plans.add(ranking.plan.split(",")[0])
        assert scores(ranking.rows) == pytest.approx(scores(naive(corpus, terms, 10)), abs=1e-5)
    assert "selective terms first" in plans


def test_small_indexes_run_the_naive_query(corpus: Any) -> None:
    ranking = rank(corpus, ["the", "w3"], 5, Vocabulary())
    assert (ranking.plan, ranking.exact) == ("naive", True)
    assert ranking.rows == naive(corpus, ["the", "w3"], 5)


def test_vocabulary_bounds_hold_as_the_index_grows() -> None:
    conn = connect(["alpha beta"] * 150 + ["beta gamma"] * 50)
    vocabulary = Vocabulary()
    vocabulary.scan(conn)
    assert vocabulary.count(conn, "Alpha", 200) == (150, 150)
    assert vocabulary.count(conn, "delta", 200) == (0, 1)  # under 1% of the rows: not kept
    conn.execute("INSERT INTO hits (text) VALUES ('alpha delta')")
    assert not vocabulary.stale(201)
    low, high = vocabulary.count(conn, "alpha", 201)  # type: ignore[misc]
    assert low <= 151 <= high
    low, high = vocabulary.count(conn, "delta", 201)  # type: ignore[misc]
    assert low <= 1 <= high
    assert vocabulary.stale(203)
    assert vocabulary.count(conn, "alpha", 203) == (151, 151)  # stale: counted afresh
    assert vocabulary.count(conn, "हिन्दी", 201) is None  # FTS5 folds it: left to FTS5


@pytest.mark.usefixtures("optimised")
def test_rows_with_only_common_words_fill_the_answer_as_the_spec_query_does() -> None:
    # "nowhere" is in no row; the spec's query still answers with rows holding "the".
    rows = ["the filler text here"] * 44 + ["zork a b c"] * 6
    conn = connect(rows)
    vocabulary = Vocabulary()
    vocabulary.scan(conn)
    ranking = rank(conn, ["the", "nowhere"], 3, vocabulary)
    assert len(ranking.rows) == 3
    assert ranking.rows == naive(conn, ["the", "nowhere"], 3)
