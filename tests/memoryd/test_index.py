"""The index file: its schema, keeping up with the logs, start-up repairs, reindex."""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import stat
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlean
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memoryd_harness import (
    CAP_S,
    OTHER,
    SESSION,
    Record,
    append,
    append_bytes,
    encode,
    indexed,
    log_path,
    open_index,
    progress,
    result,
    said,
    user,
)

import entries
from memoryd._index import Index, IndexDamaged
from memoryd._store import SCHEMA
from proto import Class


def index_file(home: Path) -> Path:
    return home / "index" / "memory.sqlite3"


def texts(home: Path) -> list[str]:
    return sorted(row[0] for row in indexed(index_file(home)))


def archive(home: Path, *texts: str, start: int = 0) -> None:
    path = home / "memory" / "archive.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    moved = datetime(2026, 9, 24, 20, 14, tzinfo=UTC)
    with path.open("a") as f:
        for i, text in enumerate(texts, start):
            f.write(
                entries.archive_record(
                    text, name="memory.md", session=SESSION, moved_at=moved + timedelta(minutes=i)
                )
            )


async def test_the_file_holds_the_spec_schema_in_wal_mode(short_dir: Path) -> None:
    async with open_index(short_dir):
        pass
    path = index_file(short_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    conn = sqlean.connect(os.fspath(path))
    try:
        tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()
    ours = {name: sql for name, sql in tables.items() if not name.startswith("hits_")}
    assert ours == {"hits": SCHEMA[0], "sources": SCHEMA[1], "progress": SCHEMA[2]}
    assert " ".join(SCHEMA[0].split()) == (
        "CREATE VIRTUAL TABLE hits USING fts5(text, tokenize = 'unicode61')"
    )


async def test_session_updated_reads_only_past_the_stored_count(short_dir: Path) -> None:
    sessions = short_dir / "sessions"
    async with open_index(short_dir) as index:
        append(sessions, [user("first words"), said("second words")])
        await index.session_updated(SESSION)
        assert texts(short_dir) == ["first words", "second words"]
        # Were it read again, a changed first line would show: it is not.
        path = log_path(sessions)
        path.write_bytes(path.read_bytes().replace(b"first", b"FIRST"))
        append(sessions, [user("third words")])
        await index.session_updated(SESSION)
        assert texts(short_dir) == ["first words", "second words", "third words"]
        await index.session_updated(SESSION)  # nothing new: nothing added
        assert len(texts(short_dir)) == 3
    assert progress(index_file(short_dir)) == {f"{SESSION}/0.jsonl": 3, "archive.md": 0}


async def test_a_turn_missed_while_down_is_caught_up_at_start(short_dir: Path) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("one"), result(Class.public, untrusted=True)])
    async with open_index(short_dir):
        assert texts(short_dir) == ["one"]
    append(sessions, [said("two"), user("three")])  # memoryd was down for this turn
    append(sessions, [user("elsewhere")], OTHER)
    async with open_index(short_dir):
        rows = indexed(index_file(short_dir))
    assert [(r[0], r[4], r[8]) for r in rows] == [
        ("elsewhere", 0, 0),
        ("one", 0, 0),
        ("three", 3, 1),  # the label walked from the start: untrusted since record 1
        ("two", 2, 1),
    ]
    assert progress(index_file(short_dir)) == {
        f"{SESSION}/0.jsonl": 4,
        f"{OTHER}/0.jsonl": 1,
        "archive.md": 0,
    }


async def test_a_missing_index_is_rebuilt_at_start(short_dir: Path) -> None:
    append(short_dir / "sessions", [user("kept in the logs")])
    async with open_index(short_dir):
        pass
    before = indexed(index_file(short_dir))
    for leftover in index_file(short_dir).parent.iterdir():
        leftover.unlink()
    async with open_index(short_dir):
        assert indexed(index_file(short_dir)) == before


@pytest.mark.parametrize(
    "damage",
    [
        b"this is not a database at all" * 100,
        b"SQLite format 3\x00" + b"\xff" * 8000,
        "other-schema",
        "truncated",
    ],
)
async def test_a_damaged_index_is_rebuilt_at_start_naming_the_runbook(
    short_dir: Path, damage: bytes | str, caplog: pytest.LogCaptureFixture
) -> None:
    append(short_dir / "sessions", [user("the launch window moved")])
    async with open_index(short_dir):
        pass
    path = index_file(short_dir)
    if damage == "other-schema":
        path.unlink()
        conn = sqlean.connect(os.fspath(path))
        conn.execute("CREATE TABLE hits (text)")
        conn.close()
    elif damage == "truncated":
        size = path.stat().st_size
        with path.open("r+b") as f:
            f.truncate(size // 2)
    else:
        assert isinstance(damage, bytes)
        path.write_bytes(damage)
    caplog.set_level(logging.ERROR)
    async with open_index(short_dir) as index:
        assert texts(short_dir) == ["the launch window moved"]
        assert [hit.text for hit in (await index.search("launch", 5)).found] == [
            "the launch window moved"
        ]
    assert "runbook: memory-index-damaged" in caplog.text
    assert str(path) in caplog.text


async def test_reindex_swaps_in_a_new_file_and_counts_what_it_read(short_dir: Path) -> None:
    sessions = short_dir / "sessions"
    append(sessions, [user("one"), said("two", ("read_file", '{"path":"/x"}'))])
    append(sessions, [user("three"), result(Class.secret), user("hidden")], OTHER)
    archive(short_dir, "Owner prefers UTC.", "Owner is Ada.")
    async with open_index(short_dir) as index:
        before = indexed(index_file(short_dir))
        inode = index_file(short_dir).stat().st_ino
        built = await index.rebuild()
        assert (built.logs, built.records, built.archive) == (2, 4, 2)
        assert index_file(short_dir).stat().st_ino != inode
        assert indexed(index_file(short_dir)) == before
        assert not index_file(short_dir).with_name("memory.sqlite3.new").exists()
        assert [h.text for h in (await index.search("Ada", 5)).found] == ["Owner is Ada."]


async def test_archive_growth_is_indexed_and_a_hand_edit_indexes_it_anew(short_dir: Path) -> None:
    archive(short_dir, "Owner prefers UTC.")
    async with open_index(short_dir) as index:
        assert texts(short_dir) == ["Owner prefers UTC."]
        archive(short_dir, "Owner is Ada.", start=1)
        await index.archive_changed()
        assert texts(short_dir) == ["Owner is Ada.", "Owner prefers UTC."]
        (short_dir / "memory" / "archive.md").unlink()
        archive(short_dir, "Owner moved to Lisbon.")
        await index.archive_changed()
        assert texts(short_dir) == ["Owner moved to Lisbon."]
        assert progress(index_file(short_dir))["archive.md"] == 1


async def test_max_class_secret_indexes_secret_records(short_dir: Path) -> None:
    append(short_dir / "sessions", [user("a"), result(Class.secret), user("b")])
    async with open_index(short_dir, max_class=Class.secret):
        rows = indexed(index_file(short_dir))
    assert [(r[0], r[7]) for r in rows] == [("a", "private"), ("b", "secret")]


async def test_logs_it_cannot_read_are_skipped(short_dir: Path) -> None:
    sessions = short_dir / "sessions"
    append_bytes(sessions, b"\x00\x01\x02 not json\n" * 3)
    append(sessions, [user("fine")], OTHER)
    (sessions / SESSION / "1.jsonl").mkdir()  # not a file: not a log
    async with open_index(short_dir) as index:
        await index.session_updated(SESSION)
        assert texts(short_dir) == ["fine"]
        assert progress(index_file(short_dir))[f"{SESSION}/0.jsonl"] == 3


# -- a reindex equals the incremental index ----------------------------------------------

WORDS = ["launch", "window", "thursday", "the", "owner", "notes", "q3", "ümlaut", "日本"]
_text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(" ".join)
_call = st.tuples(st.sampled_from(["read_file", "http_fetch"]), st.sampled_from(['{"p":1}', "{}"]))
_record: st.SearchStrategy[Record] = st.one_of(
    _text.map(user),
    st.builds(
        lambda text, calls, reasoning: said(text, *calls, reasoning=reasoning),
        st.none() | _text,
        st.lists(_call, max_size=2),
        st.none() | _text,
    ),
    st.builds(result, st.sampled_from(list(Class)), st.booleans()),
)
_session_log = st.lists(_record, max_size=12)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    logs=st.lists(_session_log, min_size=1, max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
    told=st.lists(st.booleans(), min_size=1, max_size=8),
    archived=st.lists(st.lists(_text.filter(bool), max_size=2), max_size=3),
    restart_at=st.integers(min_value=0, max_value=20),
    max_class=st.sampled_from([Class.private, Class.secret]),
)
def test_a_reindex_equals_the_incremental_index(
    logs: list[list[Record]],
    cuts: list[int],
    told: list[bool],
    archived: list[list[str]],
    restart_at: int,
    max_class: Class,
) -> None:
    """Logs arrive in chunks cut anywhere (torn lines included); memoryd is told of most
    of them, restarts once (catching up from `progress`), and archive.md grows between;
    then the incremental index and a rebuild hold the same rows and counts."""
    home = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    sessions = home / "sessions"
    ids = [SESSION, OTHER, "chat-zzzzzzzzzzzz"]
    steps: list[tuple[str, str, bytes]] = []
    for session, records in zip(ids, logs, strict=False):
        data = encode(records)
        bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
        steps += [("log", session, data[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    steps += [("archive", "\n".join(batch), b"") for batch in archived]

    async def apply(index: Index, n: int, step: tuple[str, str, bytes]) -> None:
        kind, name, data = step
        if kind == "log":
            append_bytes(sessions, data, name)
            if told[n % len(told)]:
                await index.session_updated(name)
        else:
            archive(home, *filter(None, name.split("\n")), start=10 * n)
            await index.archive_changed()

    async def body() -> None:
        with trio.fail_after(CAP_S):
            async with open_index(home, max_class) as index:
                for n, step in enumerate(steps[:restart_at]):
                    await apply(index, n, step)
            async with open_index(home, max_class) as index:
                for n, step in enumerate(steps[restart_at:], restart_at):
                    await apply(index, n, step)
                await index.catch_up()  # what a start-up would do for the turns untold
                incremental = indexed(index_file(home)), progress(index_file(home))
                await index.rebuild()
                rebuilt = indexed(index_file(home)), progress(index_file(home))
        assert rebuilt == incremental

    try:
        trio.run(body)
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def test_a_search_that_sqlite_rolled_back_names_sqlites_own_error(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An I/O error ends the read transaction (SQLite rolls back by itself, as on a full
    disk); the owner must read that error, not a COMMIT's complaint about it."""

    def failing_rank(conn: sqlean.Connection, *args: object, **kwargs: object) -> None:
        conn.execute("ROLLBACK")
        raise sqlean.OperationalError("disk I/O error")

    append(short_dir / "sessions", [user("the launch window moved")])
    async with open_index(short_dir) as index:
        monkeypatch.setattr("memoryd._index_search.rank", failing_rank)
        with pytest.raises(IndexDamaged) as damaged:
            await index.search("launch", 5)
        monkeypatch.undo()
        assert [hit.text for hit in (await index.search("launch", 5)).found] == [
            "the launch window moved"
        ]
    assert str(damaged.value) == "the recall index cannot be read: disk I/O error"
