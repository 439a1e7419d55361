"""The context ranking: recall's default, built to find the turn that holds the answer.

The spec's ranking (every word of the query, OR'ed, bm25 over each row's own text) is
exact but finds what was meant less than half the time on a public benchmark of long
conversations (docs/bench-results.md, "Recall quality"). This ranking changes four
things, each measured there:

- **Stems.** The index is tokenized `porter unicode61`: "books" finds "book", "reading"
  finds "read". Porter's rules are English; a word of another language is cut by them
  the same way in the query and in the rows, so it still finds itself.
- **The turn a reply answers.** Each owner or assistant row is indexed with the text of
  the message before it in the session (the `context` column), at half the weight of its
  own words: "Yes, I went last Saturday!" is found by the question it answers, and a
  row's own words still lead.
- **No function words.** The query leaves out the function words of the owner's
  languages (`_words`).
- **Hits of one session raise each other.** The best `CANDIDATES` rows are ranked again:
  each gains `SESSION_SHARE` of the scores of the other candidates of its session, so a
  conversation that holds several of the query's words across turns comes first.

The query reaching FTS5 is still a list of quoted strings joined by OR (`match_string`):
nothing the model writes is an operator. The table's schema is the index's
(`memoryd._store.CONTEXT_HITS`).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from . import _tuning
from ._fts5 import IN_ROWS, Connection
from ._query import match_string
from ._words import content_terms

__all__ = ["Ranked", "rank_context"]

_RANKED = (
    "SELECT rowid, bm25(hits, 1.0, {w}) FROM hits WHERE hits MATCH ? "
    "ORDER BY bm25(hits, 1.0, {w}) LIMIT ?"
)


@dataclasses.dataclass(frozen=True)
class Ranked:
    """The k best rows, best first, and the terms searched (the query's content words).

    Rows are `(rowid, score)`, a lower score better, as the spec's ranking gives them.
    """

    rows: list[tuple[int, float]]
    terms: list[str]


def rank_context(
    conn: Connection, terms: list[str], k: int, function_words: frozenset[str]
) -> Ranked:
    """The k best rows for `terms` by the context ranking (see the module doc).

    Runs inside the caller's read transaction.
    """
    searched = content_terms(terms, function_words)
    if not searched or k <= 0:
        return Ranked([], searched)
    query = _RANKED.format(w=_tuning.CONTEXT_WEIGHT)
    found = [
        (int(rowid), -float(score))
        for rowid, score in conn.execute(
            query, (match_string(searched), max(k, _tuning.CANDIDATES))
        )
    ]
    scores = _raise_by_session(conn, found)
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
    return Ranked([(rowid, -score) for rowid, score in best], searched)


def _raise_by_session(conn: Connection, found: list[tuple[int, float]]) -> dict[int, float]:
    """Each candidate's score plus `SESSION_SHARE` of its session's other candidates'."""
    sessions = _sessions(conn, [rowid for rowid, _ in found])
    totals: dict[str, float] = defaultdict(float)
    for rowid, score in found:
        if (session := sessions.get(rowid)) is not None:
            totals[session] += score
    share = _tuning.SESSION_SHARE
    return {
        rowid: score
        + (share * (totals[session] - score) if (session := sessions.get(rowid)) else 0.0)
        for rowid, score in found
    }


def _sessions(conn: Connection, rowids: list[int]) -> dict[int, str]:
    """The session of each of `rowids` that came from a session log (archive rows: none)."""
    sessions: dict[int, str] = {}
    for start in range(0, len(rowids), IN_ROWS):
        part = rowids[start : start + IN_ROWS]
        marks = ",".join("?" * len(part))
        sessions.update(
            (int(rowid), str(session))
            for rowid, session in conn.execute(
                f"SELECT rowid, session FROM sources WHERE kind = 'session' AND rowid IN ({marks})",
                part,
            )
        )
    return sessions
