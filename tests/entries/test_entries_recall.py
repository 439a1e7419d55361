"""A recall hit's address (`at_text`, `parse_at`) and the part that names an archived entry."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import proto
from entries import ARCHIVE_PART_CHARS, archive_part, at_text, minute, parse_at, said_by

NUMBERS = st.integers(min_value=0, max_value=999_999_999)


def source(epoch: int | None, record: int) -> proto.HitSource:
    return proto.HitSource(
        kind="session",
        session="chat-k6m5ert76psohrmw5uwb2ibpb4",
        epoch=epoch,
        record=record,
        time="2026-09-20T14:02:11Z",
        role="user",
        class_="private",
        untrusted=False,
    )


@given(epoch=st.none() | NUMBERS, record=NUMBERS)
def test_every_address_printed_reads_back_as_the_same_record(
    epoch: int | None, record: int
) -> None:
    printed = at_text(source(epoch, record))
    assert parse_at(printed) == (epoch or 0, record)
    assert (":" in printed) == bool(epoch)  # epoch 0, every session today: the record alone


@given(text=st.text(st.sampled_from("0123456789: -+x٣\n\t"), max_size=24) | st.text(max_size=24))
@example(text="12")
@example(text=" 2:12 ")
@example(text="007")
@example(text="1234567890")
@example(text="٣")
@example(text="1:")
@example(text=":1")
def test_parse_at_reads_ascii_numbers_or_says_what_it_takes(text: str) -> None:
    if re.fullmatch(r"([0-9]{1,9}:)?[0-9]{1,9}", text.strip(), re.ASCII) is None:
        with pytest.raises(ValueError, match=r"RECORD \(such as 12\) or EPOCH:RECORD"):
            parse_at(text)
        return
    epoch, record = parse_at(text)
    digits = text.strip().split(":")
    assert [int(part) for part in digits] == ([epoch, record] if len(digits) == 2 else [record])
    assert epoch == 0 or len(digits) == 2
    assert parse_at(at_text(source(epoch, record))) == (epoch, record)


WORDS = st.text(
    st.characters(exclude_categories=["Z", "Cc", "Cs"], exclude_characters="…"),
    min_size=1,
    max_size=12,
)
"""Words as a snippet holds them: whitespace folded to single spaces between them."""


@given(
    words=st.lists(WORDS, min_size=1, max_size=30),
    cut_start=st.booleans(),
    cut_end=st.booleans(),
)
def test_an_archive_part_is_whole_words_of_the_snippet(
    words: list[str], cut_start: bool, cut_end: bool
) -> None:
    text = " ".join(words)
    snippet = ("…" if cut_start else "") + text + ("…" if cut_end else "")
    part = archive_part(snippet)
    assert part
    assert part in text
    assert len(part) <= ARCHIVE_PART_CHARS
    assert part == part.strip()
    if len(words) > 1 and len(words[0]) <= ARCHIVE_PART_CHARS:
        start = words[1] if cut_start else words[0]
        assert part.startswith(start) or len(start) > ARCHIVE_PART_CHARS


@pytest.mark.parametrize(
    ("time", "shown"),
    [
        ("2026-09-20T14:02:11Z", "2026-09-20 14:02 UTC"),
        ("2026-09-24T20:14Z", "2026-09-24 20:14 UTC"),
        ("later", "later"),
    ],
)
def test_minute(time: str, shown: str) -> None:
    assert minute(time) == shown


def test_said_by() -> None:
    assert [said_by(r) for r in ("user", "assistant", "tool_call", "other")] == [
        "the owner said",
        "the assistant said",
        "the assistant called",
        "other",
    ]
