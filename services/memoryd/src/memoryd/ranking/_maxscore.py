"""The spec's bm25 top k, found by a branch and bound over FTS5 queries (MaxScore).

The spec's query ranks every row holding any query term by `bm25(hits)`: FTS5 scores
each such row (a microsecond or two) and, per term, walks the term's postings once more
to count its rows. A question full of common words touches most of the index, and FTS5
has no early stop. `MaxScore` finds the same top k, as MaxScore engines do, from three
facts:

1. bm25 is a sum over the query's terms, and a term adds less than `(k1 + 1) * idf`,
   and at most its best score in the index when that is known (`_bounds`): the term's
   *bound*; a term in half the rows or more has its IDF clamped to 1e-6.
2. FTS5 scores a query's own phrases exactly as the whole query would, and a term a row
   lacks adds nothing: `(R) AND (M)` gives the rows holding terms of R and of M their
   exact sum over R and M, and bm25 runs for those rows only.
3. `Scorer` computes any chosen row's full bm25 bit for bit as FTS5 does.

The terms fall into four groups by the share of rows holding them (the shares are in
`_tuning`): rare (R, at most `RARE_SHARE`; the rarest term when none is), heavy (H, at
least `HEAVY_SHARE`: too costly to walk twice), common (C, half the rows or more) and
the middle (M). Every row lies in one of three regions, and each region is read in
decreasing order of an upper bound on its rows' scores; rows are scored exactly until
the bound falls below the k-th best score found (the *threshold*):

- rows with a term of R and one of M: one query, `(R) AND (M)`; a row scores at most
  its bm25 there plus the bounds of H and C;
- rows with a term of R and none of M, and rows with no term of R: *patterns*. A
  pattern is a set of terms a row must hold, the terms before them (in decreasing
  bound) it must not hold, and the terms after them, undecided; its rows score at most
  their bm25 over the pattern plus the bounds of the undecided terms (and of H and C,
  for the first region). A pattern that cannot reach the threshold is dropped, one that
  would read too many rows is split in two on its next undecided term, and the others
  are read, by FTS5's ranking or (when its walks would cost more) by listing the rows
  and scoring them all.

Patterns of middle terms can cost more at ten million rows than the whole answer is
worth. Past `Budget.patterns` of estimated work on rows without a rare term (and past
`Budget.rows` rows scored) the search stops and says so (`exact` false): the answer is
then the best of the rows seen, which the benchmark compares with the spec's query.
"""

from __future__ import annotations

import dataclasses
import heapq
import math

from . import _tuning
from ._bm25 import K1, Scorer
from ._fts5 import Connection
from ._query import RANKED, match_string

__all__ = ["Budget", "MaxScore"]

SLACK = 1e-9
"""Relative margin on every bound: FTS5 sums a query's phrases in its own order (a margin
for rounding, not a knob)."""

_LISTED = "SELECT rowid FROM hits WHERE hits MATCH ? LIMIT ?"


@dataclasses.dataclass(frozen=True)
class Budget:
    """How far one search may go before it settles for the best rows seen (see `_tuning`)."""

    patterns: float = _tuning.PATTERN_BUDGET_US
    """Estimated cost of the queries for rows without a rare term, in microseconds."""
    rows: int = _tuning.ROW_BUDGET
    """Rows scored by `Scorer`."""
    nodes: int = _tuning.NODE_BUDGET
    """Patterns considered."""


class MaxScore:
    """One query's branch and bound: the terms' groups, the rows scored, the threshold."""

    def __init__(
        self,
        conn: Connection,
        scorer: Scorer,
        counts: list[int],
        rows: int,
        k: int,
        budget: Budget,
        best_parts: list[float | None] | None = None,
    ) -> None:
        self.conn = conn
        self.scorer = scorer
        self.terms = scorer.terms
        self.counts = counts
        self.k = k
        self.budget = budget
        parts = best_parts or [None] * len(self.terms)
        self.bound = [
            x * (K1 + 1.0 if part is None else part) * (1 + SLACK)
            for x, part in zip(scorer.idf, parts, strict=True)
        ]
        self.exact = True
        self.scored: dict[int, float] = {}
        self._best: list[float] = []  # a min-heap of the k best scores, positive
        n = range(len(self.terms))
        self.common = [i for i in n if 2 * counts[i] >= rows]
        self.live = [i for i in n if counts[i] > 0 and 2 * counts[i] < rows]
        self.rare = [i for i in self.live if counts[i] <= _tuning.RARE_SHARE * rows]
        if not self.rare and self.live:
            self.rare = [min(self.live, key=lambda i: (counts[i], i))]
        self.heavy = [
            i for i in self.live if counts[i] >= _tuning.HEAVY_SHARE * rows and i not in self.rare
        ]
        self.middle = [i for i in self.live if i not in self.rare and i not in self.heavy]
        self.share = [c / rows for c in counts]
        self.rows = rows
        self._only_common = False

    def naive_cost(self) -> float:
        """The spec's query's estimated cost, in microseconds.

        FTS5 walks every term's postings and scores every row holding one.
        """
        holding = min(self.rows, sum(self.counts))
        return sum(self.counts) * _tuning.WALK_US + holding * _tuning.FTS5_ROW_US

    def plan(self) -> str:
        """A name for what the search did, for the benchmark's tally."""
        return "pruned" if self.exact else "pruned, budget spent"

    def _sum(self, terms: list[int] | tuple[int, ...]) -> float:
        return sum(self.bound[i] for i in terms)

    def threshold(self) -> float:
        """The k-th best score found (positive), or -inf before k rows are scored."""
        return self._best[0] if len(self._best) >= self.k else -math.inf

    def _below(self, bound: float) -> bool:
        return bound * (1 + SLACK) < self.threshold()

    def offer(self, rowids: list[int]) -> bool:
        """Score the rows not scored yet; False once the row budget is spent.

        The budget only counts once k rows are scored: the answer has k rows when the
        index has them.
        """
        new = [r for r in rowids if r not in self.scored]
        for rowid, bm25 in self.scorer.score(new).items():
            score = -bm25
            self.scored[rowid] = bm25
            if len(self._best) < self.k:
                heapq.heappush(self._best, score)
            elif score > self._best[0]:
                heapq.heapreplace(self._best, score)
        if self.scorer.rows_scored >= self.budget.rows and len(self._best) >= self.k:
            self.exact = False
            return False
        return True

    def ranked(self, match: str, slack: float) -> bool:
        """Score the rows `match` finds, best first, while their bm25 plus `slack` can win.

        False once the row budget is spent.
        """
        for limit in (_tuning.FIRST_LIMIT, -1):
            seen = 0
            batch: list[int] = []
            for rowid, bm25 in self.conn.execute(RANKED, (match, limit)):
                seen += 1
                if self._below(-bm25 + slack):
                    return self.offer(batch)
                if rowid not in self.scored:
                    batch.append(rowid)
                if len(batch) >= _tuning.BATCH or len(self._best) < self.k:
                    if not self.offer(batch):
                        return False
                    batch = []
            if not self.offer(batch):
                return False
            if limit < 0 or seen < limit:
                break
        return True

    def listed(self, match: str, ranking_us: float) -> bool | None:
        """Score every row `match` finds, unless ranking them would be cheaper.

        The estimate that chose listing assumed the terms independent; rows holding
        several query words are more often long ones, so the count is checked. None when
        ranking is the cheaper after all (`ranking_us` is its cost less the scoring of
        rows); False once the row budget is spent.
        """
        # Past `most` rows ranking is the cheaper: the listing stops there, not at
        # `LIST_ROWS` (reading rows it would not use cost as much as a small pattern).
        per_row = _tuning.SCORE_ROW_US - _tuning.FTS5_ROW_US
        most = (
            _tuning.LIST_ROWS if per_row <= 0 else min(_tuning.LIST_ROWS, int(ranking_us / per_row))
        )
        found = [r for (r,) in self.conn.execute(_LISTED, (match, most + 1))]
        if len(found) > most:
            return None
        return all(
            self.offer(found[i : i + _tuning.BATCH]) for i in range(0, len(found), _tuning.BATCH)
        )

    def run(self) -> list[tuple[int, float]] | None:
        """The k best rows, or None when only the spec's query can tell (see `_patterns`)."""
        slack = self._sum(self.heavy) + self._sum(self.common)
        rare = [self.terms[i] for i in self.rare]
        if self.middle and not self.ranked(
            f"({match_string(rare)}) AND ({match_string([self.terms[i] for i in self.middle])})",
            slack,
        ):
            return self.answer()
        # Rows with a rare term and no middle one: patterns of rare terms, cheap to rank.
        if not self._patterns(self._by_bound(self.rare), slack, others=False):
            return self.answer()
        # Rows without a rare term: patterns of the middle terms (then the heavy ones).
        order = self._by_bound(self.middle) + self._by_bound(self.heavy)
        if not self._patterns(order, self._sum(self.common), others=True):
            return None if self._only_common else self.answer()
        return self.answer()

    def _by_bound(self, terms: list[int]) -> list[int]:
        return sorted(terms, key=lambda i: (-self.bound[i], i))

    def _patterns(self, order: list[int], slack: float, *, others: bool) -> bool:
        """Rank the rows holding each pattern of `order` that can reach the threshold.

        A pattern is a set of terms a row must hold, and the terms of `order` before the
        last one added that it must not hold (rows holding those are another pattern's);
        a pattern's rows score at most their bm25 over the pattern plus the bounds of the
        terms after it (`undecided`) plus `slack`. Patterns are tried rarest first, the
        one with more terms first, so that the threshold rises early.

        Returns False when the search must stop: the row budget is spent, or (`others`)
        rows holding only common words might belong in the answer (`_only_common`).
        Past the pattern budget (`others` only) the remaining patterns are left out.
        """
        undecided = [self._sum(order[j:]) for j in range(len(order) + 1)]
        stack: list[tuple[tuple[int, ...], int]] = [((), 0)]
        spent = 0.0
        nodes = 0
        while stack:
            pattern, j = stack.pop()
            own = self._sum(pattern)
            if self._below(own + undecided[j] + slack):
                continue
            nodes += 1
            if others and nodes > self.budget.nodes and len(self._best) >= self.k:
                self.exact = False
                return True
            if not pattern and j == len(order):
                # Rows holding none of `order`: for the rare terms, those are the other
                # patterns' rows; for the others, rows with only common words.
                self._only_common = others and bool(self.common)
                return not self._only_common
            rows = self.rows * math.prod(self.share[i] for i in pattern)
            # Split while the pattern's rows are too many to read, or while the undecided
            # terms' bounds would lift a row of typical bm25 (a tf part of about 1) over
            # the threshold: ranking the pattern would then score most of its rows. A
            # heavy term is only split on to reach rows without a middle term.
            typical = sum(self.scorer.idf[i] for i in pattern)
            loose = undecided[j] + slack > self.threshold() - typical
            split = not pattern or (
                rows > _tuning.SMALL_ROWS and (rows > _tuning.EVAL_ROWS or loose)
            )
            # Always split when the rows without the next term cannot win: only the
            # (fewer) rows with it are left to read.
            split = split or self._below(own + undecided[min(j + 1, len(order))] + slack)
            if j < len(order) and split and (not pattern or order[j] not in self.heavy):
                stack.append((pattern, j + 1))
                stack.append(((*pattern, order[j]), j + 1))
                continue
            # The cheaper way to read the pattern's rows, in estimated microseconds:
            # FTS5 ranks them (it walks every term's postings to count them, then scores
            # each row), or lists them without bm25 (a walk of the rarest term) and every
            # row is scored here.
            walks = sum(self.counts[i] for i in pattern) * _tuning.WALK_US
            ranking = walks + rows * _tuning.FTS5_ROW_US
            listing = (
                min(self.counts[i] for i in pattern) * _tuning.LIST_US + rows * _tuning.SCORE_ROW_US
            )
            cost = min(ranking, listing)
            if others and spent + cost > self.budget.patterns and len(self._best) >= self.k:
                self.exact = False
                continue
            spent += cost
            match = " AND ".join(f'"{self.terms[i]}"' for i in pattern)
            done = self.listed(match, walks) if listing < ranking else None
            if done is None:
                done = self.ranked(match, undecided[j] + slack)
            if not done:
                return False
        return True

    def answer(self) -> list[tuple[int, float]]:
        """The k best rows scored, best first; ties in rowid order, as FTS5 returns them."""
        best = sorted(self.scored.items(), key=lambda r: (r[1], r[0]))[: self.k]
        return [(rowid, bm25) for rowid, bm25 in best]
