"""The journal of changes (`proto._changes`): a reader's place gives exactly what was written
after it, and a journal that cannot say so says it cannot."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import proto
from proto import _changes

SESSIONS = st.lists(st.from_regex(r"\A(chat|mm)-[a-z0-9]{8,12}\Z"), max_size=30)


@given(before=SESSIONS, after=SESSIONS)
def test_a_place_gives_the_sessions_written_after_it(before: list[str], after: list[str]) -> None:
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        start = proto.changes_since(root, None).place
        for session in before:
            proto.note_change(root, session)
        middle = proto.changes_since(root, start)
        assert middle.sessions == frozenset(before)
        for session in after:
            proto.note_change(root, session)
        assert proto.changes_since(root, middle.place).sessions == frozenset(after)
        assert proto.changes_since(root, None).sessions is None, "no place: it cannot say"


def test_a_line_being_written_is_read_next_time(tmp_path: Path) -> None:
    proto.note_change(tmp_path, "chat-aaaaaaaaaa")
    place = proto.changes_since(tmp_path, proto.NO_JOURNAL).place
    with (tmp_path / proto.CHANGES_FILE).open("ab") as f:
        f.write(b"chat-bbbb")  # torn: its writer is still at it
    torn = proto.changes_since(tmp_path, place)
    assert torn.sessions == frozenset()
    assert torn.place == place
    with (tmp_path / proto.CHANGES_FILE).open("ab") as f:
        f.write(b"bbbbbb\n")
    assert proto.changes_since(tmp_path, place).sessions == frozenset({"chat-bbbbbbbbbb"})


@given(garbage=st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b))
def test_a_damaged_line_means_it_cannot_say(garbage: bytes) -> None:
    with tempfile.TemporaryDirectory() as name:
        root = Path(name)
        proto.note_change(root, "chat-aaaaaaaaaa")
        place = proto.changes_since(root, proto.NO_JOURNAL).place
        with (root / proto.CHANGES_FILE).open("ab") as f:
            f.write(garbage + b"\n")
        proto.note_change(root, "chat-bbbbbbbbbb")
        found = proto.changes_since(root, place)
        if proto.is_session_id(garbage.decode("ascii", "replace")):
            assert found.sessions is not None
        else:
            assert found.sessions is None


def test_a_journal_started_anew_or_removed_cannot_say(tmp_path: Path) -> None:
    proto.note_change(tmp_path, "chat-aaaaaaaaaa")
    place = proto.changes_since(tmp_path, proto.NO_JOURNAL).place
    (tmp_path / proto.CHANGES_FILE).unlink()
    assert proto.changes_since(tmp_path, place).sessions is None
    proto.note_change(tmp_path, "chat-bbbbbbbbbb")  # a new journal, another id
    anew = proto.changes_since(tmp_path, place)
    assert anew.sessions is None
    assert anew.place.journal != place.journal
    assert proto.changes_since(tmp_path, anew.place).sessions == frozenset()


def test_a_reader_that_found_no_journal_reads_all_of_the_next(tmp_path: Path) -> None:
    assert proto.changes_since(tmp_path, proto.NO_JOURNAL).sessions == frozenset()
    proto.note_change(tmp_path, "chat-aaaaaaaaaa")
    assert proto.changes_since(tmp_path, proto.NO_JOURNAL).sessions == frozenset(
        {"chat-aaaaaaaaaa"}
    )


def test_a_journal_over_its_limit_is_started_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_changes, "LIMIT", 100)
    proto.note_change(tmp_path, "chat-aaaaaaaaaa")
    place = proto.changes_since(tmp_path, proto.NO_JOURNAL).place
    for _ in range(5):
        proto.note_change(tmp_path, "chat-bbbbbbbbbb")
    assert (tmp_path / proto.CHANGES_FILE).stat().st_size <= 100
    assert proto.changes_since(tmp_path, place).sessions is None


def test_a_damaged_header_keeps_no_place(tmp_path: Path) -> None:
    (tmp_path / proto.CHANGES_FILE).write_bytes(b"not a header\nchat-aaaaaaaaaa\n")
    found = proto.changes_since(tmp_path, proto.NO_JOURNAL)
    assert found.sessions is None
    assert proto.changes_since(tmp_path, found.place).sessions is None
