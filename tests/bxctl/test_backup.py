"""`bxctl backup`: what it refuses, what it leaves out, and how it cuts a log being written."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bxctl import app
from bxctl._backup import _copy_file, _rank
from bxctl._common import CommandError
from bxctl._init import init_home


def backup(*argv: str) -> object:
    return app(["backup", *argv], result_action="return_value")


def test_a_home_is_copied_without_its_sockets_and_with_its_modes(short_dir: Path) -> None:
    home = short_dir / "home"
    init_home(home, model_url="http://127.0.0.1:9/v1", model="m")
    (home / "run" / "owner-loop").mkdir(parents=True)
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(home / "run" / "owner-loop" / "chat.sock"))
        (home / "sessions" / "chat-a").mkdir(parents=True, mode=0o700)
        (home / "sessions" / "chat-a" / "0.jsonl").write_bytes(b'{"a":1}\n{"b":')
        assert backup(str(short_dir / "copy"), "--home", str(home)) == 0
    copy = short_dir / "copy"
    assert not (copy / "run").exists()
    assert (copy / "sessions" / "chat-a" / "0.jsonl").read_bytes() == b'{"a":1}\n'
    assert (copy / "config" / "loopd.toml").stat().st_mode & 0o777 == 0o600
    assert 'home = ".."' in (copy / "config" / "memoryd.toml").read_text()
    assert str(home) not in (copy / "config" / "loopd.toml").read_text()
    assert not list(short_dir.glob(".copy.*"))  # no half-made copy left beside it


def test_a_destination_that_exists_or_lies_inside_the_home_is_refused(short_dir: Path) -> None:
    home = short_dir / "home"
    init_home(home, model_url="http://127.0.0.1:9/v1", model="m")
    (short_dir / "taken").mkdir()
    for dest, problem in ((short_dir / "taken", "exists already"), (home / "b", "inside")):
        with pytest.raises(CommandError, match=problem):
            backup(str(dest), "--home", str(home))
    assert not (home / "b").exists()


def test_the_index_comes_first_and_the_audit_head_before_its_months() -> None:
    order = sorted(
        map(
            Path,
            [
                "sessions/chat-a/0.jsonl",
                "sessions/chat-a/0.baseline.json",
                "audit/2026-12.jsonl",
                "audit/head",
                "memory/archive.md",
                "memory/memory.md",
                "memory/edits/2026-12.jsonl",
                "index/memory.sqlite3",
            ],
        ),
        key=_rank,
    )
    assert [str(p) for p in order] == [
        "index/memory.sqlite3",
        "audit/head",
        "audit/2026-12.jsonl",
        "memory/edits/2026-12.jsonl",
        "memory/memory.md",
        "memory/archive.md",
        "sessions/chat-a/0.baseline.json",
        "sessions/chat-a/0.jsonl",
    ]


@given(st.binary(max_size=300), st.booleans())
def test_a_log_is_cut_after_its_last_whole_line(data: bytes, whole_lines: bool) -> None:
    with tempfile.TemporaryDirectory() as directory:
        source, target = Path(directory, "log"), Path(directory, "copy")
        source.write_bytes(data)
        written = _copy_file(source, target, whole_lines=whole_lines)
        expected = data[: data.rfind(b"\n") + 1] if whole_lines else data
        assert target.read_bytes() == expected
        assert written == len(expected)
