"""Session files: created once, appended whole, resumed without losing a whole record."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import proto
from loopd._sessions import SessionStore, new_session_id
from proto import AssistantRecord, Baseline, Class, Label, ToolCall, ToolResultRecord, UserRecord

BASELINE = Baseline(
    session="chat-abcdefghijklmnop",
    epoch=0,
    created="2026-11-30T00:00:00Z",
    model="m",
    system="sys",
    tools=[],
)


def test_create_writes_private_files_once(short_dir: Path) -> None:
    store = SessionStore(short_dir / "sessions")
    session = store.create(BASELINE.session, BASELINE)
    assert stat.S_IMODE(session.directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((session.directory / "0.jsonl").stat().st_mode) == 0o600
    assert (session.directory / "0.jsonl").read_bytes() == b""
    assert (
        msgspec.json.decode((session.directory / "0.baseline.json").read_bytes(), type=Baseline)
        == BASELINE
    )
    with pytest.raises(FileExistsError):
        store.create(BASELINE.session, BASELINE)
    assert store.list() == [BASELINE.session]


@pytest.mark.parametrize("bad", ["../../etc", "chat-abcdefgh/../x", "chat-abcdefgh\n", "x"])
def test_path_tricks_never_touch_the_disk(short_dir: Path, bad: str) -> None:
    store = SessionStore(short_dir / "sessions")
    with pytest.raises(proto.BadSessionId):
        store.create(bad, BASELINE)
    with pytest.raises(proto.BadSessionId):
        store.load(bad)
    assert not (short_dir / "sessions").exists() or list((short_dir / "sessions").iterdir()) == []


def test_torn_last_line_is_kept_and_skipped_and_nothing_whole_is_lost(short_dir: Path) -> None:
    store = SessionStore(short_dir / "sessions")
    session = store.create(BASELINE.session, BASELINE)
    session.append(UserRecord(time="t1", content="one"))
    session.append(AssistantRecord(time="t2", content="two"))
    with open(session.log_path, "ab") as f:
        f.write(b'{"type":"user","time":"t3","cont')  # a crash mid-write
    resumed = store.load(BASELINE.session)
    assert [r.time for r in resumed.records] == ["t1", "t2"]
    resumed.append(UserRecord(time="t4", content="four"))
    again = store.load(BASELINE.session)
    assert [r.time for r in again.records] == ["t1", "t2", "t4"]
    lines = session.log_path.read_bytes().split(b"\n")
    assert lines[2] == b'{"type":"user","time":"t3","cont'  # the fragment is not rewritten
    assert json.loads(lines[3])["content"] == "four"


def test_taint_is_the_join_of_tool_results(short_dir: Path) -> None:
    store = SessionStore(short_dir / "sessions")
    session = store.create(BASELINE.session, BASELINE)
    assert session.taint() == Label(class_=Class.private, untrusted=False)  # the owner's words
    session.append(AssistantRecord(time="t", tool_calls=[ToolCall(id="1", name="x", arguments="")]))
    session.append(
        ToolResultRecord(
            time="t", call_id="1", name="x", content="", class_=Class.public, untrusted=True
        )
    )
    session.append(
        ToolResultRecord(
            time="t", call_id="2", name="y", content="", class_=Class.private, untrusted=False
        )
    )
    assert store.load(BASELINE.session).taint() == Label(class_=Class.private, untrusted=True)


def test_new_session_ids_are_valid_and_distinct() -> None:
    ids = {new_session_id() for _ in range(200)}
    assert len(ids) == 200
    for session in ids:
        assert proto.check_session_id(session) == session
        assert len(session) == len("chat-") + 26


@given(st.binary(max_size=300))
def test_load_never_crashes_on_damaged_logs(
    tmp_path_factory: pytest.TempPathFactory, garbage: bytes
) -> None:
    root = tmp_path_factory.mktemp("s")
    store = SessionStore(root)
    session = store.create(BASELINE.session, BASELINE)
    session.append(UserRecord(time="t1", content="whole"))
    with open(session.log_path, "ab") as f:
        f.write(garbage)
    loaded = store.load(BASELINE.session)
    assert loaded.records[0] == UserRecord(time="t1", content="whole")


def test_each_session_created_is_a_line_of_the_catalog(short_dir: Path) -> None:
    store = SessionStore(short_dir / "sessions")
    later = msgspec.structs.replace(
        BASELINE, session="chat-qrstuvwxyz234567", created="2026-12-01T00:00:00Z"
    )
    store.create(BASELINE.session, BASELINE, "bxctl")
    store.create(later.session, later)
    with pytest.raises(FileExistsError):
        store.create(BASELINE.session, BASELINE, "mattermost")  # refused: no second line
    assert _entries(store.root) == [
        proto.CatalogEntry(session=BASELINE.session, created=BASELINE.created, origin="bxctl"),
        proto.CatalogEntry(session=later.session, created=later.created),
    ]
    assert store.list() == [BASELINE.session, later.session]  # the catalog is no session


def test_each_record_is_first_a_line_of_the_journal_of_changes(short_dir: Path) -> None:
    store = SessionStore(short_dir / "sessions")
    session = store.create(BASELINE.session, BASELINE, "bxctl")
    start = proto.changes_since(store.root, None).place
    written: list[bool] = []
    real_append_line = proto.append_line

    def append_line(path: Path, line: bytes) -> object:
        journal = proto.changes_since(store.root, start).sessions
        written.append(
            journal == frozenset({BASELINE.session})
        )  # named before the record is written
        return real_append_line(path, line)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proto, "append_line", append_line)
        session.append(UserRecord(time="t1", content="one"))
    assert written == [True]
    assert proto.changes_since(store.root, start).sessions == frozenset({BASELINE.session})


def _entries(root: Path) -> list[proto.CatalogEntry]:
    read = proto.read_catalog(root)
    return [] if read is None else read.entries


@pytest.mark.parametrize("crashed_after", ["baseline", "log", "folder", "nothing"])
def test_a_session_taken_back_is_written_again_whatever_a_crash_left_of_its_folder(
    short_dir: Path, crashed_after: str
) -> None:
    # `unwrite` removes the baseline, the log, the folder, then the catalog line; a crash
    # after any step leaves what the next `write` of the same id clears or skips.
    store = SessionStore(short_dir / "sessions")
    session = store.create(BASELINE.session, BASELINE, "bxctl")
    session.append(UserRecord(time="t1", content="far too long"))
    directory = store.directory(BASELINE.session)
    if crashed_after == "nothing":
        store.unwrite(session)
    else:
        (directory / proto.BASELINE_FILE).unlink()
        if crashed_after in ("log", "folder"):
            (directory / proto.LOG_FILE).unlink()
        if crashed_after == "folder":
            directory.rmdir()
    again = store.begin(BASELINE.session, BASELINE, "bxctl")
    store.write(again)
    again.append(UserRecord(time="t2", content="short"))
    loaded = store.load(BASELINE.session)
    assert loaded.records == [UserRecord(time="t2", content="short")]
    lines = [e.session for e in _entries(store.root)]
    assert lines.count(BASELINE.session) == (1 if crashed_after == "nothing" else 2)
