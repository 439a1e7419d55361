"""The frequent terms' best scores, read by a process beside memoryd (`ranking._scan`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlean
import trio
from memoryd_harness import CAP_S, SESSION, append, open_index, user

from memoryd._index import Index
from memoryd.ranking import Frontier, ScanFailed, Vocabulary, prepare, scan_elsewhere
from memoryd.ranking._bounds import read_frontiers

WORDS = ["when", "did", "we", "decide", "the", "launch", "window", "moved", "to", "thursday"]


def _say_things(home: Path, n: int = 40) -> None:
    """`n` owner messages of the words above, of many lengths and repeats."""
    append(
        home / "sessions",
        [user(" ".join(WORDS[(i + j) % len(WORDS)] for j in range(1 + i % 9))) for i in range(n)],
    )


def _here(index: Path) -> tuple[list[str], dict[bytes, Frontier]]:
    """The frequent terms of the file and their frontiers, read in this process."""
    conn = sqlean.connect(os.fspath(index), isolation_level=None)
    try:
        prepare(conn)
        vocabulary = Vocabulary()
        vocabulary.scan(conn)
        frequent = vocabulary.frequent()
        assert frequent
        found = read_frontiers(conn, frequent)
    finally:
        conn.close()
    assert found is not None
    return frequent, found


async def _scanned(index: Index) -> None:
    """Wait for the index's bounds (set from another thread of work: polled)."""
    with trio.fail_after(CAP_S):
        while index.bounds.missing():  # noqa: ASYNC110 (no event to wait for)
            await trio.sleep(0.02)


async def test_memoryd_reads_the_best_scores_in_a_process_beside_it(short_dir: Path) -> None:
    _say_things(short_dir)
    async with open_index(short_dir) as index:
        await _scanned(index)
        frequent, found = _here(index.path)
        assert {t: index.bounds.frontier(t) for t in frequent} == {
            t: found.get(t.encode()) for t in frequent
        }
        assert index.bounds.frontier("window") is not None


async def test_the_process_reads_what_a_scan_here_reads(short_dir: Path) -> None:
    _say_things(short_dir, 60)
    async with open_index(short_dir) as index:
        path = index.path
    frequent, found = _here(path)
    assert await scan_elsewhere(path, frequent) == found


async def test_a_scan_that_fails_says_why(short_dir: Path) -> None:
    with pytest.raises(ScanFailed, match=r"exited with 1: .*unable to open database file"):
        await scan_elsewhere(short_dir / "no-such-index.sqlite3", ["a"])


async def test_a_rebuild_stops_the_scan_of_the_file_it_replaces(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    first_began = trio.Event()

    async def slow_then_real(path: Path, terms: list[str]) -> dict[bytes, Frontier]:
        if not calls:
            calls.append("began")
            first_began.set()
            try:
                await trio.sleep_forever()
            finally:
                calls.append("stopped")
        calls.append("again")
        return await scan_elsewhere(path, terms)

    monkeypatch.setattr("memoryd._index_stats.scan_elsewhere", slow_then_real)
    _say_things(short_dir)
    async with open_index(short_dir) as index:
        with trio.fail_after(CAP_S):
            await first_began.wait()
        await index.rebuild()
        await _scanned(index)
        frequent, found = _here(index.path)
        assert {t: index.bounds.frontier(t) for t in frequent} == {
            t: found.get(t.encode()) for t in frequent
        }
    assert calls == ["began", "stopped", "again"]


async def test_the_best_scores_are_read_again_once_the_index_has_doubled(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "memoryd._index_search.OPTIMISE_FROM_ROWS", 1
    )  # a search finds counts stale
    monkeypatch.setattr("memoryd._index_stats.BOUNDS_AGAIN_FROM", 30)
    _say_things(short_dir, 20)
    async with open_index(short_dir) as index:
        await _scanned(index)
        assert index.bounds.frontier("zebra") is None
        # 20 rows more: a word no row held before, now in every other row. The first
        # search finds the counts stale; they are counted again, and at 40 rows (twice
        # 20, and past 30) the best scores are read again.
        more = [user("zebra crossing" if i % 2 else "x") for i in range(20)]
        append(short_dir / "sessions", more)
        await index.session_updated(SESSION)
        await index.search("zebra", 3)
        with trio.fail_after(CAP_S):
            while index.bounds.frontier("zebra") is None:  # noqa: ASYNC110 (no event for it)
                await trio.sleep(0.02)
        frequent, found = _here(index.path)
        assert {t: index.bounds.frontier(t) for t in frequent} == {
            t: found.get(t.encode()) for t in frequent
        }
