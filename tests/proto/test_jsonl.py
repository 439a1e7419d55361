"""`proto.JsonLines`: the one reader of every JSON-lines file boxmaker keeps."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

import proto


class Point(msgspec.Struct, frozen=True):
    x: int


POINTS: proto.JsonLines[Point] = proto.JsonLines(Point, max_line_bytes=40)
GOOD = st.integers(-(10**6), 10**6).map(lambda x: msgspec.json.encode(Point(x)))
BAD = st.binary(max_size=60).filter(lambda b: b"\n" not in b)


@contextmanager
def scratch(data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bxjsonl") as directory:
        path = Path(directory) / "f.jsonl"
        path.write_bytes(data)
        yield path


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.one_of(GOOD, BAD), max_size=10), tail=BAD)
def test_every_byte_is_a_record_a_skipped_line_or_the_torn_tail(
    lines: list[bytes], tail: bytes
) -> None:
    data = b"".join(line + b"\n" for line in lines) + tail
    with scratch(data) as path:
        read = POINTS.read(path)
    assert read.lines == len(lines)
    assert read.end + read.torn == len(data)
    assert read.torn == len(tail)
    assert len(read.records) + len(read.skipped) == len(lines)
    for line in read.skipped:
        assert line.record is None
        assert line.problem
    expected = []
    for raw in lines:
        try:
            expected.append(POINTS.decode(raw))
        except ValueError:
            continue
    assert read.records == expected
    assert (read.problems() is None) == (not read.skipped and not tail)


@settings(max_examples=100, deadline=None)
@given(lines=st.lists(st.one_of(GOOD, BAD), min_size=1, max_size=10), cut=st.integers(0, 9))
def test_reading_on_from_a_line_gives_the_rest(lines: list[bytes], cut: int) -> None:
    with scratch(b"".join(line + b"\n" for line in lines)) as path:
        everything = list(POINTS.lines(path))
        cut = min(cut, len(everything) - 1)
        start = everything[cut]
        rest = list(POINTS.lines(path, offset=start.start, number=start.number))
    assert rest == everything[cut:]


def test_an_over_long_line_is_skipped_and_the_next_one_read() -> None:
    long = b'{"x": ' + b"1" * 100 + b"}"
    with scratch(b'{"x":1}\n' + long + b'\n{"x":2}\n') as path:
        read = POINTS.read(path)
    assert read.records == [Point(1), Point(2)]
    [skipped] = read.skipped
    assert skipped.number == 2
    assert skipped.problem == "a line of more than 40 bytes"
    assert len(skipped.raw) == 40  # only its first bytes are held


def test_an_over_long_line_still_being_written_is_the_torn_tail() -> None:
    with scratch(b'{"x":1}\n' + b"1" * 100) as path:
        read = POINTS.read(path)
    assert read.records == [Point(1)]
    assert read.torn == 100
    assert read.problems() == f"{path}: ends in an unfinished line of 100 bytes"


def test_a_missing_file_reads_as_empty(tmp_path: Path) -> None:
    read = POINTS.read(tmp_path / "missing.jsonl")
    assert (read.records, read.skipped, read.lines, read.torn) == ([], [], 0, 0)


def test_a_deeply_nested_line_is_damage_not_a_crash() -> None:
    deep: proto.JsonLines[list[object]] = proto.JsonLines(list[object])
    with scratch(b"[" * 100_000 + b"]" * 100_000 + b"\n") as path:
        [line] = list(deep.lines(path))
    assert line.record is None
    assert line.problem
