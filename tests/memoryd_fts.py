"""An in-memory recall index with the spec's schema, filled with given texts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlean

from memoryd._store import SCHEMA
from memoryd.ranking import TermBounds, prepare
from memoryd.ranking._bounds import read_frontiers


def connect(rows: list[str]) -> Any:
    """A connection to a fresh in-memory index holding `rows` (rowids from 1)."""
    conn = sqlean.connect(":memory:", isolation_level=None)
    for statement in SCHEMA:
        conn.execute(statement)
    append(conn, rows)
    prepare(conn)
    return conn


def append(conn: Any, rows: list[str]) -> list[int]:
    """Add `rows` after the last one, as memoryd's writer does; their rowids."""
    first = conn.execute("SELECT coalesce(max(rowid), 0) FROM sources").fetchone()[0] + 1
    rowids = list(range(first, first + len(rows)))
    conn.executemany("INSERT INTO hits (rowid, text) VALUES (?, ?)", zip(rowids, rows, strict=True))
    conn.executemany(
        "INSERT INTO sources VALUES "
        "(?, 'session', 'chat-abcdefgh', 0, ?, 't', 'user', 'private', 0)",
        ((n, n) for n in rowids),
    )
    return rowids


def scan_bounds(conn: Any, bounds: TermBounds, keep: Iterable[str]) -> bool:
    """Read the frontiers of `keep` on `conn` into `bounds`, as memoryd's scan does elsewhere.

    False (nothing kept) when the bounds were cleared meanwhile.
    """
    generation = bounds.begin_elsewhere()
    conn.execute("BEGIN")
    try:
        found = read_frontiers(conn, keep)
    finally:
        conn.execute("COMMIT")
    return bounds.install(found, generation)
