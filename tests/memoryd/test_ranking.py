"""The recall engine's room: its one front door, its one reader of FTS5's private tables,
its self-check at start, and the SQLite versions it was tested on (`memoryd.ranking`)."""

from __future__ import annotations

import ast
import logging
import math
import random
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlean
import trio
from memoryd_fts import connect
from memoryd_harness import CAP_S, SESSION, append, open_index, user

import memoryd
from memoryd.ranking import (
    TESTED_SQLITE,
    Agrees,
    Distrusted,
    Unchecked,
    Vocabulary,
    _check,
    averages,
    query_terms,
    rank,
    self_check,
)
from memoryd.ranking import _tuning as tuning
from memoryd.ranking._bm25 import Scorer
from memoryd.ranking._rank import naive

from .test_search import VOCABULARY, WEIGHTS

PACKAGE = Path(memoryd.__file__).parent
ENGINE = PACKAGE / "ranking"
FTS5_READER = ENGINE / "_fts5.py"
PRIVATE_TABLES = re.compile(
    r"hits_(data|idx|docsize|content|config|vocab)|fts5vocab|varint", re.IGNORECASE
)
QUESTION = "what did we say about w40 and w41"
"""A question the engine answers by its branch and bound on the test corpus (`pruned`)."""


@pytest.fixture(scope="module")
def corpus() -> Iterator[Any]:
    """An index of 3,000 rows of a Zipf vocabulary (common words, then `w0` … `w399`)."""
    rng = random.Random(5)
    conn = connect(
        [
            " ".join(rng.choices(VOCABULARY, cum_weights=WEIGHTS, k=rng.randint(3, 30)))
            for _ in range(3000)
        ]
    )
    yield conn
    conn.close()


@pytest.fixture
def optimised(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine ranks whatever the index's size and the query's estimated cost."""
    monkeypatch.setattr(tuning, "OPTIMISE_FROM_ROWS", 0)
    monkeypatch.setattr(tuning, "NAIVE_US", 0)


def _modules(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def _imported(path: Path) -> list[str]:
    """Every module `path` imports from, absolute, with the names it takes (`module:name`)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1]
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [f"{module}:{alias.name}" for alias in node.names]
    return found


def _reaches_inside(imported: str) -> bool:
    module, _, name = imported.partition(":")
    inside = module.split(".")[2:] if module.startswith("memoryd.ranking") else []
    return any(part.startswith("_") for part in inside) or (
        module == "memoryd.ranking" and name.startswith("_")
    )


def test_the_rest_of_memoryd_imports_only_the_engine_s_front() -> None:
    outside = [p for p in _modules(PACKAGE) if ENGINE not in p.parents]
    assert len(outside) > 10
    reaching = [
        f"{path.relative_to(PACKAGE)} imports {imported}"
        for path in outside
        for imported in _imported(path)
        if _reaches_inside(imported)
    ]
    assert reaching == []
    # The walk sees the imports that matter: memoryd's index takes `rank` from the front.
    assert "memoryd.ranking:rank" in _imported(PACKAGE / "_index_search.py")
    assert _reaches_inside("memoryd.ranking._fts5:averages")
    assert _reaches_inside("memoryd.ranking:_fts5")


def test_only_the_fts5_module_names_fts5_s_private_tables_or_varints() -> None:
    naming = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in _modules(PACKAGE)
        if path != FTS5_READER
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE_TABLES.search(line)
    ]
    assert naming == []
    assert PRIVATE_TABLES.search(FTS5_READER.read_text())


# -- the self-check --------------------------------------------------------------------


class _OffByAnUlp(Scorer):
    """A scorer wrong in the last bit: what a change to FTS5's arithmetic would look like."""

    def score(self, rowids: list[int]) -> dict[int, float]:
        return {r: math.nextafter(s, 0.0) for r, s in super().score(rowids).items()}


def _ranked(conn: Any, terms: list[str], k: int, **kwargs: Any) -> tuple[Any, list[Any]]:
    conn.execute("BEGIN")
    try:
        return rank(conn, terms, k, Vocabulary(), **kwargs), naive(conn, terms, k)
    finally:
        conn.execute("COMMIT")


@pytest.mark.parametrize("scanned", [False, True])
def test_a_sound_index_passes_the_self_check(
    corpus: Any, scanned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memoryd.ranking")
    vocabulary = Vocabulary()
    if scanned:
        vocabulary.scan(corpus)
    verdict = self_check(corpus, vocabulary)
    assert isinstance(verdict, Agrees)
    assert verdict.rows >= tuning.CHECK_ROWS  # every sampled row, at least once
    assert "gave fts5's bm25 on" in caplog.text
    assert not corpus.in_transaction


def test_an_index_without_words_is_left_unchecked() -> None:
    assert self_check(connect([]), Vocabulary()) == Unchecked()
    assert self_check(connect(["", "... !!"]), Vocabulary()) == Unchecked()


@pytest.mark.usefixtures("optimised")
@pytest.mark.parametrize("doctored", ["scorer", "averages"])
def test_an_engine_that_disagrees_is_distrusted_and_rank_serves_the_spec_query(
    corpus: Any, doctored: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    terms = query_terms(QUESTION)
    trusted, baseline = _ranked(corpus, terms, 10)
    assert trusted.plan == "pruned"  # the engine, not the spec's query, answers this one
    if doctored == "scorer":
        monkeypatch.setattr(_check, "Scorer", _OffByAnUlp)
    else:

        def one_row_more(conn: Any) -> tuple[int, int]:
            rows, tokens = averages(conn)
            return rows + 1, tokens

        monkeypatch.setattr(_check, "averages", one_row_more)
    with caplog.at_level(logging.WARNING, logger="memoryd.ranking"):
        verdict = self_check(corpus, Vocabulary())
    assert isinstance(verdict, Distrusted)
    assert re.fullmatch(r"row \d+ for .*: the engine's bm25 is .*, fts5's .*", verdict.reason)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert verdict.reason in warnings[0].getMessage()
    ranking, baseline = _ranked(corpus, terms, 10, verdict=verdict)
    assert (ranking.plan, ranking.exact) == ("naive, engine distrusted", True)
    assert ranking.rows == baseline == trusted.rows


@pytest.mark.usefixtures("optimised")
def test_an_untested_sqlite_is_distrusted(
    corpus: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sqlean, "sqlite_version", "3.99.0")
    with caplog.at_level(logging.WARNING, logger="memoryd.ranking"):
        verdict = self_check(corpus, Vocabulary())
    assert isinstance(verdict, Distrusted)
    assert "sqlite 3.99.0 is not a version the engine was tested on" in verdict.reason
    assert "3.99.0" in caplog.text
    terms = query_terms(QUESTION)
    ranking, baseline = _ranked(corpus, terms, 10, verdict=verdict)
    assert (ranking.plan, ranking.rows) == ("naive, engine distrusted", baseline)


def test_the_sqlite_here_is_one_the_engine_was_tested_on() -> None:
    # A new sqlean.py fails this: run the engine's tests on it, then add its SQLite here.
    assert sqlean.sqlite_version in TESTED_SQLITE


def test_memoryd_pins_the_sqlean_it_was_tested_with() -> None:
    pyproject = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())
    pins = [d for d in pyproject["project"]["dependencies"] if d.startswith("sqlean.py")]
    assert len(pins) == 1
    assert re.fullmatch(r"sqlean\.py==[\d.]+", pins[0])


# -- at memoryd's start ----------------------------------------------------------------


def _say_things(home: Path) -> None:
    append(home / "sessions", [user(f"note {i}: the launch window w{i} moved") for i in range(60)])


async def test_memoryd_checks_its_engine_once_the_index_is_open(short_dir: Path) -> None:
    _say_things(short_dir)
    async with open_index(short_dir) as index:
        with trio.fail_after(CAP_S):
            await index.engine_checked.wait()
        assert isinstance(index.engine, Agrees)


@pytest.mark.usefixtures("optimised")
async def test_memoryd_serves_the_spec_query_when_its_engine_disagrees(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_check, "Scorer", _OffByAnUlp)
    _say_things(short_dir)
    async with open_index(short_dir) as index:
        with trio.fail_after(CAP_S):
            await index.engine_checked.wait()
        assert isinstance(index.engine, Distrusted)
        found = await index.search("launch w7", 3)
        assert found.ranking.plan == "naive, engine distrusted"
        assert found.found[0].text == "note 7: the launch window w7 moved"
        assert found.found[0].source.session == SESSION
