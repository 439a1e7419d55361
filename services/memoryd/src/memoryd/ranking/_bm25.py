"""FTS5's bm25, computed outside FTS5 for chosen rows, to the last bit.

FTS5 scores a row as -1 times the sum, over the query's phrases in order, of
`idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))`, with `f` the phrase's
instances in the row, `D` the row's tokens, `avgdl` the table's tokens over its rows and
`idf = log((N - n + 0.5) / (n + 0.5))`, clamped to 1e-6 when not positive (fts5_aux.c).
`Scorer` does the same operations in the same order on the same doubles, so its scores
are FTS5's, bit for bit (the tests check it), given the row counts `n` of every term.

The instances come from the row's text when its tokens are certain: ASCII text, or text
whose other characters are all separators (punctuation, symbols, spaces), which
unicode61 splits on as `str.isalnum` does on ASCII; the token count must then match
FTS5's own (`_fts5.sized_texts`). Otherwise (a letter with an accent, another script, a
private-use character) FTS5 marks the instances itself: `highlight()`, one query per term.
"""

from __future__ import annotations

import math
import unicodedata

from ._fts5 import Connection, sized_texts

__all__ = ["K1", "B", "Scorer", "idf", "tokens_of"]

K1, B = 1.2, 0.75
"""FTS5's bm25 parameters (fts5_aux.c's defaults: `hits` sets none)."""
MARK = "\ue000"
"""The marker `highlight()` puts before each instance of a term (a private-use character)."""

_SEPARATORS = bytes.maketrans(
    bytes(b for b in range(256) if not chr(b).isascii() or not chr(b).isalnum()),
    b" " * (256 - 62),
)
"""Every byte but an ASCII letter or digit becomes a space (UTF-8 of the rest included)."""


def idf(rows: int, hits: int) -> float:
    """A term's IDF as FTS5's bm25 computes it."""
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


def _uncertain(char: str) -> bool:
    # A letter, digit or mark may be folded (é is "e"); private-use and unassigned
    # characters are token characters or unknown to SQLite's Unicode 6.1 tables.
    return unicodedata.category(char)[0] in "LNM" or unicodedata.category(char) in ("Co", "Cn")


def tokens_of(text: str) -> list[bytes] | None:
    """The row's tokens as unicode61 makes them (UTF-8), when that is certain; or None."""
    if not text.isascii() and any(_uncertain(c) for c in text if not c.isascii()):
        return None
    return text.encode().translate(_SEPARATORS).lower().split()


class Scorer:
    """bm25 of chosen rows for one query: `terms` are lower-case ASCII tokens, in order."""

    def __init__(
        self, conn: Connection, terms: list[str], counts: list[int], rows: int, tokens: int
    ) -> None:
        self.conn = conn
        self.terms = terms
        self._encoded = [term.encode() for term in terms]
        self.idf = [idf(rows, n) for n in counts]
        self.avgdl = tokens / rows
        self.rows_scored = 0
        self.rows_marked = 0
        """Rows whose instances FTS5 had to mark (text of uncertain tokens)."""

    def score(self, rowids: list[int]) -> dict[int, float]:
        """Each row's bm25, as `bm25(hits)` gives it (negative: lower is better)."""
        if not rowids:
            return {}
        freqs: dict[int, list[float]] = {}
        sizes: dict[int, float] = {}
        uncertain: list[int] = []
        for rowid, text, tokens in sized_texts(self.conn, rowids):
            sizes[rowid] = float(tokens)
            words = tokens_of(text)
            if words is None or len(words) != tokens:
                uncertain.append(rowid)
                continue
            freqs[rowid] = [float(words.count(term)) for term in self._encoded]
        if uncertain:
            freqs.update(self._marked(uncertain))
        self.rows_scored += len(freqs)
        return {rowid: self._bm25(f, sizes[rowid]) for rowid, f in freqs.items()}

    def _marked(self, rowids: list[int]) -> dict[int, list[float]]:
        self.rows_marked += len(rowids)
        freqs = {rowid: [0.0] * len(self.terms) for rowid in rowids}
        marks = ",".join("?" * len(rowids))
        for i, term in enumerate(self.terms):
            found = self.conn.execute(
                f"SELECT rowid, text, highlight(hits, 0, ?, '') FROM hits "
                f"WHERE hits MATCH ? AND rowid IN ({marks})",
                (MARK, f'"{term}"', *rowids),
            )
            for rowid, text, marked in found:
                freqs[rowid][i] = float(marked.count(MARK) - text.count(MARK))
        return freqs

    def _bm25(self, freq: list[float], size: float) -> float:
        score = 0.0
        for idf_, f in zip(self.idf, freq, strict=True):
            score += idf_ * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * size / self.avgdl)))
        return -1.0 * score
