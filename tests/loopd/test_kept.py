"""The session loopd keeps between turns is always what a fresh read of its files gives.

loopd is the log's only writer, so it keeps each session in memory and adds what it
appends (issue 16): the records, the label, the calls still unanswered, the ids used,
the token estimate and the request's messages encoded once each. These tests drive any
sequence of appends, foreign writes (whole lines, torn lines: a crash, another writer),
restarts and repaired sessions, and compare the kept session with a fresh load after
each step; and the incrementally encoded messages with the messages built from scratch by
the pairing rule written as a walk over the whole log (the oracle below).
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import proto
from loopd._history import History, message
from loopd._sessions import Session, SessionStore
from proto import (
    AssistantRecord,
    Baseline,
    Class,
    SessionRecord,
    ToolCall,
    ToolResultRecord,
    UserRecord,
)

_encoder = msgspec.json.Encoder()
SESSION = "chat-keptsession01"
BASELINE = Baseline(
    session=SESSION,
    epoch=0,
    created="2026-12-01T00:00:00Z",
    model="m",
    system="You are boxmaker.\n\n# soul.md\nA soul.",
    tools=[{"type": "function", "function": {"name": "recall"}}],
)
HEAD = b'{"model":"m","messages":'


# -- the oracle: the pairing rule as a walk over the whole log (`_history`'s docstring) --


def _answers(records: Sequence[SessionRecord]) -> dict[tuple[int, int], int]:
    """(assistant record, call position) -> the index of the result that answers it."""
    waiting: dict[str, list[tuple[int, int]]] = {}
    answered: dict[tuple[int, int], int] = {}
    for i, record in enumerate(records):
        if isinstance(record, AssistantRecord):
            for position, call in enumerate(record.tool_calls):
                waiting.setdefault(call.id, []).append((i, position))
        elif isinstance(record, ToolResultRecord):
            calls = waiting.get(record.call_id)
            if calls:
                answered[calls.pop()] = i  # the nearest one before it
    return answered


def unanswered(records: Sequence[SessionRecord]) -> list[ToolCall]:
    """Every tool call that no result answers, in the log's order."""
    answered = _answers(records)
    return [
        call
        for i, record in enumerate(records)
        if isinstance(record, AssistantRecord)
        for position, call in enumerate(record.tool_calls)
        if (i, position) not in answered
    ]


def pair(records: Sequence[SessionRecord]) -> Iterator[SessionRecord]:
    """The records, each assistant message's results moved right after it, in call order."""
    answered = _answers(records)
    for i, record in enumerate(records):
        if isinstance(record, ToolResultRecord):
            continue  # yielded after its call, or answering none
        yield record
        if isinstance(record, AssistantRecord):
            for position in range(len(record.tool_calls)):
                result = answered.get((i, position))
                if result is not None:
                    yield records[result]


def messages(
    system: str, records: Sequence[SessionRecord], *, null_content: bool
) -> list[dict[str, object]]:
    """The system prompt and every record as chat messages, in `pair`'s order."""
    return [
        {"role": "system", "content": system},
        *(message(record, null_content=null_content) for record in pair(records)),
    ]


IDS = st.sampled_from(["a", "b", "call_0", "call_1"])
TEXT = st.text(max_size=12)


@st.composite
def records(draw: st.DrawFn) -> SessionRecord:
    """Any record: calls with ids models reuse, results answering anything or nothing."""
    kind = draw(st.sampled_from(["user", "assistant", "result"]))
    if kind == "user":
        return UserRecord(time="t", content=draw(TEXT), ref=draw(st.none() | TEXT))
    if kind == "assistant":
        ids = draw(st.lists(IDS, max_size=3, unique=True))
        return AssistantRecord(
            time="t",
            content=draw(st.none() | TEXT),
            reasoning_content=draw(st.none() | TEXT),
            tool_calls=[ToolCall(id=i, name="recall", arguments=draw(TEXT)) for i in ids],
            tokens=draw(st.none() | st.integers(0, 10_000)),
        )
    return ToolResultRecord(
        time="t",
        call_id=draw(IDS),
        name="recall",
        content=draw(TEXT),
        class_=draw(st.sampled_from(Class)),
        untrusted=draw(st.booleans()),
    )


@settings(max_examples=200, deadline=None)
@given(log=st.lists(records(), max_size=25), null_content=st.booleans())
def test_the_messages_kept_up_one_record_at_a_time_are_the_messages_built_anew(
    log: list[SessionRecord], null_content: bool
) -> None:
    history = History("sys", null_content=null_content)
    for n, record in enumerate(log, 1):
        history.add(record)
        so_far = log[:n]
        built = _encoder.encode(messages("sys", so_far, null_content=null_content))
        assert history.body(HEAD) == HEAD + built + b"}"
        assert history.unanswered() == unanswered(so_far)
        assert list(history.paired()) == list(pair(so_far))
        assert history.call_ids == {
            c.id for r in so_far if isinstance(r, AssistantRecord) for c in r.tool_calls
        }
    at_once = History("sys", log, null_content=null_content)
    assert at_once.body(HEAD) == history.body(HEAD)


def _estimated(session: Session, extra: int) -> int:
    """The estimate as loopd made it before it kept sessions: walked from the log's end."""
    known, since = 0, extra
    for record in reversed(session.records):
        if isinstance(record, AssistantRecord) and record.tokens is not None:
            known = record.tokens
            break
        since += len(_encoder.encode(record))
    else:
        since += len(session.baseline.system) + len(_encoder.encode(session.baseline.tools))
    return known + since // 3


def _state(session: Session) -> tuple[object, ...]:
    return (
        session.records,
        session.label,
        session.unanswered(),
        session.history.call_ids,
        session.estimated_tokens(7),
        session.history.body(HEAD),
    )


def _line(record: SessionRecord) -> bytes:
    return _encoder.encode(record)


STEPS = st.one_of(
    st.tuples(st.just("append"), records()),
    st.tuples(st.just("foreign line"), records()),
    # a line cut by a crash: a whole record without its newline, or a piece of one
    st.tuples(st.just("torn record"), records()),
    st.tuples(st.just("torn piece"), records(), st.integers(1, 40)),
    st.tuples(st.just("torn garbage"), st.binary(min_size=1, max_size=30)),
    st.tuples(st.just("restart")),
)


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(STEPS, max_size=14), null_content=st.booleans())
def test_a_kept_session_is_always_what_a_fresh_load_of_its_files_gives(
    steps: list[tuple[Any, ...]], null_content: bool
) -> None:
    root = Path(tempfile.mkdtemp(prefix="bxk", dir="/tmp"))
    try:
        store = SessionStore(root, null_content=null_content)
        store.create(SESSION, BASELINE)
        log = root / SESSION / proto.LOG_FILE
        before = store.open(SESSION)
        for kind, *what in steps:
            if kind == "restart":
                store = SessionStore(root, null_content=null_content)
            elif kind == "torn garbage":
                with open(log, "ab") as f:
                    f.write(what[0].replace(b"\n", b" "))
            else:
                record = what[0]
                assert isinstance(record, UserRecord | AssistantRecord | ToolResultRecord)
                if kind == "append":
                    store.open(SESSION).append(record)
                elif kind == "foreign line":
                    proto.append_line(log, _line(record))
                else:  # a line cut by a crash: a whole record without its newline, or a piece
                    with open(log, "ab") as f:
                        f.write(_line(record)[: what[1] if kind == "torn piece" else None])
            kept = store.open(SESSION)
            if kind == "append":  # its own append never makes loopd read the log again
                assert kept is before
            before = kept
            fresh = SessionStore(root, null_content=null_content).load(SESSION)
            assert _state(kept) == _state(fresh)
            assert kept.estimated_tokens(7) == _estimated(fresh, 7)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_session_written_to_by_another_writer_is_read_again(short_dir: Path) -> None:
    store = SessionStore(short_dir)
    session = store.create(SESSION, BASELINE)
    session.append(UserRecord(time="t1", content="one"))
    assert store.kept(SESSION) is session
    proto.append_line(session.log_path, _line(UserRecord(time="t2", content="two")))
    assert store.kept(SESSION) is None  # another writer: what loopd kept is not the log
    again = store.open(SESSION)
    assert again is not session
    assert [r.time for r in again.records] == ["t1", "t2"]
    # an append made while another writer was at it leaves the session to be read again
    proto.append_line(session.log_path, _line(UserRecord(time="t3", content="three")))
    again.append(UserRecord(time="t4", content="four"))
    assert store.kept(SESSION) is None
    assert [r.time for r in store.open(SESSION).records] == ["t1", "t2", "t3", "t4"]


def test_an_append_that_fails_leaves_the_session_to_be_read_again(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(short_dir)
    session = store.create(SESSION, BASELINE)
    session.append(UserRecord(time="t1", content="one"))
    append_line = proto.append_line

    def written_but_not_synced(path: Path, line: bytes) -> os.stat_result:
        append_line(path, line)
        raise OSError(errno.EIO, "fsync failed")

    monkeypatch.setattr(proto, "append_line", written_but_not_synced)
    with pytest.raises(OSError, match="fsync failed"):
        session.append(UserRecord(time="t2", content="two"))
    monkeypatch.undo()
    assert [r.time for r in session.records] == ["t1"]
    assert store.kept(SESSION) is None  # the log may hold the line: read it again
    assert [r.time for r in store.open(SESSION).records] == ["t1", "t2"]
