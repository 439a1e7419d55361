"""FTS5's private tables, read here and nowhere else in memoryd (a test holds every module to it).

The engine needs what FTS5 keeps but does not offer through SQL: the table's totals (the
"averages" record, id 1 of `hits_data`: rows, then tokens in all rows, as SQLite
varints), each row's token count (`hits_docsize`, a varint), the stored text beside it
(`hits_content.c0`), and the rows holding a term (fts5vocab, which is public but walks
postings). That layout is FTS5's own, not an interface: it is pinned to the SQLite
versions the engine was tested on (`TESTED_SQLITE`), and memoryd's start compares the
engine's scores with `bm25()` (`_check`) before trusting it.

Others that need FTS5's stored text or configuration (a forget's scan of the rows, its
`secure-delete` setting) read them through the functions here, which `stored` hands to
them (not the engine's front door).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import sqlean

__all__ = [
    "TESTED_SQLITE",
    "Connection",
    "Tokenizer",
    "averages",
    "frequent_terms",
    "prepare",
    "secure_fts",
    "sized_texts",
    "texts_where",
    "token_counts",
    "walk_count",
]

Connection = Any
"""A `sqlean.Connection` (sqlean ships no type information)."""

TESTED_SQLITE = frozenset({"3.50.4"})
"""The SQLite versions (`sqlean.sqlite_version`) whose FTS5 layout the engine was tested on:
sqlean.py 3.50.4.5, pinned in memoryd's pyproject. Another version serves the spec's query
(`_check`) until its tests pass on it and it is added here."""

IN_ROWS = 500
"""Rowids per `IN (...)` list (well under SQLite's limit on bound variables)."""


def _varint(data: bytes, i: int) -> tuple[int, int]:
    """SQLite's varint at `data[i:]`: its value and the offset after it."""
    value = 0
    for j in range(8):
        byte = data[i + j]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, i + j + 1
    return (value << 8) | data[i + 8], i + 9


def _size(blob: bytes) -> int:
    """A row's token count, from its `hits_docsize.sz` (one varint: the table has one column)."""
    try:
        return _varint(blob, 0)[0]
    except IndexError as exc:
        raise sqlean.DatabaseError(f"fts5's token count {blob!r} is cut short") from exc


def averages(conn: Connection) -> tuple[int, int]:
    """FTS5's own totals, as bm25 sees them: rows, and tokens in all rows."""
    row = conn.execute("SELECT block FROM hits_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0
    block = bytes(row[0])
    try:
        rows, i = _varint(block, 0)
        tokens, _ = _varint(block, i) if i < len(block) else (0, i)
    except IndexError as exc:
        raise sqlean.DatabaseError(f"fts5's averages record {block!r} is cut short") from exc
    return rows, tokens


def token_counts(conn: Connection, rowids: list[int]) -> dict[int, int]:
    """Each row's token count as FTS5 keeps it (rows not in the index are left out)."""
    counts: dict[int, int] = {}
    for start in range(0, len(rowids), IN_ROWS):
        part = rowids[start : start + IN_ROWS]
        marks = ",".join("?" * len(part))
        found = conn.execute(f"SELECT id, sz FROM hits_docsize WHERE id IN ({marks})", part)
        counts.update((int(rowid), _size(size)) for rowid, size in found)
    return counts


def sized_texts(
    conn: Connection, rowids: list[int] | None = None
) -> Iterator[tuple[int, str, int]]:
    """`(rowid, text, tokens)` of the rows `rowids` (in no order), or of every row when None.

    The text as stored (never None: a NULL is read as ""), the tokens as FTS5 counted them.
    """
    join = "SELECT c.id, c.c0, d.sz FROM hits_content c JOIN hits_docsize d ON d.id = c.id"
    if rowids is None:
        found = conn.execute(join)
    else:
        found = conn.execute(f"{join} WHERE c.id IN ({','.join('?' * len(rowids))})", rowids)
    return ((int(rowid), text or "", _size(size)) for rowid, text, size in found)


def texts_where(
    conn: Connection, holds: Callable[[object], bool]
) -> list[tuple[int, tuple[str, ...]]]:
    """Every row with a stored column `holds` accepts, with all its columns' texts.

    The columns are `text`, then `context` where the table has it (a NULL read as ""):
    one scan of the stored texts.
    """
    conn.create_function("fts5_text_holds", 1, holds, deterministic=True)
    columns = [
        str(row[1])
        for row in conn.execute("PRAGMA table_info(hits_content)")
        if str(row[1]).startswith("c")
    ]
    where = " OR ".join(f"fts5_text_holds({column})" for column in columns)
    found = conn.execute(f"SELECT id, {', '.join(columns)} FROM hits_content WHERE {where}")
    return [(int(rowid), tuple(str(t or "") for t in texts)) for rowid, *texts in found]


def secure_fts(conn: Connection) -> bool:
    """Whether FTS5's `secure-delete` is set on `hits` (not in an index built before it)."""
    row = conn.execute("SELECT v FROM hits_config WHERE k = 'secure-delete'").fetchone()
    return row is not None and bool(row[0])


def prepare(conn: Connection) -> None:
    """Make `temp.hits_vocab` (fts5vocab) on a reading connection."""
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.hits_vocab USING fts5vocab(main, hits, 'row')"
    )


def walk_count(conn: Connection, token: str) -> int:
    """The rows holding `token`, counted from its postings (fts5vocab)."""
    row = conn.execute("SELECT doc FROM temp.hits_vocab WHERE term = ?", (token,)).fetchone()
    return int(row[0]) if row else 0


def frequent_terms(conn: Connection, floor: int) -> dict[str, int]:
    """Every term held by at least `floor` rows, with its row count (one walk of all postings)."""
    found = conn.execute("SELECT term, doc FROM temp.hits_vocab WHERE doc >= ?", (floor,))
    return {str(term): int(doc) for term, doc in found}


class Tokenizer:
    """FTS5's own instances of each term in chosen rows (a temporary FTS5 table)."""

    BATCH = 256
    """Rows tokenized together."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.bound_rows "
            "USING fts5(text, tokenize = 'unicode61')"
        )
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.bound_instances "
            "USING fts5vocab(temp, bound_rows, 'instance')"
        )

    def instances(self, rows: list[tuple[int, str]]) -> dict[int, Counter[bytes]]:
        """Each row's instances per token, as FTS5 tokenizes it."""
        found: dict[int, Counter[bytes]] = {}
        for start in range(0, len(rows), self.BATCH):
            found.update(self._batch(rows[start : start + self.BATCH]))
        return found

    def _batch(self, rows: list[tuple[int, str]]) -> dict[int, Counter[bytes]]:
        self.conn.executemany("INSERT INTO temp.bound_rows (rowid, text) VALUES (?, ?)", rows)
        try:
            found: dict[int, Counter[bytes]] = {rowid: Counter() for rowid, _ in rows}
            for term, rowid, n in self.conn.execute(
                "SELECT term, doc, count(*) FROM temp.bound_instances GROUP BY term, doc"
            ):
                found[rowid][str(term).encode()] = int(n)
            return found
        finally:
            self.conn.execute("DELETE FROM temp.bound_rows")
