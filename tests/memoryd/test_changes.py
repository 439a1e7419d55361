"""The catch-up reads what the journal of changes names, and only that (`_index_ingest`).

A start after a clean stop or a crash reads the sessions written since the index's place
in `sessions/.changed`; it never walks every session folder unless the journal cannot
say. After a crash, the whole check and a look at every log follow, out of the way.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
from memoryd_harness import (
    CAP_S,
    OTHER,
    SESSION,
    append,
    open_index,
    place,
    said,
    user,
)

import proto
from memoryd import _index, _index_ingest, _logs, _store
from memoryd._clean import CLEAN_FILE
from memoryd._logs import SessionLog
from memoryd._store import IndexDamaged

LOOKED = "looked at every session log"


def index_file(home: Path) -> Path:
    return home / "index" / "memory.sqlite3"


def crash(home: Path) -> None:
    """As a SIGKILL leaves the index: no clean-stop record."""
    (home / "index" / CLEAN_FILE).unlink()


def no_walk(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail the test if every session folder is walked; the logs read, by key."""
    read: list[str] = []
    real_read_log = _logs.read_log

    def walked(*args: Any) -> Any:
        raise AssertionError("every session folder was walked")

    def read_log(found: SessionLog, *args: Any, **kwargs: Any) -> Any:
        read.append(found.key)
        return real_read_log(found, *args, **kwargs)

    monkeypatch.setattr(_index_ingest, "list_logs", walked)
    monkeypatch.setattr(_store, "read_log", read_log)
    return read


async def until_logged(caplog: pytest.LogCaptureFixture, text: str) -> None:
    """Until memoryd has logged `text` (what it does out of the way says so, and only so)."""
    with trio.fail_after(CAP_S):
        while text not in caplog.text:  # noqa: ASYNC110 (a log line has no event to wait on)
            await trio.sleep(0.01)


async def test_a_clean_start_reads_only_the_sessions_written_since(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("the launch window moved"), said("noted")])
    append(sessions, [user("elsewhere")], OTHER)
    async with open_index(short_dir):
        pass
    append(sessions, [user("the window moved again")])  # while memoryd was stopped
    read = no_walk(monkeypatch)
    async with open_index(short_dir) as index:
        found = await index.search("window", 5)
    assert read == [f"{SESSION}/0.jsonl"]
    assert "the window moved again" in [hit.text for hit in found.found]


async def test_each_turn_moves_the_place_on_so_a_crash_costs_only_the_last_turns(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("the launch window moved")])
    async with open_index(short_dir) as index:
        append(sessions, [user("elsewhere")], OTHER)
        await index.session_updated(OTHER)
        end = proto.changes_since(sessions, None).place
        assert place(index_file(short_dir)) == end
        append(sessions, [user("the window moved again")])  # its turn's end never arrives
    crash(short_dir)
    read = no_walk(monkeypatch)
    monkeypatch.setattr(_index.Index, "_after_crash", _nothing_after_a_crash)
    async with open_index(short_dir) as index:
        found = await index.search("window", 5)
    assert read == [f"{SESSION}/0.jsonl"]  # not OTHER's: the turn moved the place past it
    assert "the window moved again" in [hit.text for hit in found.found]


async def _nothing_after_a_crash(self: _index.Index) -> None:
    """No look at every log after the crash: what the catch-up read is all that was read."""


async def test_after_a_crash_the_file_is_checked_and_every_log_looked_at_out_of_the_way(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("the launch window moved")])
    append(sessions, [user("elsewhere")], OTHER)
    async with open_index(short_dir):
        pass
    crash(short_dir)
    # A power cut took the journal's last line; the log's record was synced.
    append(sessions, [user("the window the journal lost")], OTHER, by_hand=True)
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir) as index:
        assert "checking it whole" in caplog.text
        assert LOOKED not in caplog.text, "the start waited on the look at every log"
        await until_logged(caplog, LOOKED)
        found = await index.search("lost", 5)
    assert "whole after an unclean stop" in caplog.text
    assert [hit.text for hit in found.found] == ["the window the journal lost"]
    assert "1 session(s) had records not indexed" in caplog.text


async def test_damage_found_by_the_check_after_a_crash_rebuilds_the_file(
    short_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(short_dir / "sessions", [user("the launch window moved")])
    async with open_index(short_dir):
        pass
    crash(short_dir)

    def damaged(*args: Any) -> None:
        raise IndexDamaged("quick_check says 'page 7 is never used'")

    monkeypatch.setattr(_index, "_check_whole", damaged)
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir) as index:
        await until_logged(caplog, "built the index")
        found = await index.search("launch", 5)
    assert "is damaged (quick_check says 'page 7 is never used')" in caplog.text
    assert [hit.text for hit in found.found] == ["the launch window moved"]


async def test_a_journal_started_anew_makes_the_start_look_at_every_log(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("the launch window moved")])
    async with open_index(short_dir):
        pass
    (sessions / proto.CHANGES_FILE).unlink()  # removed by hand
    append(sessions, [user("a window written by hand")], OTHER, by_hand=True)
    append(sessions, [user("a window written by loopd")])  # a new journal, another id
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir) as index:
        assert "the journal of changes cannot say" in caplog.text
        found = await index.search("window", 5)
    assert sorted(hit.text for hit in found.found) == [
        "a window written by hand",
        "a window written by loopd",
        "the launch window moved",
    ]
    assert place(index_file(short_dir)) == proto.changes_since(sessions, None).place


async def test_a_journal_started_anew_while_serving_is_followed_by_a_look_at_every_log(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("the launch window moved")])
    caplog.set_level(logging.INFO, logger="memoryd.index")
    async with open_index(short_dir) as index:
        (sessions / proto.CHANGES_FILE).unlink()
        append(sessions, [user("a window written by hand")], OTHER, by_hand=True)
        append(sessions, [user("a window of a turn")])
        await index.session_updated(SESSION)
        await until_logged(caplog, f"{LOOKED} in")
        found = await index.search("window", 5)
        assert place(index_file(short_dir)) == proto.changes_since(sessions, None).place
    assert "a window written by hand" in [hit.text for hit in found.found]
