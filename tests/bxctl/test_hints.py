"""The commands bxctl prints work in the owner's shell: `uv run bxctl` unless bxctl is on PATH."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bxctl import _common
from bxctl._chat import resume_hint
from bxctl._common import bxctl, program


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_common, "_given_home", None)  # no --home from an earlier test
    program.cache_clear()
    yield
    program.cache_clear()


def shell(monkeypatch: pytest.MonkeyPatch, *path: Path, uv_run: bool = False) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join(str(p) for p in path))
    if uv_run:
        monkeypatch.setenv("UV_RUN_RECURSION_DEPTH", "1")
        monkeypatch.setenv("VIRTUAL_ENV", str(Path(sys.executable).parent.parent))
    else:
        monkeypatch.delenv("UV_RUN_RECURSION_DEPTH", raising=False)


def test_a_fresh_shell_without_bxctl_gets_uv_run(monkeypatch: pytest.MonkeyPatch) -> None:
    shell(monkeypatch, Path("/usr/bin"), Path("/bin"))
    assert bxctl("sessions list") == "uv run bxctl sessions list"
    assert (
        resume_hint("chat-abc", None)
        == "to go on with this session: uv run bxctl chat --session chat-abc"
    )


def test_uv_runs_own_path_is_not_the_shells(monkeypatch: pytest.MonkeyPatch) -> None:
    shell(monkeypatch, Path(sys.executable).parent, Path("/usr/bin"), uv_run=True)
    assert program() == "uv run bxctl"


def test_this_bxctl_on_path_is_named_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    shell(monkeypatch, Path(sys.executable).parent, Path("/usr/bin"))  # an activated venv
    assert bxctl("up") == "bxctl up"


def test_another_bxctl_on_path_is_not_this_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = tmp_path / "bxctl"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    shell(monkeypatch, tmp_path)
    assert program() == "uv run bxctl"
