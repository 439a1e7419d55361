"""Each frequent term's best score in the index, kept as rows are added (MaxScore's bound).

A term adds `idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))` to a row's bm25,
with `f` its instances in the row and `D` the row's tokens. That grows with `f` and
shrinks with `D`, so over the rows holding a term it is largest at one of the rows no
other row beats on both counts: the term's *frontier*, for each instance count seen the
fewest tokens of a row with that count (a few pairs per term). Kept as pairs rather than
as a score, the bound stays exact whatever `N`, `n` and `avgdl` have become since, and
rows removed later only lower the true best score: the bound stays an upper bound.

`TermBounds` keeps the frontiers of the frequent terms (those `Vocabulary` keeps), read
in one background scan of the index's text (`read_frontiers`), and adds every row
written since (`added`, called by the writer before each commit). A term without a
frontier gets the loose bound, `(k1 + 1) * idf`. Instances come from the row's text when
its tokens are certain (`tokens_of`, and their count equal to FTS5's), otherwise from
FTS5 itself (`_fts5.Tokenizer`: the rows tokenized by a temporary FTS5 table).

The index file holds the spec's schema and nothing else: the frontiers are kept beside it
at a clean stop (`_clean`), and read again only after an unclean one or a rebuild. That
scan costs seconds per million rows, in the background: memoryd runs it in a process of
its own (`_scan`, between `begin_elsewhere` and `install`), since in one of its threads
the scan held the GIL most of the time and slowed every answer.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from ._bm25 import K1, B, tokens_of
from ._fts5 import Connection, Tokenizer, sized_texts, token_counts

__all__ = ["Frontier", "TermBounds", "best_part", "merge", "read_frontiers"]

Frontier = dict[int, int]
"""Instances in a row → the fewest tokens of a row holding the term that many times."""


def best_part(frontier: Frontier, avgdl: float) -> float:
    """The largest `f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))` of the frontier.

    The same operations as FTS5's bm25, so that a row at the frontier scores at most
    this times its term's IDF, to the last bit (callers still add a margin).
    """
    best = 0.0
    for f, size in frontier.items():
        tf = float(f)
        best = max(best, (tf * (K1 + 1.0)) / (tf + K1 * (1 - B + B * float(size) / avgdl)))
    return best


def merge(into: dict[bytes, Frontier], term: bytes, instances: int, size: int) -> None:
    """Add one row holding `term` `instances` times in `size` tokens to `into`."""
    frontier = into.get(term)
    if frontier is None:
        into[term] = {instances: size}
    elif size < frontier.get(instances, size + 1):
        frontier[instances] = size


def _frontiers(
    conn: Connection,
    rows: Iterable[tuple[int, str, int]],
    keep: set[bytes] | None,
    into: dict[bytes, Frontier],
) -> None:
    """Add `(rowid, text, tokens)` rows to `into`, for the terms of `keep` (all if None)."""
    uncertain: list[tuple[int, str]] = []
    sizes: dict[int, int] = {}
    for rowid, text, size in rows:
        words = tokens_of(text)
        if words is None or len(words) != size:
            uncertain.append((rowid, text))
            sizes[rowid] = size
            continue
        counts = Counter(words)
        for term in counts.keys() & keep if keep is not None else counts.keys():
            merge(into, term, counts[term], size)
    if uncertain:
        for rowid, counts in Tokenizer(conn).instances(uncertain).items():
            for term in counts.keys() & keep if keep is not None else counts.keys():
                merge(into, term, counts[term], sizes[rowid])


def read_frontiers(conn: Connection, keep: Iterable[str]) -> dict[bytes, Frontier]:
    """The frontiers of `keep` (the frequent terms) over every row of the index."""
    found: dict[bytes, Frontier] = {}
    _frontiers(conn, sized_texts(conn), {term.encode() for term in keep}, found)
    return found


class TermBounds:
    """The frontiers of the frequent terms, for the live index (see the module doc).

    A scan reads them on another connection (`begin_elsewhere`, `read_frontiers`,
    `install`); `added` folds in rows committed later, also while a scan runs (they go to
    `_pending` as well, since the scan's snapshot may predate them). `clear` forgets
    everything when the index file is replaced.
    """

    def __init__(self) -> None:
        self._frontiers: dict[bytes, Frontier] | None = None
        self._pending: dict[bytes, Frontier] | None = None
        self._generation = 0
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget the frontiers (the index was replaced by a new file)."""
        with self._lock:
            self._frontiers = None
            self._pending = None
            self._generation += 1

    def missing(self) -> bool:
        """Whether no scan has read the current file yet."""
        return self._frontiers is None

    def kept(self) -> dict[bytes, Frontier] | None:
        """Every frontier kept, or None when no scan has read the file (for a clean stop)."""
        return self._frontiers

    def restore(self, frontiers: dict[bytes, Frontier]) -> None:
        """Use frontiers kept at a clean stop of this very file, as if a scan had read them."""
        with self._lock:
            self._frontiers = frontiers
            self._pending = None
            self._generation += 1

    def frontier(self, token: str) -> Frontier | None:
        """The frontier of `token` (a lower-case ASCII token), or None when not kept."""
        frontiers = self._frontiers
        if frontiers is None:
            return None
        return frontiers.get(token.encode())

    def begin_elsewhere(self) -> int:
        """Start a scan that another connection makes; the generation for `install`.

        Call it with no write in flight (holding the writer): every row folded in before
        is committed, so the other connection, opened after this, reads it; every row
        folded in from now on goes to `_pending` as well (reading it too does no harm).
        """
        with self._lock:
            self._pending = {}
            return self._generation

    def install(self, found: dict[bytes, Frontier], generation: int) -> bool:
        """Keep the frontiers a scan begun at `generation` read, with the rows added since.

        False (nothing kept) when the bounds were cleared after it began: it read a file
        that is no longer the index.
        """
        with self._lock:
            if generation != self._generation or self._pending is None:
                return False
            for term, frontier in self._pending.items():
                if term in found:
                    for instances, size in frontier.items():
                        merge(found, term, instances, size)
            self._frontiers = found
            self._pending = None
        return True

    def added(self, conn: Connection, first_rowid: int, texts: list[str]) -> None:
        """Fold in rows being added (`texts` at rowids from `first_rowid`).

        Called inside the writer's transaction, before it commits: a search that can see
        a row must find it in the bounds (a rolled-back row only loosens them). Their
        token counts are FTS5's: `conn` tokenizes the rows whose tokens are not certain.
        A live frontier is replaced, never changed in place: searches read it unlocked.
        """
        if self._frontiers is None and self._pending is None:
            return
        found: dict[bytes, Frontier] = {}
        _frontiers(conn, _sized(conn, first_rowid, texts), None, found)
        with self._lock:
            for target in (self._frontiers, self._pending):
                if target is None:
                    continue
                for term, frontier in found.items():
                    if target is self._frontiers and term not in target:
                        continue  # not a frequent term: the loose bound holds for it
                    if term in target:
                        target[term] = dict(target[term])
                    for instances, size in frontier.items():
                        merge(target, term, instances, size)


def _sized(conn: Connection, first_rowid: int, texts: list[str]) -> list[tuple[int, str, int]]:
    """The rows with FTS5's token counts."""
    sizes = token_counts(conn, list(range(first_rowid, first_rowid + len(texts))))
    return [(rowid, texts[rowid - first_rowid], size) for rowid, size in sorted(sizes.items())]
