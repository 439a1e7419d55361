"""archive.md's records: written by `archive_record`, read by `parse_archive`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entries import (
    ARCHIVE_HEADER_PATTERN,
    ArchiveEntry,
    archive_record,
    is_archive_header,
    parse_archive,
)

SESSION = "mm-y73sxj3popgwumyccptb56p1ah"
HEADER = f"§ moved 2026-09-24T20:14Z from memory.md in session {SESSION}"

_CHAR = st.one_of(
    st.sampled_from("aé\u0301中🙂 \t\u00a0\u2028§"),
    st.characters(codec="utf-8", exclude_characters="\r\n"),
)
_LINE = st.one_of(st.text(_CHAR, max_size=16), st.sampled_from(["§§", "§ moved", "a § b"]))


def _valid(entry: str) -> bool:
    return (
        bool(entry)
        and not any(line.strip() == "§" for line in entry.split("\n"))
        and not any(line.startswith("§ moved 2") for line in entry.split("\n"))
    )


ENTRY = st.lists(_LINE, min_size=1, max_size=3).map(lambda ls: "\n".join(ls).strip()).filter(_valid)
SESSIONS = st.from_regex(r"\A[a-z]{2,8}-[a-z0-9]{8,64}\Z")
MOMENTS = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
RECORDS = st.lists(
    st.tuples(ENTRY, st.sampled_from(["memory.md", "user.md"]), SESSIONS, MOMENTS), max_size=5
)


def test_record() -> None:
    moved_at = datetime(2026, 9, 24, 20, 14, 59, 999999, tzinfo=UTC)
    record = archive_record(
        "Owner prefers answers in UTC.", name="memory.md", session=SESSION, moved_at=moved_at
    )
    assert record == f"{HEADER}\nOwner prefers answers in UTC.\n"


def test_record_converts_to_utc() -> None:
    moved_at = datetime(2026, 9, 25, 1, 44, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    record = archive_record("a\nb", name="user.md", session=SESSION, moved_at=moved_at)
    assert record == f"§ moved 2026-09-24T20:14Z from user.md in session {SESSION}\na\nb\n"


def test_record_refuses_a_naive_time() -> None:
    with pytest.raises(
        ValueError, match="moved_at must be timezone-aware, got naive 2026-09-24T20:14:00"
    ):
        archive_record(
            "a", name="memory.md", session=SESSION, moved_at=datetime(2026, 9, 24, 20, 14)
        )


@pytest.mark.parametrize(
    ("entry", "name", "session", "message"),
    [
        ("a", "soul.md", SESSION, "bad archive source 'soul.md'"),
        ("a", "memory.md", "MM-1", "bad session id 'MM-1'"),
        (" a", "memory.md", SESSION, 'not an entry: " a"'),
        ("a\n§\nb", "memory.md", SESSION, "not an entry"),
        ("", "memory.md", SESSION, "not an entry"),
        (f"a\n{HEADER}", "memory.md", SESSION, "has a line that reads as a header"),
    ],
)
def test_record_refuses_bad_values(entry: str, name: str, session: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        archive_record(entry, name=name, session=session, moved_at=datetime.now(UTC))


def test_parse_two_records() -> None:
    text = (
        f"{HEADER}\nfirst\n"
        + "§ moved 2026-09-25T08:00Z from user.md in session chat-12345678\nsecond\nline\n"
    )
    assert parse_archive(text) == (
        [
            ArchiveEntry(
                moved_at="2026-09-24T20:14Z", name="memory.md", session=SESSION, text="first"
            ),
            ArchiveEntry(
                moved_at="2026-09-25T08:00Z",
                name="user.md",
                session="chat-12345678",
                text="second\nline",
            ),
        ],
        [],
    )


def test_parse_crlf_and_skipped_pieces() -> None:
    text = f"notes by hand\r\n\r\n{HEADER}\r\n\r\n{HEADER}\r\n  kept  \r\n\r\n"
    entries, problems = parse_archive(text)
    assert [e.text for e in entries] == ["kept"]
    assert problems == [
        "archive.md line 1: text before the first record was skipped.",
        "archive.md line 3: a record with no entry was skipped.",
    ]


def test_parse_empty_archive() -> None:
    assert parse_archive("") == ([], [])
    assert parse_archive("\n  \n") == ([], [])


@pytest.mark.parametrize(
    "line",
    [
        f" {HEADER}",
        f"{HEADER} ",
        HEADER.replace("memory.md", "soul.md"),
        HEADER.replace("20:14Z", "20:14:00Z"),
        HEADER.replace("2026", "\uff12\uff10\uff12\uff16"),
        HEADER.replace(SESSION, "mm-short"),
        HEADER.replace("mm-", "MM-"),
    ],
)
def test_not_a_header(line: str) -> None:
    assert not is_archive_header(line)
    assert parse_archive(f"{line}\nx") == (
        [],
        ["archive.md line 1: text before the first record was skipped."],
    )


@given(RECORDS)
def test_records_round_trip(records: list[tuple[str, str, str, datetime]]) -> None:
    text = "".join(
        archive_record(entry, name=name, session=session, moved_at=moved_at)
        for entry, name, session, moved_at in records
    )
    assert parse_archive(text) == (
        [
            ArchiveEntry(
                moved_at=moved_at.strftime("%Y-%m-%dT%H:%MZ"),
                name=name,
                session=session,
                text=entry,
            )
            for entry, name, session, moved_at in records
        ],
        [],
    )


@given(
    st.lists(
        st.one_of(_CHAR, st.sampled_from(["\n", "\r\n", "\r", f"\n{HEADER}\n"])), max_size=80
    ).map("".join)
)
def test_parse_any_text(text: str) -> None:
    entries, problems = parse_archive(text)
    headers = sum(
        1
        for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if is_archive_header(line)
    )
    assert len(entries) <= headers
    assert all(e.text and e.text == e.text.strip() for e in entries)
    assert len(problems) <= headers + 1 - len(entries)


@given(
    SESSIONS,
    st.sampled_from(["memory", "user", "soul"]),
    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z?\Z"),
)
def test_header_pattern(session: str, file: str, stamp: str) -> None:
    line = f"§ moved {stamp} from {file}.md in session {session}"
    assert is_archive_header(line) == (re.search(ARCHIVE_HEADER_PATTERN, line) is not None)
    assert is_archive_header(line) == (file != "soul" and stamp.endswith("Z"))
