"""The engine checked against FTS5 at memoryd's start: trusted only where it gives `bm25()`.

`Scorer` recomputes FTS5's bm25 from FTS5's private tables (`_fts5`), so its scores are
FTS5's only as long as that layout and fts5_aux.c's arithmetic are what the engine was
written against. `self_check` tests that, once per start, off the serving path: a SQLite
version not in `TESTED_SQLITE` is distrusted outright; otherwise a few dozen rows are
sampled, a couple of queries are made of their words (each holding the longest word of
every other row, so that every row is compared at least once), and `Scorer`'s score of each
sampled row holding a term must equal `bm25(hits)` for the same query, to the bit. On
any difference (or any failure of the engine's side) the verdict is `Distrusted`, one
warning names the first difference, and `rank` serves the spec's query from then on.

The terms are each the longest word of a sampled row: long words are rare ones, and
`bm25()` on chosen rows walks every term's postings once per row, so common words would
make the check slow on a large index.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random

import sqlean

from . import _tuning
from ._bm25 import Scorer, tokens_of
from ._fts5 import TESTED_SQLITE, Connection, averages
from ._query import match_string
from ._vocabulary import Vocabulary

__all__ = ["UNCHECKED", "Agrees", "Distrusted", "Unchecked", "Verdict", "self_check"]

log = logging.getLogger("memoryd.ranking")


@dataclasses.dataclass(frozen=True)
class Unchecked:
    """Not checked (yet, or nothing to check: an empty index): the engine ranks."""


@dataclasses.dataclass(frozen=True)
class Agrees:
    """The engine's scores were FTS5's on every row checked: the engine ranks."""

    rows: int
    """The sampled rows compared (each once per query holding one of its terms)."""


@dataclasses.dataclass(frozen=True)
class Distrusted:
    """The engine is wrong here, or untested: `rank` serves the spec's query."""

    reason: str


Verdict = Unchecked | Agrees | Distrusted

UNCHECKED = Unchecked()


def self_check(
    conn: Connection, vocabulary: Vocabulary, rng: random.Random | None = None
) -> Verdict:
    """Compare the engine's scores with `bm25(hits)` on sampled rows; log a distrust once.

    Runs its own read transaction on `conn` (an idle reading connection).

    Raises:
        sqlean.Error: the index could not be read (nothing was decided).
    """
    if sqlean.sqlite_version not in TESTED_SQLITE:
        tested = ", ".join(sorted(TESTED_SQLITE))
        verdict: Verdict = Distrusted(
            f"sqlite {sqlean.sqlite_version} is not a version the engine was tested on ({tested})"
        )
    else:
        conn.execute("BEGIN")
        try:
            verdict = _compare(conn, vocabulary, rng or random.Random())
        except BaseException:
            with contextlib.suppress(sqlean.Error):  # SQLite may have ended it already
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    match verdict:
        case Distrusted(reason):
            log.warning("the ranking engine is not trusted: %s; recall runs bm25 as is", reason)
        case Agrees(rows):
            log.info("the ranking engine gave fts5's bm25 on %d sampled rows", rows)
        case Unchecked():
            log.info("the ranking engine is not checked: the index has no words yet")
    return verdict


def _sample(conn: Connection, rng: random.Random) -> list[tuple[int, str]]:
    """Up to `CHECK_ROWS` rows holding a word the engine scores (ASCII letters or digits)."""
    last = int(conn.execute("SELECT coalesce(max(rowid), 0) FROM sources").fetchone()[0])
    picked = rng.sample(range(1, last + 1), min(last, 2 * _tuning.CHECK_ROWS))
    if not picked:
        return []
    marks = ",".join("?" * len(picked))
    found = conn.execute(f"SELECT rowid, text FROM hits WHERE rowid IN ({marks})", picked)
    rows = [(int(rowid), str(text)) for rowid, text in found if _longest(str(text))]
    return sorted(rows)[: _tuning.CHECK_ROWS]


def _longest(text: str) -> str:
    """The row's longest word the engine scores ("" when none): ASCII letters and digits."""
    words = tokens_of(text)
    if words is None:
        words = [w.lower().encode() for w in text.split() if w.isascii() and w.isalnum()]
    return max(words, key=len, default=b"").decode()


def _compare(conn: Connection, vocabulary: Vocabulary, rng: random.Random) -> Verdict:
    rows, tokens = averages(conn)
    sample = _sample(conn, rng) if rows else []
    if not sample:
        return UNCHECKED
    rowids = [rowid for rowid, _ in sample]
    compared = 0
    for q in range(_tuning.CHECK_QUERIES):
        # Every sampled row holds a term of one query (its own longest word): each row is
        # compared at least once.
        own = sample[q :: _tuning.CHECK_QUERIES]
        terms = list(dict.fromkeys(_longest(text) for _, text in own))
        if not terms:
            continue
        match = match_string(terms)
        marks = ",".join("?" * len(rowids))
        fts5 = {
            int(rowid): float(score)
            for rowid, score in conn.execute(
                f"SELECT rowid, bm25(hits) FROM hits WHERE hits MATCH ? AND rowid IN ({marks})",
                (match, *rowids),
            )
        }
        try:
            counts = [vocabulary.count(conn, term) for term in terms]
            ours = Scorer(conn, terms, counts, rows, tokens).score(sorted(fts5))
        except sqlean.Error:
            raise
        except Exception as exc:  # the engine failing on this file is a verdict, not a crash
            return Distrusted(f"scoring {match!r} failed: {exc!r}")
        for rowid in sorted(fts5):
            if ours.get(rowid) != fts5[rowid]:
                return Distrusted(
                    f"row {rowid} for {match!r}: the engine's bm25 is {ours.get(rowid)!r}, "
                    f"fts5's {fts5[rowid]!r}"
                )
        compared += len(fts5)
    return Agrees(rows=compared) if compared else UNCHECKED
