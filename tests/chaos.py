"""A chaos day: a scripted owner's day against the real roles while roles are killed.

`bxctl up` runs memoryd, brokerd and loopd as processes over a real home, against a strict
scripted model server (every tool call must be answered, as OpenAI's API requires) that
plays a simple assistant: it saves what the owner asks it to remember (an approved or
denied memory edit), recalls, consolidates, and chats. Meanwhile, at random moments of
the day, a random role is sent SIGKILL or SIGTERM, and `bxctl up` starts it again.

The moments: `idle` (between turns), `model` (while the model is answering), `approval`
(while an approval waits for the owner), `edit` (just after the owner approved an edit).
After every kill, once the role is back:

* the session the kill hit goes on: its next message is answered;
* no owner message is lost: every message the owner sent is in its session's log;
* the memory files parse and are within their limits (the memory block is served);
* the edit journal accounts for the files: its last line of each is what the file holds;
* the audit log verifies;
* the recall index holds what a fresh reindex holds.

    python tests/chaos.py --kills 100        (just chaos)

A small day runs in the gate (tests/e2e/test_chaos.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlean
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scripted_model import ScriptedModel, Step, serve_scripted_model

import entries
import proto
from memoryd._store import Sources, build

ROLES = ("memoryd", "brokerd", "loopd")
MOMENTS = ("idle", "model", "approval", "edit")
TURN_DEADLINE_S = 60.0
BACK_DEADLINE_S = 60.0
QUICK_DEATH_S = 11.0
VERBOSE = bool(os.environ.get("CHAOS_VERBOSE"))


# -- the assistant the model server plays ---------------------------------------------


def _block_entries(system: str, name: str) -> list[str]:
    """The entries of `name` in a session's memory block (its system prompt)."""
    match = re.search(rf"^# {re.escape(name)} \([^)]*\)\n(.*?)(?:\n\n# |\Z)", system, re.S | re.M)
    if match is None or match.group(1).strip() == "(empty)":
        return []
    return [e.strip() for e in match.group(1).split("\n§\n") if e.strip()]


def assistant(body: dict[str, Any]) -> Step:
    """The scripted assistant: what it does with the owner's last message."""
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return Step(text=f"Done: {str(last['content'])[:80]}")
    said = str(last.get("content", ""))
    delay = 0.6 if "(slowly)" in said else 0.0
    if said.startswith("remember: "):
        fact = said.removeprefix("remember: ").replace("(slowly)", "").strip()
        args = {"action": "add", "file": "memory", "text": fact}
        return Step(tool_calls=[("memory", json.dumps(args))], delay_s=delay)
    if said.startswith("recall: "):
        args = {"query": said.removeprefix("recall: ").replace("(slowly)", "").strip()}
        return Step(tool_calls=[("recall", json.dumps(args))], delay_s=delay)
    if said.startswith("consolidate"):
        current = _block_entries(messages[0]["content"], "memory.md")
        if not current:
            return Step(text="Nothing to consolidate.", delay_s=delay)
        items: list[dict[str, Any]] = [{"old": current[0], "move": True}]
        items += [{"old": entry, "keep": True} for entry in current[1:]]
        consolidate = {"action": "consolidate", "file": "memory", "entries": items}
        return Step(tool_calls=[("memory", json.dumps(consolidate))], delay_s=delay)
    return Step(text=f"You said: {said[:60]}", delay_s=delay)


# -- bxctl up, watched ------------------------------------------------------------------


class Up:
    """`bxctl up` as a process, its stderr read line by line; the roles' pids from it."""

    def __init__(self, home: Path) -> None:
        self.lines: list[str] = []
        self.pids: dict[str, int] = {}
        self.backs: Counter[str] = Counter()
        self.started_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bxctl", "up", "--home", str(home)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.rstrip("\n")
            with self._lock:
                self.lines.append(line)
                started = re.search(r"bxctl: started (\w+) \(pid (\d+)\)", line)
                if started:
                    self.pids[started.group(1)] = int(started.group(2))
                    self.started_at[started.group(1)] = time.monotonic()
                back = re.search(r"bxctl: (\w+) is back", line)
                if back:
                    self.backs[back.group(1)] += 1
                    self.started_at[back.group(1)] = time.monotonic()  # ready again

    def wait_for(self, test: Any, what: str, deadline_s: float = BACK_DEADLINE_S) -> None:
        end = time.monotonic() + deadline_s
        while True:
            with self._lock:
                if test():
                    return
            if self.process.poll() is not None or time.monotonic() > end:
                tail = "\n".join(self.lines[-40:])
                raise AssertionError(f"bxctl up: never saw {what}:\n{tail}")
            time.sleep(0.05)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=120)
        self._reader.join(timeout=10)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code


# -- the owner ---------------------------------------------------------------------------


@dataclass
class Report:
    """What the day did."""

    turns: int = 0
    kills: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    approved: int = 0
    denied: int = 0
    failed_turns: int = 0
    resent: int = 0
    by_hand: list[str] = field(default_factory=list)

    def summary(self) -> str:
        by_role = Counter(role for role, _, _ in self.kills.elements())
        by_moment = Counter(moment for _, moment, _ in self.kills.elements())
        by_signal = Counter(sig for _, _, sig in self.kills.elements())
        return (
            f"{self.turns} turns, {sum(self.kills.values())} kills "
            f"(by role {dict(by_role)}; by moment {dict(by_moment)}; by signal "
            f"{dict(by_signal)}); {self.approved} edits approved, {self.denied} denied; "
            f"{self.failed_turns} turns broken by a kill, {self.resent} messages sent "
            f"again; needed the owner's hand: {self.by_hand or 'none'}"
        )


class Day:
    """The owner, the stack, and the killer."""

    def __init__(self, home: Path, up: Up, rng: random.Random, report: Report) -> None:
        self.home = home
        self.up = up
        self.rng = rng
        self.report = report
        self.sessions: list[str] = []
        self.sent: dict[str, list[str]] = {}

    def socket(self, spec: proto.Socket[proto.Message]) -> Path:
        return spec.default_path(self.home)

    # -- killing ---------------------------------------------------------------------

    def kill(self, role: str, moment: str) -> None:
        sig = self.rng.choice([signal.SIGKILL, signal.SIGTERM])
        # bxctl up takes 5 deaths in a row, each within 10 s of a start, for a crash loop
        # (systemd's start limit) and stops; a day of kills is not a crash loop.
        fresh = time.monotonic() - self.up.started_at.get(role, 0.0)
        if fresh < QUICK_DEATH_S:
            time.sleep(QUICK_DEATH_S - fresh)
        if VERBOSE:
            print(f"chaos: {sig.name} {role} ({moment})", file=sys.stderr, flush=True)
        before = self.up.backs[role]
        pid = self.up.pids[role]
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        self.report.kills[(role, moment, sig.name)] += 1
        self.up.wait_for(lambda: self.up.backs[role] > before, f"{role} back after {sig.name}")

    # -- talking -----------------------------------------------------------------------

    async def open(self) -> str:
        opened = await proto.call(
            self.socket(proto.OWNER_LOOP), proto.SessionOpen(origin="chaos"), proto.SessionOpened
        )
        self.sessions.append(opened.session)
        self.sent[opened.session] = []
        return opened.session

    async def turn(self, session: str, text: str, *, kill: tuple[str, str] | None = None) -> bool:
        """One turn; approvals decided as the owner would. False when a kill broke it."""
        self.sent[session].append(text)
        self.report.turns += 1
        if VERBOSE:
            print(f"chaos: {session} <- {text!r}", file=sys.stderr, flush=True)
        killer = kill
        try:
            with trio.fail_after(TURN_DEADLINE_S):
                async with proto.open_call(
                    self.socket(proto.OWNER_LOOP), proto.Say(session=session, text=text)
                ) as conversation:
                    if killer is not None and killer[1] == "model":
                        await trio.sleep(0.2)
                        await trio.to_thread.run_sync(self.kill, *killer)
                        killer = None
                    while True:
                        frame = await conversation.receive()
                        if isinstance(frame, proto.ApprovalPending):
                            killer = await self._decide(frame.approval, killer)
                        elif isinstance(frame, proto.TurnDone):
                            return True
                        elif isinstance(frame, proto.Error):
                            return False
        except proto.CallFailed:  # a kill broke the turn, however the connection ended
            return False

    async def _decide(
        self, approval: proto.PendingApproval, killer: tuple[str, str] | None
    ) -> tuple[str, str] | None:
        if killer is not None and killer[1] == "approval":
            await trio.to_thread.run_sync(self.kill, *killer)
            killer = None  # and then the owner decides, if the approval is still there
        approve = self.rng.random() < 0.8
        try:
            await proto.call(
                self.socket(proto.OWNER_BROKER),
                proto.ApprovalDecide(id=approval.id, approve=approve),
                proto.Ok,
            )
        except proto.CallFailed:
            return killer
        if approve:
            self.report.approved += 1
        else:
            self.report.denied += 1
        if killer is not None and killer[1] == "edit":
            await trio.to_thread.run_sync(self.kill, *killer)
            return None
        return killer

    async def until_answered(self, session: str, text: str) -> None:
        """Send `text` (again, only if it was lost) until a turn of `session` is answered."""
        for _ in range(6):
            if await self.turn(session, text):
                return
            self.report.failed_turns += 1
            await trio.sleep(1.0)
            if text in self.logged(session):
                text = f"are you there? ({len(self.sent[session])})"
            else:
                self.report.resent += 1
        raise AssertionError(f"session {session} does not go on:\n" + self._tail())

    def _tail(self) -> str:
        return "\n".join(self.up.lines[-60:])

    # -- checking --------------------------------------------------------------------

    def logged(self, session: str) -> list[str]:
        read = proto.SESSION_LOG.read(self.home / "sessions" / session / proto.LOG_FILE)
        return [r.content for r in read.records if isinstance(r, proto.UserRecord)]

    async def check(self) -> None:
        """The invariants, once every role is back."""
        for session in self.sessions:
            missing = [m for m in self.sent[session] if m not in self.logged(session)]
            assert not missing, f"owner messages lost in {session}: {missing}"
        block = await proto.call(
            self.socket(proto.LOOP_MEMORY), proto.MemoryBlock(), proto.MemoryBlockReply
        )
        assert block.text.startswith("# soul.md")
        history = proto.EDIT_JOURNAL
        memory = self.home / "memory"
        for file in ("memory.md", "user.md"):
            current = entries.parse((memory / file).read_text(), name=file)
            last: list[str] = []
            for path in sorted((memory / "edits").glob("*.jsonl")):
                for record in history.read(path).records:
                    if record.file == file:
                        last = record.after
            assert list(current) == last, f"{file} is not what its journal last says"
        verified = await proto.call(
            self.socket(proto.OWNER_BROKER), proto.AuditVerify(), proto.AuditVerified
        )
        assert verified.ok, f"the audit does not verify: {verified.broken_at}"
        for session in self.sessions:
            await proto.call(
                self.socket(proto.LOOP_MEMORY), proto.SessionUpdated(session=session), proto.Ok
            )
        assert await trio.to_thread.run_sync(self._index_rows) == await trio.to_thread.run_sync(
            self._fresh_rows
        ), "the index is not what a fresh reindex holds"

    def _index_rows(self) -> list[tuple[Any, ...]]:
        return _rows(self.home / "index" / "memory.sqlite3")

    def _fresh_rows(self) -> list[tuple[Any, ...]]:
        with tempfile.TemporaryDirectory(prefix="bxfresh") as scratch:
            target = Path(scratch) / "fresh.sqlite3"
            config = proto.read_config(self.home / "config" / "memoryd.toml", proto.MemorydConfig)
            sources = Sources(
                sessions_dir=self.home / "sessions",
                archive=self.home / "memory" / "archive.md",
                max_class=proto.Class.private,
                ranking=config.recall.ranking,  # the live index's own form, context and all
            )
            build(target, sources, threading.Event())
            return _rows(target)


def _rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlean.connect(f"file:{path}?mode=ro", uri=True)
    try:
        columns = {str(c[1]) for c in conn.execute("PRAGMA table_info(hits)")}
        context = "h.context" if "context" in columns else "''"
        rows = conn.execute(
            f"SELECT h.text, {context}, s.kind, s.session, s.epoch, s.record, s.time, s.role, "
            "s.class, s.untrusted FROM hits h JOIN sources s ON s.rowid = h.rowid"
        ).fetchall()
    finally:
        conn.close()
    return sorted(rows, key=repr)


# -- the day -----------------------------------------------------------------------------


def _plan(rng: random.Random, turns: int, kills: int) -> list[tuple[str, tuple[str, str] | None]]:
    """Each turn's message kind, and the kill (role, moment) that lands in it, if any."""
    kinds = ["chat", "remember", "remember", "recall", "consolidate"]
    plan: list[tuple[str, tuple[str, str] | None]] = [
        (rng.choice(kinds), None) for _ in range(turns)
    ]
    for i in rng.sample(range(turns), kills):
        moment = rng.choice(MOMENTS)
        kind = {"approval": "remember", "edit": "remember"}.get(moment, plan[i][0])
        plan[i] = (kind, (rng.choice(ROLES), moment))
    return plan


def _text(kind: str, n: int, slowly: bool) -> str:
    text = {
        "chat": f"hello number {n}",
        "remember": f"remember: Fact {n} is that the heron count was {n * 7}.",
        "recall": f"recall: heron count {max(1, n - 3)}",
        "consolidate": "consolidate",
    }[kind]
    return f"{text} (slowly)" if slowly else text


async def day(home: Path, up: Up, *, turns: int, sessions: int, kills: int, seed: int) -> Report:
    rng = random.Random(seed)
    report = Report()
    owner = Day(home, up, rng, report)
    for _ in range(sessions):
        await owner.open()
    for n, (kind, kill) in enumerate(_plan(rng, turns, kills)):
        session = rng.choice(owner.sessions)
        text = _text(kind, n, slowly=kill is not None and kill[1] == "model")
        if kill is not None and kill[1] == "idle":
            await trio.to_thread.run_sync(owner.kill, *kill)
            kill = None
        answered = await owner.turn(session, text, kill=kill)
        if kill is not None or not answered:
            if not answered:
                report.failed_turns += 1
                if text not in owner.logged(session):
                    report.resent += 1  # it never reached loopd: the owner sends it again
                    await owner.until_answered(session, text)
            await owner.until_answered(session, f"and now? ({n})")
            await owner.check()
    for session in owner.sessions:
        await owner.until_answered(session, "goodbye")
    await owner.check()
    return report


@contextmanager
def stack(workdir: Path, model: ScriptedModel) -> Iterator[tuple[Path, Up]]:
    home = workdir / "home"
    done = subprocess.run(
        [sys.executable, "-m", "bxctl", "init", "--home", str(home), "--model-url", model.url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    up = Up(home)
    try:
        up.wait_for(lambda: any("boxmaker is up" in line for line in up.lines), "boxmaker up")
        yield home, up
    finally:
        code = up.stop()
        assert code == 0, "\n".join(up.lines[-60:])


def run(*, turns: int, sessions: int, kills: int, seed: int, workdir: Path) -> Report:
    with serve_scripted_model() as model:
        model.respond = assistant
        with stack(workdir, model) as (home, up):
            try:
                report = trio.run(
                    lambda: day(home, up, turns=turns, sessions=sessions, kills=kills, seed=seed)
                )
            except BaseException:
                print("\n".join(up.lines[-80:]), file=sys.stderr)
                raise
        assert model.refused == [], model.refused
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--turns", type=int, default=0, help="default: kills + 40")
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args(argv)
    turns = args.turns or args.kills + 40
    with tempfile.TemporaryDirectory(prefix="bxchaos", dir="/tmp") as scratch:
        started = time.monotonic()
        report = run(
            turns=turns,
            sessions=args.sessions,
            kills=args.kills,
            seed=args.seed,
            workdir=Path(scratch),
        )
    print(f"chaos day: {report.summary()} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
