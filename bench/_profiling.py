"""Each role's Python profile per turn, for `just bench turn --profile`.

The roles run as `bxctl up` starts them; with `$BENCH_PROFILE_DIR` set, a `sitecustomize`
on their `PYTHONPATH` (`site_dir`) calls `install`, which gives a role one cProfile per
kind of turn: SIGUSR1 starts the profile named in `{dir}/kind`, SIGUSR2 stops every
profile, and each is written to `{dir}/{role}-{kind}.prof` when the role exits. The bench
starts and stops them around each measured turn, so a profile holds those turns only.

Times are the main thread's CPU time (`time.thread_time`), not wall time: a send that
wakes the peer (and is preempted by it on a busy machine) would otherwise be charged the
peer's work. cProfile sees the main thread only (the event loop: every coroutine, httpx,
the frames); work sent to a worker thread (a session-log append and its fsync) is not in
it. It costs each Python call a few hundred ns, so a role's times under it are inflated,
most where the calls are smallest: read the table for where the time goes, and the
bench's figures without `--profile` for how much there is.
"""

from __future__ import annotations

import atexit
import cProfile
import os
import pstats
import signal
import sys
import time
from pathlib import Path
from types import FrameType

ENV = "BENCH_PROFILE_DIR"
ROLES = ("loopd", "brokerd", "memoryd")


def install() -> None:
    """In a role started with `$BENCH_PROFILE_DIR`, profile on the bench's signals."""
    directory = os.environ.get(ENV)
    argv = sys.orig_argv
    if not directory or len(argv) < 3 or argv[1] != "-m" or argv[2] not in ROLES:
        return
    role = argv[2]
    profiles: dict[str, cProfile.Profile] = {}

    def start(signum: int, frame: FrameType | None) -> None:
        kind = Path(directory, "kind").read_text().strip()
        profiles.setdefault(kind, cProfile.Profile(time.thread_time)).enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        for profile in profiles.values():
            profile.disable()

    def dump() -> None:
        for kind, profile in profiles.items():
            profile.disable()
            profile.dump_stats(Path(directory, f"{role}-{kind}.prof"))

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    atexit.register(dump)


def site_dir(directory: Path) -> str:
    """A `PYTHONPATH` for the roles that installs the hook (a `sitecustomize` and the bench)."""
    site = directory / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import bench._profiling\nbench._profiling.install()\n")
    root = Path(__file__).resolve().parent.parent
    return os.pathsep.join([str(site), str(root), os.environ.get("PYTHONPATH", "")])


def begin(directory: Path, kind: str, pids: dict[str, int]) -> None:
    """Start each role's profile of `kind` (before a measured turn)."""
    Path(directory, "kind").write_text(kind)
    for pid in pids.values():
        os.kill(pid, signal.SIGUSR1)


def end(pids: dict[str, int]) -> None:
    """Stop each role's profile (after the turn)."""
    for pid in pids.values():
        os.kill(pid, signal.SIGUSR2)


_WAITING = {"<method 'poll' of 'select.epoll' objects>", "get_events", "_epoll_wait"}
"""The event loop waiting for something to happen: idle, not work."""


def _where(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name  # a builtin: `<method 'send' of '_socket.socket' objects>`
    parts = Path(filename).parts
    for anchor in ("site-packages", "src", "lib"):
        if anchor in parts:
            parts = parts[len(parts) - parts[::-1].index(anchor) :]
            break
    return f"{name} ({'/'.join(parts[-2:])}:{line})"


def report(directory: Path, turns: dict[str, int], top: int) -> None:
    """Print each role's top functions per turn of each kind: by cumulative and own time."""
    print(
        f"profile (cProfile, main thread's CPU; ms per turn, inflated by the profiler): the top "
        f"{top} functions of each role by cumulative time, then by own time"
    )
    for kind, count in turns.items():
        for role in ROLES:
            path = directory / f"{role}-{kind}.prof"
            if not count or not path.exists():
                continue
            table = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
            rows: list[tuple[float, float, float, str, bool]] = [
                (
                    calls / count,
                    own * 1000 / count,
                    cumulative * 1000 / count,
                    _where(key),
                    key[0] == "~" or "/trio/" in key[0],
                )
                for key, (_, calls, own, cumulative, _) in table.items()
                if key[2] not in _WAITING and not key[0].endswith("_profiling.py")
            ]
            total = sum(row[1] for row in rows)
            print(f"  {role}, {kind} turn ({count} turns; {total:.2f} ms of own time per turn)")
            print(
                f"    {'calls':>7} {'own':>6} {'cum':>6}  by cumulative time (trio's loop left out)"
            )
            ours = sorted((row for row in rows if not row[4]), key=lambda row: -row[2])
            for calls, own, cumulative, where, _ in ours[:top]:
                print(f"    {calls:7.1f} {own:6.2f} {cumulative:6.2f}  {where}")
            print(f"    {'calls':>7} {'own':>6} {'cum':>6}  by own time")
            for calls, own, cumulative, where, _ in sorted(rows, key=lambda row: -row[1])[:top]:
                print(f"    {calls:7.1f} {own:6.2f} {cumulative:6.2f}  {where}")
