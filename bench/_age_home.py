"""A heavy owner's home of a given age, built through boxmaker's own code, for `bench age`.

Per day: 60 sessions, about 400 tool calls and 5 approved memory edits, at times spread
over the day; and one session of 2,000 records at the end, for the resume figure. Each
piece is written by the code that writes it in a running boxmaker, so every role takes
the home as its own:

- the home itself: bxctl's `init_home`;
- sessions: loopd's `SessionStore.create` (baseline, empty log, the catalog's line) and
  `Session.append` (one record a line); each baseline holds system.md and the memory
  block as it stood then (memoryd's `memory_block`) and loopd's `tool_schemas`;
- the audit log: brokerd's `Audit`, each call's `started` and `ok` records made by
  brokerd's `audit_record` under the home's grants, chained, signed, checkpointed;
- memory edits: memoryd's `EditApplier.apply_now` (memory.md or user.md, archive.md, the
  journal), each also an approved `memory` call in its session and the audit log, with
  `proto.utc_now` set to the edit's moment.

Message text is `bench.corpus`'s (English-like, Zipf vocabulary). The build does not
fsync each record: `os.fsync` is a no-op while it runs, and the home is synced once at
the end (a bench fixture, built in a temporary name and renamed when whole).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import msgspec

import entries
import proto
from bench import corpus
from brokerd._arguments import parse_arguments
from brokerd._audit import Audit
from brokerd._grants import Grant, builtin_grants, load_grants
from brokerd._outcomes import Ran, Run, audit_record
from brokerd._runtimes import Approved, Auto, LabelledOutput, RunBy, RunRequest
from bxctl._init import init_home
from loopd._sessions import Session, SessionStore, new_session_id
from loopd._tools import tool_schemas
from memoryd._block import memory_block
from memoryd._config import load_settings
from memoryd._edits import EditApplier
from memoryd._files import MemoryDir
from proto import (
    AssistantRecord,
    Baseline,
    Label,
    MemoryAdd,
    MemoryArgs,
    MemoryConsolidate,
    MemoryRemove,
    MemoryReplace,
    ToolCall,
    ToolResultRecord,
    UserRecord,
)

FORMAT_VERSION = 1
"""Bump when the builder writes a different home: cached homes of another version are
not reused (they sit in a folder of their own)."""

SESSIONS_A_DAY = 60
CALLS_A_DAY = 400
EDITS_A_DAY = 5
LONG_SESSION_RECORDS = 2000
END = datetime(2026, 12, 1, tzinfo=UTC)
"""The moment the home's last day ends (fixed: a rebuild writes the same months)."""
MODEL_URL = "http://127.0.0.1:9/v1"
"""What `init` is given; `bench age` points loopd at its own model server when it runs."""
ORIGIN = "bxctl"
OWNER_HOME = "/home/owner"
FLUSH_EVERY = 10_000
"""Audit records written between two flushes (its head and checkpoint are kept up)."""


class HomeFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a built home holds, kept beside it (`facts.json`)."""

    version: int
    years: float
    days: int
    sessions: int
    records: int
    calls: int
    audit_records: int
    edits: int
    archive_entries: int
    long_session: str
    why_word: str
    """A word of an entry of memory.md when the build ended (`memory why`)."""
    recall_word: str
    """A content word of the vocabulary, neither rare nor common (`recall`)."""
    built_s: float


FACTS_FILE = "facts.json"
_facts = msgspec.json.Decoder(HomeFacts)


def days_of(years: float) -> int:
    """The days of a home `years` old (at least one)."""
    return max(1, round(years * 365))


def age_name(years: float) -> str:
    """`0.1y`, `1y`, `3y`: the cache folder of an age."""
    return f"{years:g}y"


def cached_home(
    root: Path, years: float, *, rebuild: bool, say: Callable[[str, int, int], None]
) -> tuple[Path, HomeFacts]:
    """The home of `years` under `root/<version>/<age>/home`, built first when missing.

    A build goes to a folder of a temporary name, renamed when whole: a killed build is
    never taken for a cached home. `say(what, done, total)` reports the build's progress.
    """
    folder = root / str(FORMAT_VERSION) / age_name(years)
    facts_path = folder / FACTS_FILE
    if rebuild and folder.exists():
        shutil.rmtree(folder)
    if not facts_path.is_file():
        building = folder.with_name(f"{folder.name}.building-{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        facts = build_home(building / "home", years, say)
        (building / FACTS_FILE).write_bytes(msgspec.json.encode(facts))
        os.sync()
        shutil.rmtree(folder, ignore_errors=True)
        building.rename(folder)
        rehome(folder / "home")
    return folder / "home", _facts.decode(facts_path.read_bytes())


def rehome(home: Path) -> None:
    """Point the role configs at `home` (a copied or renamed home names its old place)."""
    for config in (home / "config").glob("*.toml"):
        lines = config.read_text().splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.startswith("home = "):
                lines[i] = f'home = "{home}"' + line[line.index('"', 8) + 1 :]
        config.write_text("".join(lines))


@contextlib.contextmanager
def _no_fsync() -> Iterator[None]:
    """Every fsync of the build skipped: the home is synced once, whole, at the end."""
    with mock.patch.object(os, "fsync", return_value=None):
        yield


class _Builder:
    """The state of one build: the home's writers, the text, the counts."""

    def __init__(self, home: Path, years: float) -> None:
        self.home = home
        self.rng = random.Random(20261201)
        words = corpus.vocabulary(self.rng, 50_000)
        self.words = words
        self.text = corpus._Text(self.rng, words, corpus._cumulative(words))
        self.pool = [self.text.text(self.rng.randint(60, 300)) for _ in range(400)]
        init_home(home, model_url=MODEL_URL)
        settings = load_settings(home / "config" / "memoryd.toml")
        self.memory = MemoryDir(settings.memory_dir)
        self.memory.ensure(settings.soul_starter)
        self.approval_key = proto.ensure_key(home / "keys" / "approval.key", shared=True)
        self.editor = EditApplier(self.memory, self.approval_key)
        self.store = SessionStore(home / "sessions")
        self.system = (home / "config" / "system.md").read_text().rstrip("\n")
        self.tools = tool_schemas()
        self.block = memory_block(self.memory)
        self.audit = Audit(home / "audit", home / "keys" / "audit.key")
        self.audit.open()
        grants = load_grants(home / "grants")
        self.grants: dict[str, Grant] = {g.tool: g for g in builtin_grants()}
        for tool in ("read_file", "list_dir", "http_fetch"):
            self.grants[tool] = grants.find(tool)[0]
        self.days = days_of(years)
        self.years = years
        self.sessions = self.records = self.calls = self.audited = self.edits = 0
        self.archived = 0
        self._unflushed = 0

    # -- text and calls ----------------------------------------------------------------

    def _word(self) -> str:
        return self.words[self.rng.randrange(150, 5000)]

    def _call(self, n: int) -> tuple[ToolCall, str, Label]:
        """A tool call of the usual mix, its result's text and label."""
        pick = self.rng.random()
        arguments: dict[str, str | int]
        if pick < 0.35:
            tool, arguments = "read_file", {"path": f"{OWNER_HOME}/notes/{self._word()}.txt"}
            result, label = self.rng.choice(self.pool), self.grants[tool].label
        elif pick < 0.55:
            tool, arguments = "list_dir", {"path": f"{OWNER_HOME}/notes/{self._word()}"}
            names = [f"{self._word()}.txt" for _ in range(self.rng.randint(2, 12))]
            result, label = "\n".join(names), self.grants[tool].label
        elif pick < 0.75:
            tool = "http_fetch"
            arguments = {"url": f"https://en.wikipedia.org/wiki/{self._word().capitalize()}"}
            result, label = self.rng.choice(self.pool), self.grants[tool].label
        else:
            tool, arguments = "recall", {"query": f"{self._word()} {self._word()}", "k": 5}
            result, label = self.text.text(self.rng.randint(30, 120)), Label()
        call = ToolCall(id=f"call_{n}", name=tool, arguments=json.dumps(arguments))
        return call, result, label

    def _approval(self) -> Approved:
        alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
        approval = "ap-" + "".join(self.rng.choices(alphabet, k=6))
        return Approved(approval=approval, surface=proto.Surface(via="bxctl", uid=os.getuid()))

    def _audit(
        self, session: Session, call: ToolCall, by: RunBy, output: LabelledOutput, now: datetime
    ) -> None:
        """The call's two records, as brokerd writes them: decided (`started`), then its end."""
        request = proto.ToolRequest(session=session.id, call=call, taint=session.taint())
        arguments = parse_arguments(call.name, call.arguments)
        run = Run(
            RunRequest(
                session=session.id,
                call_id=call.id,
                tool=call.name,
                arguments=arguments,
                taint=session.taint(),
                by=by,
            ),
            self.grants[call.name],
        )
        for what in (run, Ran(run, output)):
            record = audit_record(what, request, session.taint(), now)
            assert record is not None
            self.audit._append_now(record, now, False)
        self.audited += 2
        self._unflushed += 2
        if self._unflushed >= FLUSH_EVERY:
            self.audit._flush_now()
            self._unflushed = 0

    # -- memory edits ------------------------------------------------------------------

    def _edit_args(self) -> MemoryArgs:
        """An edit that keeps memory.md and user.md near their limits, as a heavy owner's."""
        file: proto.MemoryFile = "memory" if self.rng.random() < 0.7 else "user"
        current = self.memory.read_entries(file)
        new = self.text.text(self.rng.randint(8, 30))
        room = entries.limit_for(file) - entries.chars(current) - len(new) - 4
        pick = self.rng.random()
        if room < 0:
            moved = set(current[:3])
            items = [
                proto.ConsolidateItem(old=entry, move=True)
                if entry in moved
                else proto.ConsolidateItem(old=entry, keep=True)
                for entry in current
            ]
            return MemoryConsolidate(file=file, entries=[*items, proto.ConsolidateItem(text=new)])
        if not current or pick < 0.6:
            return MemoryAdd(file=file, text=new)
        old = self.rng.choice(current)
        if pick < 0.85:
            return MemoryReplace(file=file, old=old, text=new)
        return MemoryRemove(file=file, old=old)

    def _edit(self, session: Session, call_id: str, now: datetime) -> tuple[ToolCall, str]:
        """One approved memory edit applied by memoryd at `now`; its call and its answer."""
        args = self._edit_args()
        arguments = parse_arguments("memory", msgspec.json.encode(args).decode()).canonical
        call = ToolCall(id=call_id, name="memory", arguments=arguments)
        by = self._approval()
        token = proto.approval_token(
            self.approval_key,
            approval=by.approval,
            session=session.id,
            call=call.id,
            tool=call.name,
            arguments=arguments,
        )
        authority = proto.Authority(approval=by.approval, token=token, decided=by.decided)
        request = proto.ToolRequest(session=session.id, call=call, taint=session.taint())
        with mock.patch.object(proto, "utc_now", return_value=now):
            response = self.editor.apply_now(request, authority, args)
        if response.status != "ok":
            raise SystemExit(f"the bench's memory edit was refused: {response.content}")
        self.edits += 1
        if isinstance(args, MemoryConsolidate):
            self.archived += sum(1 for item in args.entries if item.move)
        self.block = memory_block(self.memory)  # the next session's baseline holds it
        self._audit(session, call, by, LabelledOutput("ok", response.content, Label()), now)
        return call, response.content

    # -- sessions ----------------------------------------------------------------------

    def _session(self, start: datetime) -> Session:
        session_id = new_session_id()
        baseline = Baseline(
            session=session_id,
            epoch=0,
            created=proto.utc_stamp(start),
            model="local",
            system=self.system + "\n\n" + self.block,
            tools=self.tools,
        )
        self.sessions += 1
        return self.store.create(session_id, baseline, ORIGIN)

    def _append(self, session: Session, record: proto.SessionRecord) -> None:
        session.append(record)
        self.records += 1

    def _turn(self, session: Session, calls: int, now: datetime, edit_at: int | None) -> datetime:
        """The owner's message, `calls` calls (one by one), the answer; returns the time after."""
        stamp = proto.utc_stamp
        self._append(
            session, UserRecord(time=stamp(now), content=self.text.text(self.rng.randint(5, 40)))
        )
        for i in range(calls):
            now += timedelta(seconds=self.rng.randint(2, 30))
            self.calls += 1
            if edit_at == i:
                call, result = self._edit(session, f"call_{self.calls}", now)
                label = Label()
            else:
                call, result, label = self._call(self.calls)
                tool = call.name
                by: RunBy = self._approval() if self.grants[tool].mode == "ask" else Auto()
                self._audit(session, call, by, LabelledOutput("ok", result, label), now)
            content = self.text.text(self.rng.randint(5, 15)) if self.rng.random() < 0.4 else None
            self._append(
                session, AssistantRecord(time=stamp(now), content=content, tool_calls=[call])
            )
            self._append(
                session,
                ToolResultRecord(
                    time=stamp(now),
                    call_id=call.id,
                    name=call.name,
                    content=result,
                    class_=label.class_,
                    untrusted=label.untrusted,
                ),
            )
        now += timedelta(seconds=self.rng.randint(2, 60))
        reasoning = self.rng.choice(self.pool) if self.rng.random() < 0.5 else None
        answer = self.text.text(self.rng.randint(15, 100))
        # The server's count of the whole conversation: loopd's own estimate of it.
        tokens = session.estimated_tokens(len(answer) + len(reasoning or ""))
        self._append(
            session,
            AssistantRecord(
                time=stamp(now), content=answer, reasoning_content=reasoning, tokens=tokens
            ),
        )
        return now

    def day(self, day: int) -> None:
        """One day of the owner: its sessions, calls and edits."""
        begin = END - timedelta(days=self.days - day)
        step = timedelta(days=1) / SESSIONS_A_DAY
        edits = set(self.rng.sample(range(SESSIONS_A_DAY), EDITS_A_DAY))
        per_session = CALLS_A_DAY / SESSIONS_A_DAY
        for s in range(SESSIONS_A_DAY):
            now = begin + s * step + timedelta(seconds=self.rng.randint(0, 60))
            session = self._session(now)
            calls = int(per_session) + (self.rng.random() < per_session % 1)
            turns = self.rng.randint(1, 3)
            split = sorted(self.rng.choices(range(calls + 1), k=turns - 1))
            shares = [b - a for a, b in zip([0, *split], [*split, calls], strict=True)]
            edit_turn = self.rng.randrange(turns) if s in edits else None
            for t, share in enumerate(shares):
                edit_at = None
                if t == edit_turn:
                    edit_at = self.rng.randrange(share) if share else 0
                    share = max(share, 1)
                now = self._turn(session, share, now, edit_at)
                now += timedelta(seconds=self.rng.randint(20, 600))

    def long_session(self) -> str:
        """The session of 2,000 records, just before the home's end: 500 turns of one call."""
        now = END - timedelta(hours=1)
        session = self._session(now)
        for _ in range(LONG_SESSION_RECORDS // 4):
            now = self._turn(session, 1, now, None)
        return session.id

    def finish(self, started: float, long_session: str) -> HomeFacts:
        self.audit._flush_now()
        memory = self.memory.read_entries("memory")
        why = next(
            (w for w in memory[-1].split() if w.isalpha() and len(w) > 5), memory[-1].split()[0]
        )
        return HomeFacts(
            version=FORMAT_VERSION,
            years=self.years,
            days=self.days,
            sessions=self.sessions,
            records=self.records,
            calls=self.calls,
            audit_records=self.audited,
            edits=self.edits,
            archive_entries=self.archived,
            long_session=long_session,
            why_word=why.strip(".,").lower(),
            recall_word=self.words[400],
            built_s=time.perf_counter() - started,
        )


def build_home(home: Path, years: float, say: Callable[[str, int, int], None]) -> HomeFacts:
    """Build the home of `years` at `home` (see the module doc); what it holds."""
    started = time.perf_counter()
    with _no_fsync():
        builder = _Builder(home, years)
        for day in range(builder.days):
            builder.day(day)
            say(f"{age_name(years)}: day {day + 1} of {builder.days}", day + 1, builder.days)
        long_session = builder.long_session()
        return builder.finish(started, long_session)
