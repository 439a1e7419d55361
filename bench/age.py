"""A home's cost by age (issue 32): starts and the owner's commands on homes of 0.1 to 3 years.

Homes of a heavy owner (60 sessions, about 400 tool calls and 5 memory edits a day, and
one session of 2,000 records) are built through boxmaker's own code (`bench/_age_home.py`)
and cached in `~/.cache/boxmaker-bench/age/<format version>/<age>y/`, built once and
reused (`--rebuild` builds them again). Each age is measured on a copy of its home (the
roles write indexes, clean marks and checkpoints), `--runs` times, and the median of the
runs is printed, one column per age, with the oldest / youngest ratio, whether it is
flat (<= 1.2x) and the issue's target where it gives one:

- `bxctl up` until it prints "boxmaker is up"; each role alone from spawn until it says
  READY=1 on its notify socket (what `bxctl up` waits for): brokerd as a home in use
  leaves it (the records of the last hours after its last checkpoint) and again right
  after a clean stop; memoryd's second start (after a clean stop) until ready, until
  caught up (its own line once the catch-up has read every log) and until idle (its
  CPU and its scan's quiet);
  memoryd's first start until the index is built (records/s, beside a raw SQLite bulk
  insert of the same rows), and loopd;
- with the roles up (and idle): whole `bxctl` processes: `sessions list`, `memory
  history`, `memory why WORD`, `approvals list`, `recall WORD`, `chat -m hi` (a new
  session), `audit verify` (also records/s), and resuming the 2,000-record session
  (`chat --session ID -m hi`) until its request reaches the model (an instant model
  server in a child process notes when it arrives): the first turn after a start.

Other work on the machine moves every figure: the 1-minute load average is printed per
age (lowest and highest seen while measuring).

    just bench age [--ages 0.1,1,3] [--runs 3] [--cache DIR] [--rebuild]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

import proto
from bench import _age_home
from bench._age_home import HomeFacts
from bench.index import raw_bulk_insert
from bench.turn import InstantModel, Words, cpu_s
from loopd._sessions import SessionStore
from proto import UserRecord

CACHE = Path.home() / ".cache" / "boxmaker-bench" / "age"
FLAT = 1.2
CAUGHT_UP = r"the index is caught up with every log"
"""memoryd's own line when its start-up catch-up has read what changed."""
IDLE_WINDOW_S = 0.5
IDLE_CPU_S = 0.05
"""Idle: less CPU than this (the role and its children) over the last `IDLE_WINDOW_S`."""
IDLE_DEADLINE_S = 300.0
READY_DEADLINE_S = 300.0

console = Console(stderr=True)


@dataclass(frozen=True)
class Figure:
    """A row of the table: its name, its target (seconds) if the issue gives one, and how
    it is shown: seconds, or records/s (`rate`, the records per age from the facts)."""

    name: str
    target_s: float | None = None
    rate: str | None = None
    """"audit" or "index": the seconds are shown as that many records a second."""


UP = Figure("bxctl up until 'boxmaker is up'", 2.0)
UP_ANSWERED = Figure("bxctl up until a chat sent at its banner is answered", 1.5)
BROKERD_IN_USE = Figure("brokerd start until ready (as a home in use leaves it)", 1.0)
BROKERD_AGAIN = Figure("brokerd start until ready (after a clean stop)", 1.0)
MEMORYD_READY = Figure("memoryd second start until ready", 1.0)
MEMORYD_CAUGHT_UP = Figure("memoryd second start until caught up", 0.5)
MEMORYD_IDLE = Figure("memoryd second start until idle")
MEMORYD_CRASHED = Figure("memoryd start after a SIGKILL until caught up", 3.0)
MEMORYD_CRASH_LOOKED = Figure("  ... until its look at every log is done (background)")
MEMORYD_AFTER_CRASH = Figure("memoryd start after that one's clean stop until caught up", 0.5)
MEMORYD_BUILT = Figure("memoryd first start until the index is built", rate="index")
RAW_BUILD = Figure("  raw SQLite bulk insert of the same rows and schema", rate="index")
LOOPD_READY = Figure("loopd start until ready", 1.0)
SESSIONS_LIST = Figure("bxctl sessions list", 0.3)
MEMORY_HISTORY = Figure("bxctl memory history", 0.3)
MEMORY_WHY = Figure("bxctl memory why WORD", 0.3)
APPROVALS_LIST = Figure("bxctl approvals list", 0.3)
RESUME = Figure("resume the 2,000-record session, until the request leaves", 0.3)
CHAT_NEW = Figure("bxctl chat -m hi (a new session)")
RECALL = Figure("bxctl recall WORD")
AUDIT_VERIFY = Figure("bxctl audit verify", rate="audit")

FIGURES = [
    UP,
    UP_ANSWERED,
    BROKERD_IN_USE,
    BROKERD_AGAIN,
    MEMORYD_READY,
    MEMORYD_CAUGHT_UP,
    MEMORYD_IDLE,
    MEMORYD_CRASHED,
    MEMORYD_CRASH_LOOKED,
    MEMORYD_AFTER_CRASH,
    LOOPD_READY,
    MEMORYD_BUILT,
    RAW_BUILD,
    SESSIONS_LIST,
    MEMORY_HISTORY,
    MEMORY_WHY,
    APPROVALS_LIST,
    RESUME,
    CHAT_NEW,
    RECALL,
    AUDIT_VERIFY,
]


@dataclass
class Measured:
    """One age's samples (seconds) per figure, the rows each rate counts, the loads seen."""

    facts: HomeFacts
    samples: dict[Figure, list[float]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)

    def add(self, figure: Figure, seconds: float) -> None:
        self.samples.setdefault(figure, []).append(seconds)
        self.loads.append(os.getloadavg()[0])

    def median(self, figure: Figure) -> float | None:
        values = self.samples.get(figure)
        return statistics.median(values) if values else None


# -- the model ---------------------------------------------------------------------------


class ArrivalModel(InstantModel):
    """`InstantModel`, noting when its last chat completion request arrived (monotonic)."""

    def __init__(self, folder: Path) -> None:
        self._arrived = multiprocessing.get_context("fork").Value("d", 0.0, lock=False)
        super().__init__(seed=32, folder=folder)

    @property
    def arrived(self) -> float:
        """`time.monotonic()` when the last request's body was read (0: none yet)."""
        return float(self._arrived.value)

    def _answer(self, body: bytes, words: Words) -> list[bytes]:
        self._arrived.value = time.monotonic()
        return super()._answer(body, words)


# -- processes ---------------------------------------------------------------------------


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int(stat.read_text().rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cpu_tree(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        for one in (pid, *_descendants(pid)):
            with contextlib.suppress(OSError):
                total += cpu_s(one)
    return total


def wait_idle(pids: list[int]) -> float:
    """Block until `pids` (and their children) are idle; the monotonic time it began."""
    deadline = time.monotonic() + IDLE_DEADLINE_S
    history: list[tuple[float, float]] = []
    step = IDLE_WINDOW_S / 5
    while time.monotonic() < deadline:
        now = time.monotonic()
        history.append((now, _cpu_tree(pids)))
        window = [(t, c) for t, c in history if t >= now - IDLE_WINDOW_S - step / 2]
        if now - window[0][0] >= IDLE_WINDOW_S and window[-1][1] - window[0][1] < IDLE_CPU_S:
            return window[0][0]
        time.sleep(step)
    raise SystemExit(f"pids {pids} were not idle within {IDLE_DEADLINE_S:g} s")


class Role:
    """A role run alone, as `bxctl up` runs it: its config, its own notify socket."""

    def __init__(self, role: str, home: Path, env: dict[str, str], scratch: Path) -> None:
        self.role = role
        notify_path = scratch / f"{role}.notify"
        notify_path.unlink(missing_ok=True)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(os.fspath(notify_path))
        self.lines: list[tuple[float, str]] = []
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-m", role, "serve", "--config", f"{home}/config/{role}.toml"],
            env={**env, "NOTIFY_SOCKET": os.fspath(notify_path)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_ready(self) -> float:
        """Seconds from spawn until READY=1."""
        self.notify.settimeout(0.1)
        deadline = self.started + READY_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                data = self.notify.recv(4096)
            except TimeoutError:
                if self.process.poll() is not None:
                    raise SystemExit(f"{self.role} exited: {self.tail()}") from None
                continue
            if b"READY=1" in data.split(b"\n"):
                return time.monotonic() - self.started
        raise SystemExit(f"{self.role} was not ready within {READY_DEADLINE_S:g} s")

    def wait_line(self, pattern: str) -> tuple[float, re.Match[str]]:
        """Seconds from spawn until a log line matches `pattern`, and the match."""
        deadline = self.started + READY_DEADLINE_S
        seen = 0
        while time.monotonic() < deadline:
            for at, line in self.lines[seen:]:
                seen += 1
                if found := re.search(pattern, line):
                    return at - self.started, found
            if self.process.poll() is not None:
                raise SystemExit(f"{self.role} exited: {self.tail()}")
            time.sleep(0.01)
        raise SystemExit(f"{self.role} logged no {pattern!r} within {READY_DEADLINE_S:g} s")

    def tail(self) -> str:
        return " | ".join(line for _, line in self.lines[-5:])

    def kill(self) -> None:
        """SIGKILL: an unclean stop (no clean mark), as a power cut or the OOM killer."""
        self.process.kill()
        self.process.wait(timeout=120)
        self._reader.join(timeout=10)
        self.notify.close()

    def stop(self) -> None:
        """SIGTERM: a clean stop (memoryd writes its clean mark); wait for the exit."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        self._reader.join(timeout=10)
        self.notify.close()
        if self.process.returncode != 0:
            raise SystemExit(f"{self.role} exited {self.process.returncode}: {self.tail()}")


@contextlib.contextmanager
def role(name: str, home: Path, env: dict[str, str], scratch: Path) -> Iterator[Role]:
    started = Role(name, home, env, scratch)
    try:
        yield started
    finally:
        if started.process.poll() is None:
            started.stop()


# -- one age -----------------------------------------------------------------------------


@dataclass
class Age:
    """The copy of one age's home being measured, and what it needs."""

    home: Path
    pristine: Path
    """The cached home: the audit's head and checkpoint as a home in use leaves them."""
    facts: HomeFacts
    env: dict[str, str]
    scratch: Path
    model: ArrivalModel
    measured: Measured

    @property
    def bxctl(self) -> list[str]:
        return [sys.executable, "-m", "bxctl"]

    def as_in_use(self) -> None:
        """The audit's head and checkpoint put back as the build (a running brokerd) left
        them: the records written after its last checkpoint are walked at a start."""
        for name in ("head", "checkpoint"):
            kept, used = self.pristine / "audit" / name, self.home / "audit" / name
            if kept.exists():
                shutil.copy2(kept, used)
            else:  # a home too young for a checkpoint
                used.unlink(missing_ok=True)

    def probe(self) -> None:
        """One record appended to a session as loopd appends it: a catch-up's work."""
        session = SessionStore(self.home / "sessions").open(self.facts.long_session)
        session.append(UserRecord(time=proto.utc_stamp(), content="probe"))

    def run(self, *argv: str) -> tuple[float, str]:
        """A whole bxctl process: its seconds and its output (a failure stops the bench)."""
        started = time.monotonic()
        done = subprocess.run(
            [*self.bxctl, *argv], env=self.env, capture_output=True, text=True, check=False
        )
        seconds = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"bxctl {' '.join(argv)} failed: {done.stderr[-2000:]}")
        return seconds, done.stdout


def _prepare(work: Path, cached: Path, model_url: str) -> Path:
    home = work / "home"
    subprocess.run(["cp", "-a", "--reflink=auto", os.fspath(cached), os.fspath(home)], check=True)
    _age_home.rehome(home)
    loopd = home / "config" / "loopd.toml"
    text = loopd.read_text().replace(_age_home.MODEL_URL, model_url)
    # The 2,000-record session holds far more than a small context: the bench is about
    # boxmaker's own time, so the model takes it all.
    loopd.write_text(text.replace("context_tokens = 8192", "context_tokens = 1000000000"))
    return home


def _starts(age: Age, runs: int, status: Status) -> None:
    m, home, env, scratch = age.measured, age.home, age.env, age.scratch
    for run in range(runs):
        status(f"memoryd first start, run {run + 1} of {runs}")
        shutil.rmtree(home / "index", ignore_errors=True)
        with role("memoryd", home, env, scratch) as memoryd:
            built, found = memoryd.wait_line(r"built the index: (\d+) logs, (\d+) records")
            m.add(MEMORYD_BUILT, built)
            m.rows["index"] = int(found.group(2))
            if run == runs - 1:  # the start a second start follows: left to finish its scans
                wait_idle([memoryd.process.pid])
    for run in range(runs):
        status(f"memoryd second start, run {run + 1} of {runs}")
        age.probe()  # a turn that ended while it was stopped
        with role("memoryd", home, env, scratch) as memoryd:
            m.add(MEMORYD_READY, memoryd.wait_ready())
            # Its own line when the catch-up has read every log: a `session_updated` is
            # answered before (while the index opens, or between the catch-up's sessions).
            m.add(MEMORYD_CAUGHT_UP, memoryd.wait_line(CAUGHT_UP)[0])
            m.add(MEMORYD_IDLE, wait_idle([memoryd.process.pid]) - memoryd.started)
    for run in range(runs):
        status(f"memoryd after a SIGKILL, run {run + 1} of {runs}")
        with role("memoryd", home, env, scratch) as memoryd:
            memoryd.wait_line(CAUGHT_UP)
            memoryd.kill()
        age.probe()
        with role("memoryd", home, env, scratch) as memoryd:
            m.add(MEMORYD_CRASHED, memoryd.wait_line(CAUGHT_UP)[0])
            m.add(MEMORYD_CRASH_LOOKED, memoryd.wait_line(r"looked at every session log in")[0])
        age.probe()
        with role("memoryd", home, env, scratch) as memoryd:
            again = memoryd.wait_line(CAUGHT_UP)[0]
            if not any("was stopped cleanly" in line for _, line in memoryd.lines):
                raise SystemExit(f"memoryd did not take up its clean stop: {memoryd.tail()}")
            m.add(MEMORYD_AFTER_CRASH, again)
    for run in range(runs):
        status(f"brokerd starts, run {run + 1} of {runs}")
        age.as_in_use()
        for figure in (BROKERD_IN_USE, BROKERD_AGAIN):
            with role("brokerd", home, env, scratch) as brokerd:
                m.add(figure, brokerd.wait_ready())
        status(f"loopd start, run {run + 1} of {runs}")
        with role("loopd", home, env, scratch) as loopd:
            m.add(LOOPD_READY, loopd.wait_ready())


def _raw_build(age: Age, status: Status) -> None:
    status("raw SQLite bulk insert")
    raw = age.scratch / "raw.sqlite3"
    config = proto.read_config(age.home / "config" / "memoryd.toml", proto.MemorydConfig)
    # The schema memoryd builds (the context ranking's, by default): the same work in SQLite.
    rows, seconds = raw_bulk_insert(age.home, raw, config.recall.ranking)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{raw}{suffix}").unlink(missing_ok=True)
    age.measured.add(RAW_BUILD, seconds)
    age.measured.rows["raw"] = rows


@contextlib.contextmanager
def _up(age: Age) -> Iterator[tuple[float, float]]:
    """`bxctl up` until "boxmaker is up", and until a chat sent then is answered (seconds);
    then its roles idle; SIGINT at the end. A turn's end not delivered to memoryd fails."""
    started = time.monotonic()
    up = subprocess.Popen(
        [*age.bxctl, "up"],
        env=age.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert up.stderr is not None
    try:
        tail: list[str] = []
        for line in up.stderr:
            tail = [*tail[-20:], line]
            if "boxmaker is up" in line:
                break
        else:
            raise SystemExit(f"bxctl up did not start: {''.join(tail)}")
        seconds = time.monotonic() - started
        later: list[str] = []
        reader = threading.Thread(target=lambda: later.extend(up.stderr or ()), daemon=True)
        reader.start()
        age.run("chat", "-m", "hi")  # the owner's first message, sent at the banner
        answered = time.monotonic() - started
        wait_idle([up.pid])
        yield seconds, answered
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=120)
    reader.join(timeout=10)
    if undelivered := [line for line in later if "not delivered" in line]:
        raise SystemExit(f"a turn's end did not reach memoryd: {undelivered[0]}")


def _everyday(age: Age, runs: int, status: Status) -> None:
    m, facts = age.measured, age.facts
    for run in range(runs + 1):  # the first is not counted: it warms every cache
        counted = run > 0
        status(
            f"bxctl up and the owner's commands, run {run} of {runs}"
            if counted
            else "bxctl up and the owner's commands, a run to warm the caches"
        )
        age.as_in_use()
        with _up(age) as (up_s, answered_s):
            # First after the start: loopd reads the session from its files.
            started = time.monotonic()
            resumed, _ = age.run("chat", "--session", facts.long_session, "-m", "hi")
            arrived = age.model.arrived - started
            if not 0 < arrived <= resumed:
                raise SystemExit("the resumed session's request did not reach the model")
            commands = {
                CHAT_NEW: ("chat", "-m", "hi"),
                SESSIONS_LIST: ("sessions", "list"),
                MEMORY_HISTORY: ("memory", "history"),
                MEMORY_WHY: ("memory", "why", facts.why_word),
                APPROVALS_LIST: ("approvals", "list"),
                RECALL: ("recall", facts.recall_word),
                AUDIT_VERIFY: ("audit", "verify"),
            }
            times = {figure: age.run(*argv) for figure, argv in commands.items()}
            if counted:
                m.add(UP, up_s)
                m.add(UP_ANSWERED, answered_s)
                m.add(RESUME, arrived)
                for figure, (seconds, _) in times.items():
                    m.add(figure, seconds)
            said = re.search(r"intact: ([\d,]+) records", times[AUDIT_VERIFY][1])
            if said is None:
                raise SystemExit(f"audit verify said: {times[AUDIT_VERIFY][1]!r}")
            m.rows["audit"] = int(said.group(1).replace(",", ""))
            if facts.why_word not in times[MEMORY_WHY][1].lower():
                raise SystemExit(f"memory why {facts.why_word} found nothing")


class Status:
    """Says what is being measured (a rich status line)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._status = console.status(label)

    def __enter__(self) -> Status:
        self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._status.__exit__(None, None, None)

    def __call__(self, what: str) -> None:
        self._status.update(f"{self.label}: {what} (load {os.getloadavg()[0]:.2f})")


def measure(cached: Path, facts: HomeFacts, runs: int, work_root: Path) -> Measured:
    """Every figure of one age, on a copy of its cached home."""
    work = Path(tempfile.mkdtemp(prefix="work-", dir=work_root))
    scratch = Path(tempfile.mkdtemp(prefix="bxa", dir="/tmp"))  # short: AF_UNIX paths
    folder = scratch / "empty"
    folder.mkdir()
    model = ArrivalModel(folder)
    try:
        with Status(f"{_age_home.age_name(facts.years)}") as status:
            status("copying the home")
            home = _prepare(work, cached, model.url)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["BOXMAKER_HOME"] = os.fspath(home)
            age = Age(home, cached, facts, env, scratch, model, Measured(facts))
            _starts(age, runs, status)
            _raw_build(age, status)
            _everyday(age, runs, status)
        return age.measured
    finally:
        model.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


# -- the table ---------------------------------------------------------------------------


def _cell(m: Measured, figure: Figure) -> str:
    seconds = m.median(figure)
    if seconds is None:
        return "-"
    if figure.rate is not None:
        rows = m.rows["raw" if figure is RAW_BUILD else figure.rate]
        return f"{seconds:.2f} s {rows / seconds / 1000:,.0f}k/s"
    return f"{seconds:.2f}"


def _verdict(first: Measured, last: Measured, figure: Figure) -> tuple[str, str]:
    a, b = first.median(figure), last.median(figure)
    if a is None or b is None:
        return "-", ""
    if figure.rate is not None:  # the rate, oldest / youngest: flat is >= 1 / FLAT
        rows_of = "raw" if figure is RAW_BUILD else figure.rate
        ratio = (last.rows[rows_of] / b) / (first.rows[rows_of] / a)
        return f"{ratio:.2f}x rate", "flat" if ratio >= 1 / FLAT else "slows"
    ratio = b / a
    verdict = "flat" if ratio <= FLAT else "GROWS"
    if figure.target_s is not None:
        worst = max(a, b)
        held = "holds" if worst <= figure.target_s else "MISSED"
        verdict += f"; <= {figure.target_s:g} s {held}"
    return f"{ratio:.2f}x", verdict


def report(ages: list[float], measured: list[Measured], runs: int) -> None:
    """The table: one row per figure, one column per age, the ratio and the verdict."""
    names = [_age_home.age_name(a) for a in ages]
    width = 60
    ratio_head = f"{names[-1]}/{names[0]}"
    print()
    print(f"A home's cost by age (issue 32): median of {runs} runs, seconds")
    print(f"{'':<{width}}" + "".join(f"{n:>18}" for n in names) + f"{ratio_head:>13}  verdict")
    for figure in FIGURES:
        cells = "".join(f"{_cell(m, figure):>18}" for m in measured)
        ratio, verdict = _verdict(measured[0], measured[-1], figure)
        print(f"{figure.name:<{width}}{cells}{ratio:>13}  {verdict}")
    loads = "".join(f"{min(m.loads):>10.2f}-{max(m.loads):<7.2f}" for m in measured)
    print(f"{'load average (1 min), lowest-highest':<{width}}{loads}")
    print()
    print("homes:")
    for name, m in zip(names, measured, strict=True):
        f = m.facts
        print(
            f"  {name}: {f.days} days, {f.sessions:,} sessions, {f.records:,} records, "
            f"{f.calls:,} tool calls, {f.audit_records:,} audit records, {f.edits:,} memory "
            f"edits, {f.archive_entries:,} archived entries, {m.rows.get('index', 0):,} "
            f"index rows; built in {f.built_s:.0f} s"
        )


def main(argv: list[str]) -> None:
    """Build (or reuse) each age's home, measure it, print the table."""
    parser = argparse.ArgumentParser(prog="just bench age", description=__doc__)
    parser.add_argument("--ages", default="0.1,1,3", help="years, separated by commas")
    parser.add_argument("--runs", type=int, default=3, help="runs of each figure (median)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where the homes are kept")
    parser.add_argument("--rebuild", action="store_true", help="build the homes again")
    args = parser.parse_args(argv)
    ages = sorted(float(a) for a in args.ages.split(","))
    args.cache.mkdir(parents=True, exist_ok=True)
    homes: list[tuple[Path, HomeFacts]] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        for years in ages:
            task = progress.add_task(f"home of {_age_home.age_name(years)}", total=None)

            def say(what: str, done: int, total: int, task: TaskID = task) -> None:
                progress.update(task, description=what, completed=done, total=total)

            home, facts = _age_home.cached_home(args.cache, years, rebuild=args.rebuild, say=say)
            progress.update(
                task,
                description=f"home of {_age_home.age_name(years)}: {facts.sessions:,} sessions "
                f"(built in {facts.built_s:.0f} s), {home}",
                completed=1,
                total=1,
            )
            homes.append((home, facts))
    measured = [measure(home, facts, args.runs, args.cache) for home, facts in homes]
    report(ages, measured, args.runs)
