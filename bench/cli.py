"""How fast bxctl starts: whole processes, beside a bare `python -c pass` of the same run.

A home is made with `bxctl init`, `bxctl up` runs the roles (against a model address
nobody answers: these commands do not use the model), a session and an approval-free
recall index exist, and each command is run `--runs` times as its own process, after one
run that is not counted. Printed: median and max wall time, the bare interpreter's, the
issue's target (issue 22) and the load average when each figure was taken.

The processes run with bytecode caches, as an installed bxctl does: without
PYTHONDONTWRITEBYTECODE (which a development shell may set), so the uncounted run writes
any cache that is missing. With it set and no caches, every run compiles every module
again, and this bench would time the compiler (about 3x the figures).

    just bench cli [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import proto
from bench._up import bxctl_up

SESSIONS = 5

TARGETS_MS = {
    "--help": 100,
    "memory show": 300,
    "recall": 300,
    "approvals list": 300,
    "sessions list": 300,
}
COMMANDS = {
    "--help": ["--help"],
    "memory show": ["memory", "show"],
    "recall": ["recall", "Heron", "launch"],
    "approvals list": ["approvals", "list"],
    "sessions list": ["sessions", "list"],
}


def _time(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    times = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append((time.perf_counter() - started) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    return times[1:]  # the first run may write bytecode caches: not counted


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="just bench cli")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bxcli", dir="/tmp") as scratch:
        home = Path(scratch) / "home"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["BOXMAKER_HOME"] = str(home)
        bxctl = [sys.executable, "-m", "bxctl"]
        subprocess.run(
            [*bxctl, "init", "--model-url", "http://127.0.0.1:9/v1"],
            env=env,
            capture_output=True,
            check=True,
        )
        with bxctl_up(bxctl, env):
            for _ in range(SESSIONS):  # so that `sessions list` lists some
                proto.call_blocking(
                    proto.OWNER_LOOP.default_path(home),
                    proto.SessionOpen(origin="bench"),
                    proto.SessionOpened,
                    deadline_s=10,
                )
            bare = _time([sys.executable, "-c", "pass"], env, args.runs)
            print(f"bxctl, {args.runs} runs each, as whole processes ({_load()})")
            print(
                f"  {'python -c pass':<16} median {statistics.median(bare):6.0f} ms  "
                f"max {max(bare):6.0f} ms  {_load()}"
            )
            for name, command in COMMANDS.items():
                times = _time([*bxctl, *command], env, args.runs)
                median = statistics.median(times)
                target = TARGETS_MS.get(name)
                verdict = ""
                if target is not None:
                    verdict = f"  target ≤ {target} ms: {'holds' if median <= target else 'MISSED'}"
                print(
                    f"  {name:<16} median {median:6.0f} ms  max {max(times):6.0f} ms  "
                    f"{_load()}{verdict}"
                )
