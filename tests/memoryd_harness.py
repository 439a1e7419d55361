"""Helpers for memoryd's index tests: session logs as loopd writes them, an open index."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import sqlean
import trio

import proto
from memoryd._index import Index
from memoryd._store import CHANGES_KEY, Sources, Writer
from proto import AssistantRecord, Class, RecallRanking, ToolCall, ToolResultRecord, UserRecord

SESSION = "mm-8ass9mqqqqqqqqqqqqqqqqqqqq"
OTHER = "chat-17891234abcdefgh"
TIME = "2026-09-20T14:02:03Z"
CAP_S = 20

Record = UserRecord | AssistantRecord | ToolResultRecord
_encoder = msgspec.json.Encoder()


def user(text: str, time: str = TIME) -> UserRecord:
    return UserRecord(time=time, content=text)


def said(
    text: str | None,
    *calls: tuple[str, str],
    reasoning: str | None = None,
    time: str = TIME,
) -> AssistantRecord:
    return AssistantRecord(
        time=time,
        content=text,
        reasoning_content=reasoning,
        tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)],
    )


def result(
    class_: Class = Class.private, untrusted: bool = False, text: str = "a tool's output"
) -> ToolResultRecord:
    return ToolResultRecord(
        time=TIME, call_id="c0", name="tool", content=text, class_=class_, untrusted=untrusted
    )


def encode(records: Iterable[Record]) -> bytes:
    return b"".join(_encoder.encode(r) + b"\n" for r in records)


def log_path(sessions: Path, session: str = SESSION, epoch: int = 0) -> Path:
    return sessions / session / f"{epoch}.jsonl"


def append(
    sessions: Path,
    records: Iterable[Record],
    session: str = SESSION,
    *,
    epoch: int = 0,
    by_hand: bool = False,
) -> Path:
    """Append records to a session log as loopd does (creating the session's directory)."""
    return append_bytes(sessions, encode(records), session, epoch=epoch, by_hand=by_hand)


def append_bytes(
    sessions: Path, data: bytes, session: str = SESSION, *, epoch: int = 0, by_hand: bool = False
) -> Path:
    """Append to a log; first, as loopd does, a line of the journal of changes (unless
    `by_hand`: a log changed by someone else than a writer of logs)."""
    path = log_path(sessions, session, epoch)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not by_hand:
        proto.note_change(sessions, session)
    with path.open("ab") as f:
        f.write(data)
    return path


def sources_in(
    home: Path, max_class: Class = Class.private, ranking: RecallRanking = "spec"
) -> Sources:
    return Sources(
        sessions_dir=home / "sessions",
        archive=home / "memory" / "archive.md",
        max_class=max_class,
        ranking=ranking,
    )


@asynccontextmanager
async def open_index(
    home: Path, max_class: Class = Class.private, ranking: RecallRanking = "spec"
) -> AsyncIterator[Index]:
    """An `Index` under `home`, opened (or built) and caught up; closed on the way out."""
    (home / "index").mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "sessions").mkdir(parents=True, exist_ok=True, mode=0o700)
    index = Index(home / "index", sources_in(home, max_class, ranking))
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(index.run, shutdown)
        with trio.fail_after(CAP_S):
            await index.caught_up.wait()
        try:
            yield index
        finally:
            shutdown.set()


def indexed(path: Path) -> list[tuple[Any, ...]]:
    """Every row of the index, its text beside its source, sorted (rowids left out)."""
    conn = sqlean.connect(os.fspath(path))
    try:
        rows = conn.execute(
            "SELECT h.text, s.kind, s.session, s.epoch, s.record, s.time, s.role, s.class, "
            "s.untrusted FROM hits h JOIN sources s ON s.rowid = h.rowid"
        ).fetchall()
        counts = conn.execute("SELECT count(*) FROM hits").fetchone()[0]
    finally:
        conn.close()
    assert counts == len(rows), "every row of hits has its source"
    return sorted(rows, key=repr)


def progress(path: Path) -> dict[str, int]:
    """Each log's count in `progress` (not the journal of changes' place: `place`)."""
    conn = sqlean.connect(os.fspath(path))
    try:
        rows = conn.execute("SELECT log, records FROM progress").fetchall()
    finally:
        conn.close()
    return {key: n for key, n in rows if key != CHANGES_KEY}


def place(path: Path) -> proto.ChangesPlace | None:
    """How far the index at `path` has read the journal of changes."""
    conn = sqlean.connect(os.fspath(path))
    try:
        return Writer(conn).place()
    finally:
        conn.close()
