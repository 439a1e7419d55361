"""Hostile grant files are listed grant problems; brokerd starts and serves the rest.

A grant file is the owner's, but anything may end up in `grants/` (a bad copy, a
download, a disk error). Whatever one file holds, loading it fails for that file only.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from brokerd_harness import BrokerdHome, grant, request

from brokerd._grants import MAX_GRANT_BYTES, load_grants
from proto import Grants, GrantsList

DEEP_ARRAY = b"tool = " + b"[" * 600 + b"]" * 600 + b"\n"
DEEP_TABLE = b"tool = " + b"{a = " * 600 + b"1" + b"}" * 600 + b"\n"
GARBAGE = bytes(range(256)) * 16 + os.urandom(4096)
INVALID_UTF8 = (
    grant("list_dir", "auto").encode() + b'# caf\xe9 \xff\xfe\n[constraints]\npaths = ["/x"]\n'
)

HOSTILE: dict[str, bytes] = {
    "deep-array": DEEP_ARRAY,
    "deep-table": DEEP_TABLE,
    "deep-dotted": b"[" + b".".join(b"a" for _ in range(600)) + b"]\nx = 1\n",
    "garbage": GARBAGE,
    "invalid-utf8": INVALID_UTF8,
    "nul": b'tool = "list_dir"\x00\nmode = "auto"\n',
    "huge": b"# padding\n" * (MAX_GRANT_BYTES // 10 + 1) + grant("shell", "auto").encode(),
}


def notes_grant(folder: Path) -> str:
    return grant("list_dir", "auto", extra=f'[constraints]\npaths = ["{folder}/**"]\n')


@pytest.mark.parametrize("name", list(HOSTILE))
def test_each_hostile_file_is_a_problem_of_its_own(tmp_path: Path, name: str) -> None:
    (tmp_path / f"{name}.toml").write_bytes(HOSTILE[name])
    (tmp_path / "notes.toml").write_text(notes_grant(tmp_path))
    loaded = load_grants(tmp_path)
    assert [p.file for p in loaded.problems] == [f"{name}.toml"]
    assert [g.name for g in loaded.find("list_dir")] == ["notes"]


def test_the_messages_say_what_is_wrong(tmp_path: Path) -> None:
    for name, data in HOSTILE.items():
        (tmp_path / f"{name}.toml").write_bytes(data)
    said = {p.file: p.message for p in load_grants(tmp_path).problems}
    assert said["deep-array.toml"] == "nested too deeply to parse"
    assert said["huge.toml"] == "larger than 64 KiB; a grant file is a few lines"
    assert "utf-8" in said["invalid-utf8.toml"].lower()


def test_an_unexpected_failure_is_the_file_s_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any exception but cancellation, from any part of loading, stays with its file."""
    from brokerd import _grants

    real = _grants.parse_grant

    def parse(name: str, data: bytes, *, builtin: bool = False) -> _grants.Grant:
        if name == "bad":
            raise LookupError("a bug in a parser")
        return real(name, data, builtin=builtin)

    monkeypatch.setattr(_grants, "parse_grant", parse)
    (tmp_path / "bad.toml").write_text(grant("shell", "auto"))
    (tmp_path / "notes.toml").write_text(notes_grant(tmp_path))
    loaded = _grants.load_grants(tmp_path)
    assert [(p.file, p.message) for p in loaded.problems] == [
        ("bad.toml", "cannot be loaded (LookupError: a bug in a parser)")
    ]
    assert [g.name for g in loaded.find("list_dir")] == ["notes"]


async def test_brokerd_starts_lists_them_and_serves_the_rest(broker_home: BrokerdHome) -> None:
    notes = broker_home.base / "notes"
    notes.mkdir()
    for name, data in HOSTILE.items():
        broker_home.write_grant(name, data)
    broker_home.write_grant("notes", notes_grant(notes))
    running = broker_home.start()
    assert running.ready is not None
    assert f"{len(HOSTILE)} grant problems" in running.ready
    listed = await broker_home.owner(GrantsList(), Grants)
    assert sorted(p.file for p in listed.problems) == sorted(f"{n}.toml" for n in HOSTILE)
    assert "notes" in [g.name for g in listed.grants]
    reply = await broker_home.answer(request("list_dir", {"path": str(notes)}))
    assert (reply.status, reply.content) == ("ok", f"{notes}: empty")
    log = broker_home.stop().log
    assert "Traceback" not in log
    for name in HOSTILE:
        assert f"grant {name}.toml not loaded: " in log
