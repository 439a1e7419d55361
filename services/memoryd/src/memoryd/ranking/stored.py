"""FTS5's stored text and settings, for memoryd beyond the recall engine (the index's forget).

Not the engine's front door (`memoryd.ranking`): nothing here ranks, and nothing the
engine needs is here. The reads themselves are `_fts5`'s, the one module that reads
FTS5's private tables; this module only hands the two a forget needs to the rest of
memoryd: one scan of every row's stored text (`texts_where`), and whether FTS5's
`secure-delete` is set (`secure_fts`).
"""

from ._fts5 import secure_fts, texts_where

__all__ = ["secure_fts", "texts_where"]
