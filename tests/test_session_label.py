"""One session label rule for every role (issue 11): loopd and memoryd agree on damaged logs.

loopd decides a session's taint from its log when it resumes the session; memoryd labels
the records it indexes by walking the same log. Both use proto's rule; this feeds them the
same logs, damage and torn tails included, and checks they agree, and that damage never
lowers a label.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

import proto
from loopd._sessions import SessionStore
from memoryd._logs import START, list_logs, read_log
from proto import Class, Label

SESSION = "chat-labelsagree0001"
BASELINE = proto.Baseline(
    session=SESSION, epoch=0, created="2026-12-01T00:00:00Z", model="m", system="s", tools=[]
)
_encoder = msgspec.json.Encoder()

CLASSES = st.sampled_from(list(Class))
RECORDS = st.one_of(
    st.builds(proto.UserRecord, time=st.just("t"), content=st.text(max_size=5)),
    st.builds(proto.AssistantRecord, time=st.just("t"), content=st.text(max_size=5)),
    st.builds(
        proto.ToolResultRecord,
        time=st.just("t"),
        call_id=st.just("c"),
        name=st.just("x"),
        content=st.text(max_size=5),
        class_=CLASSES,
        untrusted=st.booleans(),
    ),
)
DAMAGE = st.one_of(
    st.binary(max_size=20).filter(lambda b: b"\n" not in b),
    st.sampled_from(
        [
            b'{"type": "tool_result", "class": "top secret", "untrusted": false}',
            b'{"type": "tool_result", "class": "public", "untrusted": "maybe"}',
            b'{"type": "tool_result", "class": "public", "untrusted": false}',
            b'{"type":"tool_result","call_id":"c","name":"x","content":"cut off',
            b'{"type": "user"}',
            b"[1, 2, 3]",
            b"",
        ]
    ),
)
LINES = st.lists(st.one_of(RECORDS.map(_encoder.encode), DAMAGE), max_size=12)


def write(root: Path, lines: list[bytes], tail: bytes) -> Path:
    sessions = root / "sessions"
    directory = sessions / SESSION
    directory.mkdir(parents=True)
    (directory / proto.BASELINE_FILE).write_bytes(_encoder.encode(BASELINE))
    (directory / proto.LOG_FILE).write_bytes(b"".join(line + b"\n" for line in lines) + tail)
    return sessions


def loopd_label(sessions: Path) -> Label:
    return SessionStore(sessions).load(SESSION).taint()


def memoryd_label(sessions: Path) -> Label:
    [found] = list_logs(sessions)
    _, cursor = read_log(found, START, indexed=0, max_class=Class.secret)
    assert cursor.label is not None  # a read always knows the label after it
    return cursor.label


@settings(max_examples=150, deadline=None)
@given(lines=LINES, tail=st.sampled_from([b"", b'{"type":"tool_result","class":"sec']))
def test_loopd_and_memoryd_agree_on_a_session_label(lines: list[bytes], tail: bytes) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        sessions = write(Path(scratch), lines, tail)
        label = loopd_label(sessions)
        assert memoryd_label(sessions) == label
        read = proto.SESSION_LOG.read(sessions / SESSION / proto.LOG_FILE)
        assert proto.session_label(read) == label
        # every result counts, and nothing is below the floor of private
        assert label.class_.rank >= Class.private.rank
        for record in read.records:
            if isinstance(record, proto.ToolResultRecord):
                assert label.join(record.label) == label


@settings(max_examples=100, deadline=None)
@given(lines=LINES, damage=DAMAGE, where=st.integers(0, 12))
def test_damage_never_lowers_a_label(lines: list[bytes], damage: bytes, where: int) -> None:
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        clean = loopd_label(write(Path(one), lines, b""))
        damaged_lines = [*lines[:where], damage, *lines[where:]]
        damaged = loopd_label(write(Path(two), damaged_lines, b""))
        assert damaged.join(clean) == damaged


def test_a_result_cut_off_mid_line_counts_as_the_worst() -> None:
    line = b'{"type":"tool_result","call_id":"c","name":"x","content":"cut off'
    assert proto.damaged_label(line) == Label(class_=Class.secret, untrusted=True)
    assert proto.damaged_label(b"garbage") == proto.SESSION_START
