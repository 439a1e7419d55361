"""memoryd's recall rankings: the context ranking (the default), and the spec's bm25.

`rank_context` (`_context`) ranks by stems, the message a reply follows, the query's
content words (`_words`) and the hits of one session together: one FTS5 query and a
re-ranking of its best rows, with nothing kept beside the index.

`rank` is the spec's ranking's one entry point: it answers as the spec's query would
(`naive`), by that query itself or by a branch and bound over FTS5 queries (`_maxscore`)
that needs what FTS5 knows about the index (`Vocabulary`, `TermBounds`, read in the
background; the frontiers by `scan_elsewhere`, in a process of its own). `self_check` compares the
engine with FTS5's `bm25()` once at start; `rank` serves the spec's query when it is
`Distrusted`.

Inside, `_fts5` is the only module that reads FTS5's private tables (a test holds the
rest of memoryd to that); the index's forget, which needs FTS5's stored text and
settings but no ranking, reads them through `stored`, not through here. The knobs are
in `_tuning`, each with the bench that set it. The rest of memoryd imports from here
(and `stored`) only, never a `_module` of it.
"""

from ._bounds import Frontier, TermBounds
from ._check import Agrees, Distrusted, Unchecked, Verdict, self_check
from ._context import Ranked, rank_context
from ._fts5 import TESTED_SQLITE, averages, prepare
from ._query import query_terms
from ._rank import Found, Ranking, fetch, rank
from ._scan import ScanFailed, scan_elsewhere
from ._tuning import OPTIMISE_FROM_ROWS
from ._vocabulary import Vocabulary
from ._words import LANGUAGES, content_terms, function_words

__all__ = [
    "LANGUAGES",
    "OPTIMISE_FROM_ROWS",
    "TESTED_SQLITE",
    "Agrees",
    "Distrusted",
    "Found",
    "Frontier",
    "Ranked",
    "Ranking",
    "ScanFailed",
    "TermBounds",
    "Unchecked",
    "Verdict",
    "Vocabulary",
    "averages",
    "content_terms",
    "fetch",
    "function_words",
    "prepare",
    "query_terms",
    "rank",
    "rank_context",
    "scan_elsewhere",
    "self_check",
]
