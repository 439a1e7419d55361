"""`bxctl sessions list` and session resolving read loopd's catalog, not every folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from bxctl_run import write_session

import proto
from bxctl._app import app
from bxctl._common import CommandError
from bxctl._sessions import catalogued, resolve_session

LOG = b'{"type":"user","time":"2026-11-30T08:00:01Z","content":"hello"}\n'


def _made(home: Path, count: int, *, catalogue: bool) -> list[str]:
    """`count` sessions, one a day, oldest first (catalogued as loopd would, or not)."""
    (home / "config").mkdir(exist_ok=True)
    names = []
    for day in range(count):
        name = f"chat-{day:08d}"
        created = f"2026-01-{day + 1:02d}T00:00:00Z"
        write_session(home, name, created=created, log=LOG * (day + 1))
        if catalogue:
            proto.append_to_catalog(
                home / "sessions",
                proto.CatalogEntry(session=name, created=created, origin="bxctl"),
            )
        names.append(name)
    return names


def _listed(home: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    argv = ["sessions", "list", "--home", str(home), *args]
    assert app(argv, result_action="return_value") == 0
    return [line.split()[0] for line in capsys.readouterr().out.splitlines()]


def test_the_list_is_newest_first_in_pages(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = _made(short_dir, 7, catalogue=True)
    newest = names[::-1]
    assert _listed(short_dir, capsys) == newest
    argv = ["sessions", "list", "--home", str(short_dir), "--limit", "3"]
    assert app(argv, result_action="return_value") == 0
    shown = capsys.readouterr()
    assert [line.split()[0] for line in shown.out.splitlines()] == newest[:3]
    assert f"4 older: `bxctl sessions list --before {newest[2]}" in shown.err
    assert _listed(short_dir, capsys, "--limit", "3", "--before", newest[2]) == newest[3:6]
    assert _listed(short_dir, capsys, "--before", newest[5]) == newest[6:]
    argv = ["sessions", "list", "--home", str(short_dir), "--json", "--limit", "2"]
    assert app(argv, result_action="return_value") == 0
    assert [s["session"] for s in json.loads(capsys.readouterr().out)] == newest[:2]


def test_a_listed_session_shows_its_records_and_last_time(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _made(short_dir, 2, catalogue=True)
    assert app(["sessions", "list", "--home", str(short_dir)], result_action="return_value") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == [
        "chat-00000001",
        "created",
        "2026-01-02T00:00:00Z",
        "2",
        "records",
    ]
    assert lines[0].endswith("last 2026-11-30T08:00:01Z")


def test_a_home_without_a_catalog_is_listed_and_its_catalog_written_once(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = _made(short_dir, 4, catalogue=False)
    root = short_dir / "sessions"
    assert proto.read_catalog(root) is None
    assert _listed(short_dir, capsys) == names[::-1]
    assert {e.session for e in _entries(root)} == set(names)
    # Behind: a session made while the catalog was missing a line; it is found and added.
    write_session(short_dir, "chat-zzzzzzzz", created="2027-01-01T00:00:00Z")
    assert _listed(short_dir, capsys)[0] == "chat-zzzzzzzz"
    assert [e.session for e in _entries(root)][-1] == "chat-zzzzzzzz"
    # Complete now: a listing reads no baseline.
    os.chmod(root / names[0] / proto.BASELINE_FILE, 0)
    assert [e.session for e in catalogued(root)] == ["chat-zzzzzzzz", *names[::-1]]


def test_a_whole_id_is_resolved_without_listing_sessions(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = _made(short_dir, 3, catalogue=False)

    def listed(*args: object, **kwargs: object) -> None:
        raise AssertionError("sessions/ was listed")

    with monkeypatch.context() as patched:  # undone before the folder is removed
        patched.setattr(os, "listdir", listed)
        patched.setattr(os, "scandir", listed)
        patched.setattr(Path, "iterdir", listed)
        patched.setattr(Path, "glob", listed)
        assert resolve_session(short_dir, names[1]) == names[1]
        assert resolve_session(short_dir, names[1] + "…") == names[1]


def test_a_start_is_resolved_from_the_catalog_then_by_name(short_dir: Path) -> None:
    _made(short_dir, 2, catalogue=True)
    write_session(short_dir, "chat-abcdefgh")  # not in the catalog
    with pytest.raises(CommandError, match=r"start of 2 sessions"):
        resolve_session(short_dir, "chat-0000000")
    assert resolve_session(short_dir, "chat-00000001") == "chat-00000001"
    assert resolve_session(short_dir, "chat-abc") == "chat-abcdefgh"
    with pytest.raises(CommandError, match=r"no session chat-x in"):
        resolve_session(short_dir, "chat-x")


def test_a_completion_keeps_what_was_appended_and_writes_nothing_twice(short_dir: Path) -> None:
    root = short_dir / "sessions"
    root.mkdir()
    first, second = (
        proto.CatalogEntry(session=f"chat-{n:08d}", created=f"2026-01-0{n}T00:00:00Z")
        for n in (1, 2)
    )
    proto.append_to_catalog(root, first)
    proto.complete_catalog(root, [first, second])
    proto.complete_catalog(root, [second])
    assert _entries(root) == [first, second]


def test_a_torn_or_damaged_catalog_line_is_a_session_found_again(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = _made(short_dir, 3, catalogue=True)
    root = short_dir / "sessions"
    lines = (root / proto.CATALOG_FILE).read_bytes().splitlines(keepends=True)
    (root / proto.CATALOG_FILE).write_bytes(lines[0] + b"{not json\n" + lines[2][:-9])
    os.utime(root, ns=(0, 0))  # the folder unchanged since: only the catalog is damaged
    assert [e.session for e in _entries(root)] == [names[0]]
    assert _listed(short_dir, capsys) == names[::-1]
    assert [e.session for e in _entries(root)] == [names[0], *sorted(names[1:])]
    assert proto.read_catalog(root) == proto.CatalogRead(entries=_entries(root), damaged=False)


def _entries(root: Path) -> list[proto.CatalogEntry]:
    read = proto.read_catalog(root)
    return [] if read is None else read.entries


def test_a_session_with_two_catalog_lines_is_listed_once(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # loopd writes a session taken back again under its id; a crash in between leaves
    # the first line.
    (name,) = _made(short_dir, 1, catalogue=True)
    proto.append_to_catalog(
        short_dir / "sessions",
        proto.CatalogEntry(session=name, created="2026-02-01T00:00:00Z", origin="bxctl"),
    )
    assert _listed(short_dir, capsys) == [name]
