"""The recall query builder: only quoted terms joined by OR ever reach FTS5."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
import sqlean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd._store import schema
from memoryd.ranking._query import match_string, query_terms

SHAPE = re.compile(r'"[^"]+"( OR "[^"]+")*')


@pytest.fixture(scope="module", params=["spec", "context"])
def fts(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The three rows in an index as each ranking keeps it (the spec's, the context one's)."""
    conn = sqlean.connect(":memory:")
    for statement in schema(request.param):
        conn.execute(statement)
    conn.executemany(
        "INSERT INTO hits (text) VALUES (?)",
        [
            ("near a b and the column term",),
            ("NEAR(a b) said the owner; col:term {a b}:c",),
            ("हिन्दी भाषा, Ελληνικά, русский, 中文, العربية, עברית, 日本語のテキスト",),
        ],
    )
    yield conn
    conn.close()


def matches(conn: Any, query: str) -> list[int]:
    """Run `query` through the builder and FTS5; an error here fails the test."""
    terms = query_terms(query)
    if not terms:
        return []
    found = conn.execute(
        "SELECT rowid FROM hits WHERE hits MATCH ? ORDER BY bm25(hits)", (match_string(terms),)
    )
    return [rowid for (rowid,) in found]


def is_term_char(char: str) -> bool:
    return char.isalnum() or unicodedata.category(char).startswith("M")


def test_terms_are_quoted_and_joined_with_or() -> None:
    assert query_terms("When is the launch window?") == ["When", "is", "the", "launch", "window"]
    assert match_string(["launch", "window"]) == '"launch" OR "window"'


def test_repeated_terms_count_once_whatever_their_case() -> None:
    assert query_terms("the The THE launch") == ["the", "launch"]


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("NEAR(a b)", ["NEAR", "a", "b"]),
        ("NEAR(a b, 3)", ["NEAR", "a", "b", "3"]),
        ("a*", ["a"]),
        ("^a", ["a"]),
        ('"unbalanced', ["unbalanced"]),
        ('say "hi" please"', ["say", "hi", "please"]),
        ("col:term", ["col", "term"]),
        ("text:term", ["text", "term"]),
        ("{a b}:c", ["a", "b", "c"]),
        ("-term", ["term"]),
        ("a AND b", ["a", "AND", "b"]),
        ("a OR b", ["a", "OR", "b"]),
        ("NOT a", ["NOT", "a"]),
        ("a NOT b", ["a", "NOT", "b"]),
        ("(a OR b) AND c", ["a", "OR", "b", "AND", "c"]),
        ("a + b", ["a", "b"]),
        ("a\x00b\x00", ["a", "b"]),
        ("*", []),
        ("", []),
        ("'; DROP TABLE hits; --", ["DROP", "TABLE", "hits"]),
        ("hits MATCH 'x'", ["hits", "MATCH", "x"]),
        ("snake_case-and.dots", ["snake", "case", "and", "dots"]),
    ],
)
def test_fts5_syntax_is_only_ever_terms(fts: Any, query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms
    matches(fts, query)  # and FTS5 takes it


def test_operators_match_as_words(fts: Any) -> None:
    assert matches(fts, "NEAR(a b)")[:1] == [2]
    assert matches(fts, "col:term") != []
    assert matches(fts, "OR") == []  # a word no row holds, not the operator


def test_500_characters_of_punctuation_have_no_terms(fts: Any) -> None:
    punctuation = "".join(chr(c) for c in range(33, 127) if not chr(c).isalnum())
    query = (punctuation * 20)[:500]
    assert query_terms(query) == []
    assert matches(fts, query) == []


@pytest.mark.parametrize(
    ("query", "row"),
    [
        ("हिन्दी", 3),
        ("Ελληνικά", 3),
        ("РУССКИЙ", 3),
        ("العربية", 3),
        ("עברית", 3),
        ("中文", 3),
    ],
)
def test_letters_of_many_scripts_find_their_row(fts: Any, query: str, row: int) -> None:
    assert matches(fts, query) == [row]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=500))
def test_any_query_is_quoted_terms_joined_by_or_and_parses(fts: Any, query: str) -> None:
    terms = query_terms(query)
    built = match_string(terms)
    if terms:
        assert SHAPE.fullmatch(built), built
        assert all(term and all(is_term_char(c) for c in term) for term in terms)
        assert built.count('"') == 2 * len(terms)
    else:
        assert built == ""
    matches(fts, query)  # never an SQLite error


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.sampled_from(
            [
                "NEAR(",
                ")",
                "(",
                "*",
                "^",
                '"',
                ":",
                "{",
                "}",
                "-",
                "+",
                "AND",
                "OR",
                "NOT",
                "\x00",
                "col",
                "text",
                "a",
                "b",
                ",",
                " ",
                "é",
                "ß",
                "\u0301",
                "\u200b",
                "\U0001f600",
            ]
        ),
        max_size=60,
    ).map("".join)
)
def test_fts5_syntax_soup_parses(fts: Any, query: str) -> None:
    terms = query_terms(query)
    if terms:
        assert SHAPE.fullmatch(match_string(terms))
    matches(fts, query)
