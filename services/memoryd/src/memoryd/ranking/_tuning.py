"""Every knob of the engine, in one place, each with what set it.

All were set on the development VM (2 cores, shared with other work) on the corpus of
`bench/corpus.py`, which `just bench index --records N` writes and indexes (the figures
are in docs/bench-results.md, sections "Recall: ..."). "In-process `rank`" below means
`rank` timed in a Python session on the index such a run left behind (`--cache DIR`):
bench/ has no command for those sweeps, only for the figures through memoryd. Where no
bench set a value, its comment says so: it was chosen when the code was written, and
moving it has not been measured.

The four costs (`WALK_US` … `SCORE_ROW_US`) and `PATTERN_BUDGET_US` are in the same
estimated microseconds: they must be retuned together (docs/decisions.md).

The engine's modules read these as `_tuning.NAME` when they run, so a test can patch one
here for every module at once.
"""

from __future__ import annotations

# -- when the engine runs at all (`_rank`) -------------------------------------------------

OPTIMISE_FROM_ROWS = 20_000
"""Below this many rows recall runs the spec's query as it is. No bench swept it: chosen
with the first plan (6fb37c5, `just bench index --records 1000000` measured that plan,
not the threshold)."""

NAIVE_US = 30_000
"""The spec's query runs as it is when its estimated cost is below this (microseconds).
No bench swept it: chosen with MaxScore (f2d4ec8)."""

# -- the terms' groups (`_maxscore`) -------------------------------------------------------

RARE_SHARE = 0.02
"""A term in at most this share of the rows is rare. In-process `rank` at 10M
(`just bench index --records 10000000`, 60 questions): 0.5% and 1% gave 250/606 and
241/642 ms p50/p99, not better than 2% (docs/bench-results.md, "plans measured and not
chosen")."""

HEAVY_SHARE = 0.2
"""A term in at least this share of the rows is heavy (only bounded, never split on).
In-process `rank` at 10M, as `RARE_SHARE`: 10% gave 247/938 ms and 98% agreement."""

# -- reading a pattern's rows (`_maxscore`) ------------------------------------------------

FIRST_LIMIT = 4096
"""Rows a ranked query keeps before FTS5 is asked for all of them. Profiling at 1M
(1806493, from 256); 512 measured with in-process `rank` and `just bench index --records
1000000,3000000`, and not kept (3e7096d, reverted by 51ff16e: no p99 gain through
memoryd)."""

BATCH = 32
"""Rows scored together (one read of their texts). No bench set it."""

EVAL_ROWS = 20_000
"""A pattern holding more rows (estimated) is split rather than ranked. No bench set it."""

SMALL_ROWS = 500
"""A pattern holding fewer rows (estimated) is read rather than split. No bench set it."""

LIST_ROWS = 2000
"""A listed pattern holding more rows than this is ranked instead. No bench set it; a
listing also stops where ranking would be cheaper (1806493)."""

# -- what things cost, in estimated microseconds (`_maxscore`) -----------------------------

WALK_US = 0.04
"""FTS5 counting a term's rows, per posting. Measured at 10M with `just bench index
--records 10000000` and in-process queries ("what FTS5 costs at 10M rows")."""

LIST_US = 0.1
"""Listing an AND, per posting of its rarest term. Measured as `WALK_US`."""

FTS5_ROW_US = 1.5
"""FTS5 scoring a row with bm25 (0.9 to 1.6 µs). Measured as `WALK_US`."""

SCORE_ROW_US = 12.0
"""`Scorer` scoring a row. Profiling patterns listed in Python at 1M ("plans measured and
not chosen"); 30 measured with in-process `rank` at 1M and 3M and not kept (proven fell
from 95% to 91.7% at 3M, "the terms' best scores")."""

# -- how far one search goes (`_maxscore.Budget`) ------------------------------------------

PATTERN_BUDGET_US = 60_000.0
"""Estimated cost of the queries for rows without a rare term. In-process `rank` at 10M,
60 questions: 40 ms gave 242/836 ms p50/p99 proven for 33%, 60 ms 332/1,060 ms proven for
58%, 150 ms 427/1,099 ms proven for 80%, all 100% agreement ("plans measured and not
chosen"); 60 ms kept, the proof worth more than the p50."""

ROW_BUDGET = 5000
"""Rows `Scorer` scores in one search. No bench set it."""

NODE_BUDGET = 4000
"""Patterns one search considers. No bench set it."""

# -- the term counts (`_vocabulary`) -------------------------------------------------------

KEEP_SHARE = 0.001
"""The counts of terms in at least this share of the rows are kept by the background scan.
No bench set it (4c5ef40): a term below it is walked per query (at 10M, 10,000 postings,
0.4 ms)."""

STALE_SHARE = 0.01
"""Once the index has grown by this share since the scan, the counts are scanned again.
No bench set it (4c5ef40)."""

# -- the scan of the terms' best scores (`_scan`) ------------------------------------------

NICENESS = 10
"""How much lower than memoryd the scan runs. No bench compared nice levels: with the
scan at nice 10 in its own process, `just bench index --records 1000000` kept
memory_block at p50 2.9-3.4 ms (13000e4); a thread at nice 19 changed nothing."""

# -- the self-check at start (`_check`) ----------------------------------------------------

CHECK_ROWS = 40
"""Rows sampled. No bench set it: a few dozen, as issue 32 asks."""

CHECK_QUERIES = 2
"""Queries made of the sampled rows' words (the longest word of each of their share of the
rows). No bench set it: "a couple", as issue 32 asks."""

# -- the context ranking (`_context`) ------------------------------------------------------

CONTEXT_WEIGHT = 0.5
"""The weight of the message a row follows (its `context` column) beside the row's own
words (1.0). Swept in-process on the three development conversations when the ranking
was written (the sweep is not a bench command): 0.3, 0.5, 0.7 and 1.0 gave R@5 0.695,
0.700, 0.684 and 0.684; half was kept as the round value on that plateau, not as its
peak. `just bench recall-quality` shows the ranking without it (weight 0)."""

CANDIDATES = 50
"""How many of FTS5's best rows the session raise ranks again. Chosen when the ranking
was written (not swept): five times recall's largest k."""

SESSION_SHARE = 0.1
"""The share of its session's other candidates' scores a candidate gains. Swept like
`CONTEXT_WEIGHT`: 0.05, 0.1 and 0.2 gave R@10 0.796, 0.804 and 0.794; 0.1 was kept.
`just bench recall-quality` shows the ranking without it (0)."""
