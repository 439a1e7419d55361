"""bxctl up's supervision: a role that dies is started again, one that keeps dying stops all."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from bxctl import _up
from bxctl._common import CommandError

CAP_S = 30


async def child(nursery: trio.Nursery, code: str, role: str = "brokerd") -> _up._Child:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    made = _up._Child(role, process, None, stop_deadline_s=5)
    nursery.start_soon(_up._pump_logs, made)
    nursery.start_soon(_up._watch_exit, made)
    return made


DIES = (
    "import sys; print('brokerd: ERROR brokerd: the disk is on fire', file=sys.stderr); sys.exit(3)"
)
LIVES = "import time; time.sleep(60)"


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_up, "FIRST_PAUSE_S", 0.01)
    monkeypatch.setattr(_up, "LONGEST_PAUSE_S", 0.05)


async def test_a_role_that_keeps_dying_stops_boxmaker_with_its_own_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            children = [await child(nursery, DIES)]
            starts = 0

            async def again() -> _up._Child:
                nonlocal starts
                starts += 1
                return await child(nursery, DIES)

            code = await _up._supervise(children, [again], _never_signals())
            nursery.cancel_scope.cancel()
    assert code == 1
    assert starts == _up.RESTART_LIMIT - 1
    err = capsys.readouterr().err
    assert "brokerd exited with code 3 (brokerd: ERROR brokerd: the disk is on fire)" in err
    assert f"it died {_up.RESTART_LIMIT} times in a row within 10 s of starting" in err


async def test_a_role_that_dies_once_is_back(capsys: pytest.CaptureFixture[str]) -> None:
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            children = [await child(nursery, DIES)]
            started = trio.Event()

            async def again() -> _up._Child:
                started.set()
                return await child(nursery, LIVES)

            signals = trio.open_memory_channel[int](1)

            async def stop_when_back() -> None:
                await started.wait()
                await trio.sleep(0.2)
                await signals[0].send(2)

            nursery.start_soon(stop_when_back)
            code = await _up._supervise(children, [again], signals[1])
            await _up._stop(children)
            nursery.cancel_scope.cancel()
    assert code == 0
    err = capsys.readouterr().err
    assert "starting it again in 0.01 s" in err
    assert "brokerd is back" in err


def _never_signals() -> AsyncIterator[int]:
    _, receive = trio.open_memory_channel[int](0)
    return receive


def test_the_stop_deadline_is_the_drain_and_a_margin(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "loopd.toml").write_text("[sockets]\ndrain_s = 7.5\n")
    assert _up._stop_deadline(tmp_path, "loopd") == 7.5 + _up.STOP_MARGIN_S
    assert _up._stop_deadline(tmp_path, "memoryd") == 20 + _up.STOP_MARGIN_S


async def test_a_role_killed_by_a_signal_is_told_so_not_by_an_error_it_survived() -> None:
    # memoryd logs a handled error (a damaged index), runs on, and is later killed
    # (SIGBUS, when its index's shared memory file is cut): the signal is why it ended.
    code = (
        "import os, signal, sys; "
        "print('memoryd: ERROR memoryd.index: searching failed (runbook: x)', file=sys.stderr); "
        "print('memoryd: INFO memoryd.index: built the index', file=sys.stderr); "
        "sys.stderr.flush(); os.kill(os.getpid(), signal.SIGBUS)"
    )
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            made = await child(nursery, code, role="memoryd")
            await made.exited.wait()
            nursery.cancel_scope.cancel()
    assert made.why() == "killed by SIGBUS"


async def test_the_pause_before_each_start_doubles_exactly_up_to_the_longest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            children = [await child(nursery, DIES)]

            async def again() -> _up._Child:
                return await child(nursery, DIES)

            assert await _up._supervise(children, [again], _never_signals()) == 1
            nursery.cancel_scope.cancel()
    err = capsys.readouterr().err
    pauses = [line.rsplit(" in ", 1)[1] for line in err.splitlines() if "starting it again" in line]
    # no jitter: the pause printed is the pause waited, and the same every run
    assert pauses == ["0.01 s", "0.02 s", "0.04 s", "0.05 s"]


async def test_a_role_that_ran_a_good_while_is_started_again_after_the_first_pause(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_up, "QUICK_DEATH_S", 0.2)
    dies_later = "import time, sys; time.sleep(0.3); sys.exit(3)"
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            children = [await child(nursery, DIES)]
            starts = 0
            signals = trio.open_memory_channel[int](1)

            async def again() -> _up._Child:
                nonlocal starts
                starts += 1
                if starts == 4:
                    await signals[0].send(2)
                # two quick deaths, then runs that last longer than QUICK_DEATH_S
                return await child(nursery, DIES if starts < 2 else dies_later)

            assert await _up._supervise(children, [again], signals[1]) == 0
            await _up._stop(children)
            nursery.cancel_scope.cancel()
    err = capsys.readouterr().err
    pauses = [line.rsplit(" in ", 1)[1] for line in err.splitlines() if "starting it again" in line]
    assert pauses[:4] == ["0.01 s", "0.02 s", "0.01 s", "0.01 s"]


async def test_a_role_that_never_says_ready_is_killed_named_and_reaped(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_up, "READY_DEADLINE_S", 0.5)
    (short_dir / "silent").mkdir()
    (short_dir / "silent" / "__main__.py").write_text("import time; time.sleep(60)\n")
    (short_dir / "config").mkdir()
    (short_dir / "config" / "loopd.toml").write_text("")
    # a role that starts but never says READY=1, under loopd's config
    monkeypatch.setattr(_up, "_config_path", lambda home, role: home / "config" / "loopd.toml")
    monkeypatch.setattr(_up, "_stop_deadline", lambda home, role: 5.0)
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            with pytest.raises(CommandError) as slow:
                await _up._start(
                    nursery, "silent", short_dir, short_dir, {"PYTHONPATH": str(short_dir)}
                )
            nursery.cancel_scope.cancel()
    assert str(slow.value) == "silent did not report ready within 0.5 s"
    pid = int(capsys.readouterr().err.split("started silent (pid ")[1].split(")")[0])
    with pytest.raises(ProcessLookupError):  # gone, not a zombie left for later
        os.kill(pid, 0)
