"""bxctl up's supervision: a role that dies is started again, one that keeps dying stops all.

Most tests run fake roles and fake starters on trio's MockClock: a pause of 8 s takes no
time, and "again in 8 s" can be checked against when the start came. A few run real
processes, for what the supervisor reads of them (exit codes, error lines, READY=1).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import cast

import pytest
import trio
import trio.testing

from bxctl import _up
from bxctl._restarts import RESTART_LIMIT, FailedStart, RestartPolicy

CAP_S = 30
HOUR_S = 3600.0
"""The cap of a MockClock test, in the clock's time (the supervisor of issue 30 ran forever)."""
QUICK = RestartPolicy(first_pause_s=0.01, longest_pause_s=0.05)
"""Short pauses, for the tests on real processes (and the real clock)."""
DISK_ON_FIRE = "brokerd: ERROR brokerd: the disk is on fire"
DISK_FULL = "brokerd: ERROR brokerd: the disk is full"
STOPS = "boxmaker stops (its log above says why; docs/runbook.md has the entry it names)"
WAITS = "it waits for you to fix that, and is not started again until the next `bxctl up`"


# -- fakes: roles and starters on the MockClock ------------------------------------------


class Exits:
    """The part of a process the supervisor reads: its exit code, once it has one."""

    def __init__(self) -> None:
        self.returncode: int | None = None


def fake(
    nursery: trio.Nursery,
    *,
    runs_s: float = 0.0,
    code: int = 3,
    says: str = DISK_ON_FIRE,
    role: str = "brokerd",
) -> _up._Child:
    """A role that said READY=1: it runs for `runs_s` (the clock's), says `says`, exits `code`."""
    process = Exits()
    made = _up._Child(role, cast(trio.Process, process), None)

    async def run() -> None:
        await trio.sleep(runs_s)
        made.tail.append(says)
        process.returncode = code
        made.exited.set()

    nursery.start_soon(run)
    return made


def died_starting(code: int = 3, role: str = "brokerd") -> FailedStart:
    """What `_start` returns for a role that exits before it says READY=1."""
    return FailedStart(
        exit_code=code,
        report=f"{role} exited with code {code} while starting: {DISK_FULL}",
    )


NEVER_READY = FailedStart(
    exit_code=-9, report=f"brokerd did not report ready within {_up.READY_DEADLINE_S:g} s"
)
"""What `_start` returns for a role that never says READY=1 (checked on a real one below)."""


class Starter:
    """Starts a role again: the n-th start (from 1) takes `takes_s`, then is `outcome(n)`."""

    def __init__(
        self, outcome: Callable[[int], _up._Child | FailedStart], *, takes_s: float = 0.5
    ) -> None:
        self.outcome = outcome
        self.takes_s = takes_s
        self.at: list[float] = []
        """When each start began, in the clock's time."""
        self._returned: dict[int, trio.Event] = {}

    def returned(self, n: int) -> trio.Event:
        """Set once the n-th start (from 1) has returned."""
        return self._returned.setdefault(n, trio.Event())

    async def __call__(self) -> _up._Child | FailedStart:
        self.at.append(trio.current_time())
        n = len(self.at)
        await trio.sleep(self.takes_s)
        outcome = self.outcome(n)
        self.returned(n).set()
        return outcome


async def signal_once(returned: trio.Event, signals: trio.MemorySendChannel[int]) -> None:
    """SIGINT, once `returned` is set and the supervisor has acted on it (all else waits)."""
    await returned.wait()
    await trio.testing.wait_all_tasks_blocked()
    await signals.send(2)


def said(err: str) -> list[str]:
    """bxctl's own lines, without the roles' logs."""
    return [line for line in err.splitlines() if line.startswith("bxctl: ")]


def _never_signals() -> AsyncIterator[int]:
    _, receive = trio.open_memory_channel[int](0)
    return receive


# -- on the MockClock ------------------------------------------------------------------------


async def test_the_roles_are_started_side_by_side_and_known_in_their_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            memoryd, loopd = (fake(nursery, runs_s=HOUR_S, role=r) for r in ("memoryd", "loopd"))
            starters = [
                Starter(lambda n: memoryd, takes_s=3),
                Starter(lambda n: died_starting(role="brokerd"), takes_s=1),
                Starter(lambda n: loopd, takes_s=2),
            ]
            began = trio.current_time()
            outcomes = await _up._start_side_by_side(list(starters))
            # all began at once, and all were waited for: the slowest start is the time taken
            assert [s.at for s in starters] == [[began]] * 3
            assert trio.current_time() - began == 3
            assert outcomes == [memoryd, died_starting(role="brokerd"), loopd]
            nursery.cancel_scope.cancel()


async def test_the_pause_before_each_start_doubles_exactly_and_is_the_pause_waited(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            began = trio.current_time()
            again = Starter(lambda n: fake(nursery), takes_s=0)
            assert await _up._supervise([fake(nursery)], [again], _never_signals()) == 1
            nursery.cancel_scope.cancel()
    # no jitter: the pause printed is the pause waited, and the same every run
    assert [at - began for at in again.at] == [1, 1 + 2, 1 + 2 + 4, 1 + 2 + 4 + 8]
    died = f"bxctl: brokerd exited with code 3 ({DISK_ON_FIRE})"
    back = "bxctl: brokerd is back"
    assert said(capsys.readouterr().err) == [
        *(
            line
            for pause in (1, 2, 4, 8)
            for line in (f"{died}; starting it again in {pause} s", back)
        ),
        f"{died}; it died 5 times in a row within 10 s of starting (or before it was ready), "
        f"so it is not started again; {STOPS}",
    ]


async def test_the_pause_never_exceeds_the_longest(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = RestartPolicy(limit=8, first_pause_s=1, longest_pause_s=20)
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            again = Starter(lambda n: fake(nursery), takes_s=0)
            assert await _up._supervise([fake(nursery)], [again], _never_signals(), policy) == 1
            nursery.cancel_scope.cancel()
    err = capsys.readouterr().err
    pauses = [line.rsplit(" in ", 1)[1] for line in said(err) if "starting it again" in line]
    assert pauses == ["1 s", "2 s", "4 s", "8 s", "16 s", "20 s", "20 s"]


async def test_a_role_that_ran_a_good_while_is_started_again_after_the_first_pause(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # quick, quick, 10 s (a good while, just), a minute, quick; then it stays up
    runs_s = [0, 10, 60, 0, math.inf]
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            signals = trio.open_memory_channel[int](1)
            again = Starter(lambda n: fake(nursery, runs_s=runs_s[n - 1]), takes_s=0)
            nursery.start_soon(signal_once, again.returned(len(runs_s)), signals[0])
            assert await _up._supervise([fake(nursery)], [again], signals[1]) == 0
            nursery.cancel_scope.cancel()
    err = capsys.readouterr().err
    pauses = [line.rsplit(" in ", 1)[1] for line in said(err) if "starting it again" in line]
    # a good run's end starts a new streak: its pause, and the next quick end's, are the first
    assert pauses == ["1 s", "2 s", "1 s", "1 s", "1 s"]


async def test_a_role_that_cannot_start_again_is_given_up_on(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 30: each failed start was waited on as the old run, and 10 s after the last
    # good start the count began again: 3,588 failed starts in an hour, never giving up
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            began = trio.current_time()
            again = Starter(lambda n: died_starting())
            assert await _up._supervise([fake(nursery)], [again], _never_signals()) == 1
            nursery.cancel_scope.cancel()
    # each failed start (0.5 s) moves the start the next pause counts from
    assert [at - began for at in again.at] == [1, 3.5, 8, 16.5]
    failed = f"bxctl: brokerd exited with code 3 while starting: {DISK_FULL}"
    assert said(capsys.readouterr().err) == [
        f"bxctl: brokerd exited with code 3 ({DISK_ON_FIRE}); starting it again in 1 s",
        *(f"{failed}; starting it again in {pause} s" for pause in (2, 4, 8)),
        f"{failed}; it died 5 times in a row within 10 s of starting (or before it was ready), "
        f"so it is not started again; {STOPS}",
    ]


async def test_a_role_that_never_says_ready_when_started_again_is_given_up_on(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # 60 s to give up on each start: longer than a good run, and still a failed start
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            again = Starter(lambda n: NEVER_READY, takes_s=_up.READY_DEADLINE_S)
            assert await _up._supervise([fake(nursery)], [again], _never_signals()) == 1
            nursery.cancel_scope.cancel()
    assert len(again.at) == RESTART_LIMIT - 1
    lines = said(capsys.readouterr().err)
    assert lines[1] == f"bxctl: {NEVER_READY.report}; starting it again in 2 s"
    assert lines[-1] == (
        f"bxctl: {NEVER_READY.report}; it died 5 times in a row within 10 s of starting "
        f"(or before it was ready), so it is not started again; {STOPS}"
    )


async def test_a_role_that_fails_to_start_then_starts_is_back(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    children: list[_up._Child] = []
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            signals = trio.open_memory_channel[int](1)
            outcomes: list[_up._Child | FailedStart] = [
                died_starting(),
                NEVER_READY,
                fake(nursery, runs_s=math.inf),
            ]
            again = Starter(lambda n: outcomes[n - 1])
            nursery.start_soon(signal_once, again.returned(3), signals[0])
            children.append(fake(nursery))
            assert await _up._supervise(children, [again], signals[1]) == 0
            nursery.cancel_scope.cancel()
    assert children == [outcomes[2]]  # the one that started is the one kept (and stopped)
    assert not children[0].exited.is_set()
    assert said(capsys.readouterr().err) == [
        f"bxctl: brokerd exited with code 3 ({DISK_ON_FIRE}); starting it again in 1 s",
        f"bxctl: brokerd exited with code 3 while starting: {DISK_FULL}; starting it again in 2 s",
        f"bxctl: {NEVER_READY.report}; starting it again in 4 s",
        "bxctl: brokerd is back",
        "bxctl: SIGINT; stopping boxmaker",
    ]


@pytest.mark.parametrize("where", ["running", "starting again"])
async def test_a_role_that_exits_78_waits_for_the_owner_and_boxmaker_stops(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            first = fake(nursery, code=78 if where == "running" else 3)
            again = Starter(lambda n: died_starting(78))
            assert await _up._supervise([first], [again], _never_signals()) == 1
            nursery.cancel_scope.cancel()
    assert len(again.at) == (0 if where == "running" else 1)
    last = said(capsys.readouterr().err)[-1]
    assert last.endswith(f"; {WAITS}; {STOPS}")
    assert ("while starting" in last) == (where == "starting again")


@pytest.mark.parametrize(("code", "starts"), [(78, 1), (1, RESTART_LIMIT - 1)])
async def test_the_bridge_given_up_on_lets_the_rest_go_on(
    autojump_clock: trio.testing.MockClock,
    capsys: pytest.CaptureFixture[str],
    code: int,
    starts: int,
) -> None:
    with trio.fail_after(HOUR_S):
        async with trio.open_nursery() as nursery:
            signals = trio.open_memory_channel[int](1)
            core = fake(nursery, runs_s=math.inf)
            bridge = fake(nursery, role=_up.BRIDGE)
            keeps = Starter(lambda n: fake(nursery, runs_s=math.inf))
            again = Starter(lambda n: died_starting(code, role=_up.BRIDGE))
            nursery.start_soon(signal_once, again.returned(starts), signals[0])
            assert await _up._supervise([core, bridge], [keeps, again], signals[1]) == 0
            nursery.cancel_scope.cancel()
    assert len(again.at) == starts
    assert not keeps.at
    assert not core.exited.is_set()
    lines = said(capsys.readouterr().err)
    assert lines[-2].startswith(f"bxctl: mattermostd exited with code {code} while starting: ")
    assert lines[-2].endswith("; the rest of boxmaker goes on")
    assert (WAITS in lines[-2]) == (code == 78)
    assert lines[-1] == "bxctl: SIGINT; stopping boxmaker"


# -- on real processes -----------------------------------------------------------------------


async def child(nursery: trio.Nursery, code: str, role: str = "brokerd") -> _up._Child:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    made = _up._Child(role, process, None, stop_deadline_s=5)
    nursery.start_soon(_up._pump_logs, made)
    nursery.start_soon(_up._watch_exit, made)
    return made


DIES = f"import sys; print({DISK_ON_FIRE!r}, file=sys.stderr); sys.exit(3)"
LIVES = "import time; time.sleep(60)"


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

            code = await _up._supervise(children, [again], _never_signals(), QUICK)
            nursery.cancel_scope.cancel()
    assert code == 1
    assert starts == RESTART_LIMIT - 1
    err = capsys.readouterr().err
    assert f"brokerd exited with code 3 ({DISK_ON_FIRE})" in err
    assert f"it died {RESTART_LIMIT} times in a row within 10 s of starting" in err


async def test_a_role_that_dies_once_is_back(capsys: pytest.CaptureFixture[str]) -> None:
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            children = [await child(nursery, DIES)]
            returned = trio.Event()

            async def again() -> _up._Child:
                made = await child(nursery, LIVES)
                returned.set()
                return made

            signals = trio.open_memory_channel[int](1)
            nursery.start_soon(signal_once, returned, signals[0])
            code = await _up._supervise(children, [again], signals[1], QUICK)
            back = children[0]
            await _up._stop(children)
            nursery.cancel_scope.cancel()
    assert code == 0
    assert back.process.returncode == -15  # stopped by `_stop`, not dead before it
    err = capsys.readouterr().err
    assert "starting it again in 0.01 s" in err
    assert "brokerd is back" in err


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


@pytest.fixture
def silent_role(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A role `silent` in `short_dir` (on `PYTHONPATH`), whose `__main__` the test writes."""
    (short_dir / "silent").mkdir()
    (short_dir / "config").mkdir()
    (short_dir / "config" / "loopd.toml").write_text("")
    # a role that starts under loopd's config
    monkeypatch.setattr(_up, "_config_path", lambda home, role: home / "config" / "loopd.toml")
    monkeypatch.setattr(_up, "_stop_deadline", lambda home, role: 5.0)
    return short_dir / "silent" / "__main__.py"


async def test_a_role_that_never_says_ready_is_killed_named_and_reaped(
    short_dir: Path,
    silent_role: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(_up, "READY_DEADLINE_S", 0.5)
    await trio.Path(silent_role).write_text("import time; time.sleep(60)\n")
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            started = await _up._start(
                nursery, "silent", short_dir, short_dir, {"PYTHONPATH": str(short_dir)}
            )
            nursery.cancel_scope.cancel()
    assert started == FailedStart(exit_code=-9, report="silent did not report ready within 0.5 s")
    pid = int(capsys.readouterr().err.split("started silent (pid ")[1].split(")")[0])
    with pytest.raises(ProcessLookupError):  # gone, not a zombie left for later
        os.kill(pid, 0)


async def test_a_role_that_exits_78_while_starting_says_so_with_its_code(
    short_dir: Path, silent_role: Path
) -> None:
    await trio.Path(silent_role).write_text(
        "import sys\n"
        "print('silent: ERROR silent: the token was refused', file=sys.stderr)\n"
        "sys.exit(78)\n"
    )
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            started = await _up._start(
                nursery, "silent", short_dir, short_dir, {"PYTHONPATH": str(short_dir)}
            )
            nursery.cancel_scope.cancel()
    assert started == FailedStart(
        exit_code=78,
        report="silent exited with code 78 while starting: "
        "silent: ERROR silent: the token was refused",
    )
