"""proto's durable writes: whole lines appended, a torn line ended, never rewritten."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import proto


def test_lines_are_appended_whole_and_the_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    proto.append_line(path, b'{"a":1}')
    proto.append_line(path, b'{"a":2}\n')
    assert path.read_bytes() == b'{"a":1}\n{"a":2}\n'
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_torn_line_is_ended_first_and_never_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2, "tor')  # a writer killed mid-line
    proto.append_line(path, b'{"a":3}')
    assert path.read_bytes() == b'{"a":1}\n{"a":2, "tor\n{"a":3}\n'
    reader: proto.JsonLines[dict[str, int]] = proto.JsonLines(dict[str, int])
    read = reader.read(path)
    assert read.records == [{"a": 1}, {"a": 3}]
    assert [line.raw for line in read.skipped] == [b'{"a":2, "tor']


def test_a_short_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "log.jsonl"
    proto.append_line(path, b'{"a":1}')
    real_write = os.write

    def short(fd: int, data: bytes) -> int:
        return real_write(fd, data[:3])

    monkeypatch.setattr(os, "write", short)
    with pytest.raises(OSError, match="short write"):
        proto.append_line(path, b'{"a":2}')
    assert path.read_bytes() == b'{"a":1}\n'


def test_a_failed_fsync_leaves_the_error_to_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="I/O error"):
        proto.append_line(tmp_path / "log.jsonl", b"{}")


def test_a_whole_file_is_replaced_atomically(tmp_path: Path) -> None:
    path = tmp_path / "memory.md"
    path.write_bytes(b"old")
    proto.write_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["memory.md"]
