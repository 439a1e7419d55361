"""A clean stop's record: the next start trusts it, and only it (`memoryd._clean`)."""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlean
import trio
from memoryd_harness import (
    CAP_S,
    OTHER,
    SESSION,
    append,
    open_index,
    progress,
    said,
    sources_in,
    user,
)

import proto
from memoryd import _index_ingest, _logs, _store
from memoryd._clean import CLEAN_FILE
from memoryd._index import Index, IndexDamaged
from memoryd._logs import SessionLog

CHECKED_WHOLE = "checking it whole"
TRUSTED = "was stopped cleanly"


def index_file(home: Path) -> Path:
    return home / "index" / "memory.sqlite3"


def clean_file(home: Path) -> Path:
    return home / "index" / CLEAN_FILE


async def test_a_clean_stop_is_trusted_and_a_log_appended_meanwhile_is_caught_up(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("the launch window moved"), said("noted")])
    append(sessions, [user("elsewhere")], OTHER)
    async with open_index(short_dir) as index:
        await index.search("launch", 5)  # counts the terms: they are kept too
    assert clean_file(short_dir).exists()
    append(sessions, [user("the window moved again")])  # while memoryd was stopped
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir) as index:
        assert not clean_file(short_dir).exists(), "taken at start: a crash leaves no mark"
        found = await index.search("window", 5)
    assert TRUSTED in caplog.text
    assert CHECKED_WHOLE not in caplog.text
    assert sorted(hit.text for hit in found.found) == [
        "the launch window moved",
        "the window moved again",
    ]
    assert progress(index_file(short_dir))[f"{OTHER}/0.jsonl"] == 1


async def test_an_unclean_stop_runs_the_whole_check(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    append(short_dir / "sessions", [user("the launch window moved")])
    async with open_index(short_dir):
        pass
    index = Index(short_dir / "index", sources_in(short_dir))
    async with trio.open_nursery() as nursery:  # memoryd killed: its stop never runs
        nursery.start_soon(index.run, trio.Event())
        with trio.fail_after(CAP_S):
            await index.caught_up.wait()
        append(short_dir / "sessions", [user("a turn before the kill")])
        await index.session_updated("mm-8ass9mqqqqqqqqqqqqqqqqqqqq")
        nursery.cancel_scope.cancel()
    assert not clean_file(short_dir).exists()
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir) as index:
        found = await index.search("kill", 5)
    assert CHECKED_WHOLE in caplog.text
    assert TRUSTED not in caplog.text
    assert [hit.text for hit in found.found] == ["a turn before the kill"]


def _damage_keeping_identity(path: Path, table: str) -> None:
    """Overwrite `table`'s pages with garbage; the file's size and times stay as they were."""
    conn = sqlean.connect(os.fspath(path))
    try:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [n for (n,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ?", (table,))]
    finally:
        conn.close()
    before = path.stat()
    with path.open("r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(b"\xa5" * size)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


async def test_an_index_damaged_after_a_clean_stop_is_found_by_the_first_search_and_rebuilt(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    append(short_dir / "sessions", [user(f"the launch window moved {i}") for i in range(300)])
    async with open_index(short_dir):
        pass
    _damage_keeping_identity(index_file(short_dir), "hits_content")
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir) as index:
        assert TRUSTED in caplog.text  # the identity matches: the start cannot tell
        with pytest.raises(IndexDamaged):
            await index.search("launch", 5)
        with trio.fail_after(CAP_S):
            await index.settled.wait()
        found = await index.search("launch", 5)
    assert len(found.found) == 5
    assert "is damaged" in caplog.text
    assert "runbook: memory-index-damaged" in caplog.text


async def test_session_updated_during_the_build_answers_at_once(short_dir: Path) -> None:
    sessions = short_dir / "sessions"
    for n in range(200):
        append(
            sessions,
            [user(f"turn {n} about the launch window"), said("noted")] * 10,
            f"mm-{n:026d}",
        )
    (short_dir / "index").mkdir(mode=0o700)
    index = Index(short_dir / "index", sources_in(short_dir))
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(index.run, shutdown)
        append(sessions, [user("the turn that just ended")])
        with trio.fail_after(CAP_S):
            await index.session_updated("mm-8ass9mqqqqqqqqqqqqqqqqqqqq")
        assert not index.ready.is_set(), "it answered while the index was being built"
        with trio.fail_after(CAP_S):
            await index.caught_up.wait()
        found = await index.search("ended", 5)
        shutdown.set()
    assert [hit.text for hit in found.found] == ["the turn that just ended"]


@pytest.mark.parametrize("ranking", ["context", "spec"])
async def test_after_a_crash_a_start_and_a_clean_stop_the_next_start_reads_only_what_changed(
    short_dir: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    ranking: proto.RecallRanking,
) -> None:
    """A SIGKILL, a start, a clean stop, a start: the last one reads no log but the new one."""
    sessions = short_dir / "sessions"
    append(sessions, [user("the launch window moved"), said("noted")])
    append(sessions, [user("elsewhere")], OTHER)
    async with open_index(short_dir, ranking=ranking):
        pass
    (short_dir / "index" / CLEAN_FILE).unlink()  # killed: its clean stop never written
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir, ranking=ranking):  # the journal: nothing changed
        with trio.fail_after(CAP_S):  # no clean stop vouches for the file before its check
            while "every session log in" not in caplog.text:  # noqa: ASYNC110 (a log line)
                await trio.sleep(0.01)
    append(sessions, [user("the window moved again")])  # while memoryd was stopped
    read: list[str] = []
    real_read_log, real_place = _logs.read_log, _logs.log_place

    def read_log(found: SessionLog, *args: Any, **kwargs: Any) -> Any:
        read.append(found.key)
        return real_read_log(found, *args, **kwargs)

    def log_place(path: Path) -> tuple[int, int]:
        read.append(f"counted {path}")
        return real_place(path)

    monkeypatch.setattr(_store, "read_log", read_log)
    monkeypatch.setattr(_index_ingest, "log_place", log_place)
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir, ranking=ranking) as index:
        found = await index.search("window", 5)
    assert TRUSTED in caplog.text
    assert read == [f"{SESSION}/0.jsonl"]  # the log that grew, and nothing else
    assert sorted(hit.text for hit in found.found)[-1] == "the window moved again"


async def test_a_turn_ending_during_the_catch_up_is_indexed_at_once(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first turn after a start never waits for the rest of the home to be read."""
    sessions = short_dir / "sessions"
    append(sessions, [user("an old turn")], OTHER)
    async with open_index(short_dir):
        pass
    release = threading.Event()

    real_changes = proto.changes_since

    def slow_changes(*args: Any) -> Any:
        release.wait(CAP_S)  # a slow disk: the journal of changes being read
        return real_changes(*args)

    monkeypatch.setattr(proto, "changes_since", slow_changes)
    index = Index(short_dir / "index", sources_in(short_dir))
    shutdown = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(index.run, shutdown)
            with trio.fail_after(CAP_S):
                await index.ready.wait()
            append(sessions, [user("the first turn after the start")])
            with trio.fail_after(2):
                await index.session_updated(SESSION)
            assert not index.caught_up.is_set(), "the catch-up had ended: nothing was shown"
            found = await index.search("first turn", 5)
            release.set()
            with trio.fail_after(CAP_S):
                await index.caught_up.wait()
            shutdown.set()
    finally:
        release.set()
    assert found.found[0].text == "the first turn after the start"


async def test_the_end_of_the_catch_up_is_said_with_its_time(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What the age bench waits for: the moment every log is read, not an early answer."""
    append(short_dir / "sessions", [user("the launch window moved")])
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir) as index:
        assert index.caught_up.is_set()
    assert re.search(
        r"the index is caught up with every log, [0-9.]+ s after its start", caplog.text
    )
