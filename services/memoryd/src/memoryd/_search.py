"""Ranking recall's hits, blocking: the spec's bm25 query, and ways around its cost.

The spec's query ranks every row that holds any query term by `bm25(hits)`. Its cost
grows with the rows the terms touch, so a question full of common words ("what did we
say about the …") is what makes it slow. Three facts about FTS5's bm25 make it cheaper;
the first two never change its answer, the third is a bet the benchmark measures:

1. A term in half the rows or more has its IDF clamped to 1e-6: it cannot lift a row
   that matches another term past one that does not, so it leaves the MATCH ("common").
   What it still decides is the order of rows whose other scores tie; when such a tie
   straddles the k-th place, the tied rows are scored again in full (`_rescore`).
   When fewer than k rows hold any other term, the rows holding only common words fill
   the answer, and only the spec's query itself finds them.
2. A row's score is a sum over the query's phrases, and a phrase that a row lacks adds
   nothing. So `(S) AND (O)` plus `(S) NOT (O)` scores every row holding a term of S
   exactly as the whole query would, while bm25 only runs for those rows: S are the
   *selective* terms (in at most `SELECTIVE_SHARE` of the rows), O the others.
3. A row holding none of S scores at most Σ 2.2·idf over O. When that is below the k-th
   score found, the answer is provably the naive one (`Ranking.exact`). When it is not,
   the rows holding only mid-frequency words are left out all the same: they rarely
   reach the top k, and scoring them is exactly the cost avoided.

How many rows hold a term comes from fts5vocab, through `Vocabulary`. Below
`OPTIMISE_FROM_ROWS` rows the naive query runs as it is.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from proto import HitSource

from ._query import match_string

__all__ = [
    "OPTIMISE_FROM_ROWS",
    "SELECTIVE_SHARE",
    "Found",
    "Ranking",
    "Vocabulary",
    "averages",
    "fetch",
    "naive",
    "rank",
]

Connection = Any

OPTIMISE_FROM_ROWS = 20_000
SELECTIVE_SHARE = 0.05
EXTRA_ROWS = 10
"""Rows fetched past k, to see ties at the boundary and to merge two rankings."""

K1, B = 1.2, 0.75  # FTS5's bm25 constants
MARK = "\ue000"
"""The marker `highlight()` puts before each instance of a term (a private-use character)."""

_TOP = "SELECT rowid, bm25(hits) FROM hits WHERE hits MATCH ? ORDER BY bm25(hits) LIMIT ?"


@dataclasses.dataclass(frozen=True)
class Ranking:
    """The best rows, best first: `(rowid, bm25)` pairs (a lower bm25 is better)."""

    rows: list[tuple[int, float]]
    plan: str
    exact: bool
    marked: list[str] = dataclasses.field(default_factory=list)
    """The terms a snippet is centred on: the rarest ones the ranking used."""
    indexed: int = 0
    """The rows in the index when it was ranked."""


@dataclasses.dataclass(frozen=True)
class Found:
    """A winning row: its text and where it came from."""

    rowid: int
    text: str
    source: HitSource


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = 0
    for j in range(8):
        byte = data[i + j]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, i + j + 1
    return (value << 8) | data[i + 8], i + 9


def averages(conn: Connection) -> tuple[int, int]:
    """FTS5's own totals, as bm25 sees them: rows, and tokens in all rows."""
    row = conn.execute("SELECT block FROM hits_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    rows, i = _varint(row[0], 0)
    tokens, _ = _varint(row[0], i) if i < len(row[0]) else (0, i)
    return rows, tokens


def doc_size(conn: Connection, rowids: list[int]) -> dict[int, int]:
    """The token count of each row, from FTS5's `hits_docsize`."""
    marks = ",".join("?" * len(rowids))
    found = conn.execute(f"SELECT id, sz FROM hits_docsize WHERE id IN ({marks})", rowids)
    return {rowid: _varint(size, 0)[0] for rowid, size in found}


class Vocabulary:
    """How many rows hold a term, without walking its postings on every query.

    fts5vocab counts a term by walking its postings: a word in most rows costs
    milliseconds. So the counts of every term in at least `FLOOR` of the rows are read in
    one scan (`scan`, in the background) and kept. While the index has grown by at most
    `FLOOR` of its rows since, a kept count is short by at most that growth, and a term
    not kept is still in fewer than 2% of the rows: `count` answers with bounds and
    never touches the index. A stale or missing snapshot falls back to a walk per term.
    """

    FLOOR = 0.01

    def __init__(self) -> None:
        self._snapshot: tuple[dict[str, int], int] | None = None

    def clear(self) -> None:
        """Forget the snapshot (the index was rebuilt, or rows were removed)."""
        self._snapshot = None

    def stale(self, rows: int) -> bool:
        """Whether the snapshot is missing or too old for an index of `rows` rows."""
        snapshot = self._snapshot
        return snapshot is None or not 0 <= rows - snapshot[1] <= self.FLOOR * snapshot[1]

    def scan(self, conn: Connection) -> None:
        """Read the counts of the frequent terms, in one read transaction."""
        conn.execute("BEGIN")
        try:
            rows, _ = averages(conn)
            floor = max(1, math.ceil(self.FLOOR * rows))
            frequent = conn.execute(
                "SELECT term, doc FROM temp.hits_vocab WHERE doc >= ?", (floor,)
            )
            counts = {str(term): int(doc) for term, doc in frequent}
        finally:
            conn.execute("COMMIT")
        self._snapshot = (counts, rows)

    def count(self, conn: Connection, term: str, rows: int) -> tuple[int, int] | None:
        """Bounds (low, high) on the rows holding `term`; None when its token is not known.

        Only ASCII terms are counted: unicode61 lower-cases them and nothing else, so the
        term is its own token. Other scripts are folded in ways best left to FTS5.
        """
        token = term.lower()
        if not (token.isascii() and token.isalnum()):
            return None
        snapshot = self._snapshot
        if snapshot is not None:
            counts, at = snapshot
            grown = rows - at
            if 0 <= grown <= self.FLOOR * at:
                known = counts.get(token)
                if known is None:
                    return 0, max(0, math.ceil(self.FLOOR * at) - 1) + grown
                return known, known + grown
        exact = walk_count(conn, token)
        return exact, exact


def walk_count(conn: Connection, token: str) -> int:
    """The rows holding `token`, counted from its postings (fts5vocab)."""
    row = conn.execute("SELECT doc FROM temp.hits_vocab WHERE term = ?", (token,)).fetchone()
    return int(row[0]) if row else 0


def prepare(conn: Connection) -> None:
    """Make `temp.hits_vocab` (fts5vocab) on a reading connection."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.hits_vocab USING fts5vocab(main, hits, 'row')"
    )


def _top(conn: Connection, match: str, limit: int) -> list[tuple[int, float]]:
    return [(int(r), float(s)) for r, s in conn.execute(_TOP, (match, limit))]


def naive(conn: Connection, terms: list[str], k: int) -> list[tuple[int, float]]:
    """The spec's query as it is: every term, ranked by bm25 (the benchmark's baseline)."""
    return _top(conn, match_string(terms), k) if terms else []


def _idf(rows: int, hits: int) -> float:
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0.0 else 1e-6


def rank(conn: Connection, terms: list[str], k: int, vocabulary: Vocabulary) -> Ranking:
    """The k best rows for `terms`, as the spec's query ranks them (see the module doc).

    Runs inside the caller's read transaction, so every count is of one snapshot.
    """
    rows, tokens = averages(conn)
    if not terms or rows == 0:
        return Ranking([], "empty", exact=True, marked=terms, indexed=rows)
    if rows < OPTIMISE_FROM_ROWS:
        return Ranking(naive(conn, terms, k), "naive", exact=True, marked=terms, indexed=rows)
    counts = {t: vocabulary.count(conn, t, rows) for t in terms}
    common = []
    for term, count in counts.items():
        if count is not None and 2 * count[0] < rows <= 2 * count[1]:
            count = counts[term] = (n := walk_count(conn, term.lower()), n)  # too close to call
        if count is not None and 2 * count[0] >= rows:
            common.append(term)
    kept = [t for t in terms if t not in common]
    if not kept:
        return Ranking(naive(conn, terms, k), "naive", exact=True, marked=terms, indexed=rows)
    selective = [t for t in kept if (c := counts[t]) is None or c[1] <= SELECTIVE_SHARE * rows]
    others = [t for t in kept if t not in selective]
    limit = k + EXTRA_ROWS if common else k  # past k only to see ties the common words break
    ranked: list[tuple[int, float]] = []
    exact = True
    plan = "without common words"
    if selective and others:
        s, o = match_string(selective), match_string(others)
        both = _top(conn, f"({s}) AND ({o})", limit) + _top(conn, f"({s}) NOT ({o})", limit)
        ranked = sorted(both, key=lambda r: (r[1], r[0]))[:limit]
        plan = "selective terms first"
        if len(ranked) >= k:
            bound = sum(2.2 * _idf(rows, (counts[t] or (0, 0))[0]) for t in others)
            exact = bound + 2.2e-6 * len(common) < -ranked[k - 1][1]
    else:
        ranked = _top(conn, match_string(kept), limit)
    if len(ranked) < k and selective and others:
        ranked, plan, exact = _top(conn, match_string(kept), limit), "without common words", True
    if len(ranked) < k and common:
        # Fewer than k rows hold another term: rows holding only common words come next
        # (they still match the spec's query), and only the spec's query finds them.
        return Ranking(naive(conn, terms, k), "naive", exact=True, marked=terms, indexed=rows)
    if common and _tied_at(ranked, k, 2.2e-6 * len(common)):
        rescored = _rescore(conn, ranked, terms, rows, tokens)
        if rescored is not None:
            ranked, plan = rescored, plan + ", ties rescored"
    return Ranking(ranked[:k], plan, exact, marked=selective or kept, indexed=rows)


def _tied_at(ranked: list[tuple[int, float]], k: int, gap: float) -> bool:
    if len(ranked) <= k:
        return False
    kth, next_ = ranked[k - 1][1], ranked[k][1]
    return next_ - kth <= gap + 1e-9 * abs(kth)


def _rescore(
    conn: Connection, ranked: list[tuple[int, float]], terms: list[str], rows: int, tokens: int
) -> list[tuple[int, float]] | None:
    """`ranked` scored with every term, exactly as FTS5's bm25 does; None if it cannot be.

    Term frequencies come from `highlight()` (one marker per instance of a one-token
    term), row lengths from `hits_docsize`, document counts fresh from fts5vocab.
    """
    tokens_ = [t.lower() for t in terms]
    if not all(t.isascii() and t.isalnum() for t in tokens_):
        return None  # a term of another script may be several tokens: leave the order be
    hits = [walk_count(conn, t) for t in tokens_]
    ids = [rowid for rowid, _ in ranked]
    sizes = doc_size(conn, ids)
    marks = ",".join("?" * len(ids))
    freq: dict[int, list[float]] = {rowid: [0.0] * len(terms) for rowid in ids}
    for i, term in enumerate(terms):
        found = conn.execute(
            f"SELECT rowid, text, highlight(hits, 0, ?, '') FROM hits "
            f"WHERE hits MATCH ? AND rowid IN ({marks})",
            (MARK, match_string([term]), *ids),
        )
        for rowid, text, marked in found:
            freq[rowid][i] = float(marked.count(MARK) - text.count(MARK))
    avgdl = tokens / rows
    idf = [_idf(rows, h) for h in hits]
    scored = []
    for rowid in ids:
        size, score = float(sizes.get(rowid, 0)), 0.0
        for i, f in enumerate(freq[rowid]):
            score += idf[i] * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * size / avgdl)))
        scored.append((rowid, -1.0 * score))
    return sorted(scored, key=lambda r: (r[1], r[0]))


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
