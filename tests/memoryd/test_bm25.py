"""`Scorer` is FTS5's bm25 to the last bit, whatever the rows' text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memoryd_fts import connect

from memoryd.ranking._bm25 import Scorer, tokens_of
from memoryd.ranking._fts5 import averages, walk_count
from memoryd.ranking._query import match_string

WORDS = ["alpha", "beta", "gamma", "delta", "the", "a", "x1", "Beta", "GAMMA"]
# Characters unicode61 splits on as Python does (punctuation, symbols, spaces), and
# characters whose tokens only FTS5 knows (accented and other letters, marks, private
# use): `Scorer` must get both right.
SEPARATORS = [" ", ", ", ". ", "-", "_", "/", "\u2019", " \u201cq\u201d ", " \U0001f600 ", "\u2014"]
OTHERS = [
    "caf\u00e9",
    "\u00e9t\u00e9",
    "hindi \u0939\u093f\u0928\u094d\u0926\u0940",
    "\ue000",
    "na\u0308ive",
]


@st.composite
def texts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(WORDS + OTHERS), min_size=1, max_size=12))
    gaps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(parts), max_size=len(parts)))
    return "".join(p + g for p, g in zip(parts, gaps, strict=True)).strip() or "alpha"


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(texts(), min_size=1, max_size=40),
    query=st.lists(
        st.sampled_from(["alpha", "beta", "gamma", "delta", "the", "a", "x1", "cafe"]),
        min_size=1,
        max_size=5,
        unique=True,
    ),
)
def test_scores_are_fts5s_bm25_bit_for_bit(rows: list[str], query: list[str]) -> None:
    conn = connect(rows)
    try:
        total, tokens = averages(conn)
        counts = [walk_count(conn, term) for term in query]
        scorer = Scorer(conn, query, counts, total, tokens)
        truth = dict(
            conn.execute(
                "SELECT rowid, bm25(hits) FROM hits WHERE hits MATCH ?", (match_string(query),)
            )
        )
        assert scorer.score(list(truth)) == truth
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        (
            'Did we? read_file {"path":"/srv/x1.txt"}',
            ["did", "we", "read", "file", "path", "srv", "x1", "txt"],
        ),
        ("don\u2019t \u201cquote\u201d \U0001f600 \u2014 end", ["don", "t", "quote", "end"]),
        ("caf\u00e9", None),  # unicode61 folds it to "cafe"
        ("\u0939\u093f\u0928\u094d\u0926\u0940", None),
        ("na\u0308ive", None),  # a combining mark
        ("\ue000", None),  # private use: a token character to unicode61
    ],
)
def test_tokens_are_known_only_when_certain(text: str, tokens: list[str] | None) -> None:
    found = tokens_of(text)
    assert (found if found is None else [t.decode() for t in found]) == tokens


def test_rows_of_uncertain_tokens_are_marked_by_fts5() -> None:
    conn = connect(["caf\u00e9 cafe", "cafe the", "the a"])
    total, tokens = averages(conn)
    scorer = Scorer(
        conn, ["cafe", "the"], [walk_count(conn, "cafe"), walk_count(conn, "the")], total, tokens
    )
    truth = dict(conn.execute("SELECT rowid, bm25(hits) FROM hits WHERE hits MATCH 'cafe OR the'"))
    assert scorer.score([1, 2, 3]) == truth
    assert scorer.rows_marked == 1
