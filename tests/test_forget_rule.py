"""One rule for "holds": every store's look, its forget and its check after agree with it.

Texts with invisible characters (a zero-width space, a soft hyphen, a word joiner), and
the pairs full case folding joins (ß and SS, the three sigmas, ﬁ and FI), are written into
every store a forget reaches: memoryd's memory file, journal, recall log and recall
index; loopd's session logs; brokerd's audit log; the bridge's state; the chat's input
history. Each store must count as holding exactly the texts `proto.holds` says hold the
needle, take each of them out, and after that find none by its own check after.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from lines_store import holding_files
from memoryd_harness import SESSION, append, user

import proto
from brokerd._audit import Audit
from brokerd._audit_forget import AuditLogForget
from bxctl._history import entry_bytes, history_texts, scrub
from loopd._forget import SessionsForget
from loopd._sessions import SessionStore
from mattermostd._forget import scrub_state, state_holds
from mattermostd._state import Inflight, State
from memoryd import Memoryd, on_home

INVISIBLE = ["\u200b", "\u00ad", "\u2060", "\ufeff", "\u200d"]
LETTERS = "aßsΣ\u03c3\u03c2kKfiﬁxZ7"  # the sigmas: capital, small, final
NEEDLES = st.text(alphabet=LETTERS, min_size=3, max_size=6).filter(
    lambda n: proto.forget_problem(n) is None and n.strip() == n
)
FILLERS = st.text(alphabet="bcd emn.", max_size=6)


@st.composite
def variant(draw: st.DrawFn, needle: str) -> str:
    """The needle as a reader may meet it: each letter in some case, invisible ones between."""
    out = []
    for c in needle:
        out.append(draw(st.sampled_from([c, c.upper(), c.lower(), c.casefold()])))
        if draw(st.booleans()):
            out.append(draw(st.sampled_from(INVISIBLE)))
    return "".join(out)


@st.composite
def texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    needle = draw(NEEDLES)
    said = []
    for _ in range(draw(st.integers(1, 4))):
        middle = draw(variant(needle)) if draw(st.booleans()) else draw(FILLERS)
        said.append(f"{draw(FILLERS)}w{middle}w{draw(FILLERS)}".strip())
    return needle, list(dict.fromkeys(said))


@asynccontextmanager
async def memoryd_on(base: Path) -> AsyncIterator[Memoryd]:
    starter = base / "soul.md"
    starter.write_text("a persona\n")
    async with on_home(base / "home", soul_starter=starter) as role:
        yield role


async def memoryd_agrees(base: Path, needle: str, said: list[str], holding: list[str]) -> None:
    async with memoryd_on(base) as role:
        role.memory.write_entries("memory", tuple(said))
        now = datetime(2026, 12, 7, tzinfo=UTC)
        record = proto.RecallRecord(
            time="2026-12-07T00:00:00Z", session=SESSION, query="q", k=1, hits=[]
        )
        role.memory.recalls.mkdir(mode=0o700, exist_ok=True)
        for text in said:
            line = msgspec.structs.replace(record, query=text)
            proto.append_line(proto.month_file(role.memory.recalls, now), msgspec.json.encode(line))
        append(role.settings.sessions_dir, [user(text) for text in said])
        await role.index.session_updated(SESSION)
        rows = await trio.to_thread.run_sync(role.index.holding, needle)
        assert sorted(text for _, text, *_ in rows) == sorted(holding)
        plan = await role.forget.plan("fg-rule000001", needle, None)
        assert plan.counts.get("memory.md", 0) == len(holding)
        assert plan.counts.get("recall log", 0) == len(holding)
        applied = await role.forget_part.handle(
            proto.ForgetApply(plan="fg-rule000001", text=needle)
        )
        assert isinstance(applied, proto.ForgetApplied)
        assert applied.conflicts == []
        assert await role.forget.verify(plan, needle) == []
        home = role.settings.home
        assert holding_files(home / "memory", needle) == []
        assert role.memory.read_entries("memory") == tuple(t for t in said if t not in holding)


async def loopd_agrees(base: Path, needle: str, said: list[str], holding: list[str]) -> None:
    store = SessionStore(base / "sessions")
    baseline = proto.Baseline(
        session="chat-rule0001", epoch=0, created="t", model="m", system="s", tools=[]
    )
    session = store.create("chat-rule0001", baseline)
    for text in said:
        session.append(proto.UserRecord(time="t", content=text))

    @asynccontextmanager
    async def hold(session: str) -> AsyncIterator[None]:
        yield

    async def notify(session: str, plan: str) -> None:
        return None

    sessions = SessionsForget(store, hold, notify)
    plan = await sessions.plan("fg-rule000001", needle, None)
    assert plan.counts["sessions"] == len(holding)
    applied = await proto.ForgetPart(sessions).handle(
        proto.ForgetApply(plan="fg-rule000001", text=needle)
    )
    assert isinstance(applied, proto.ForgetApplied)
    assert applied.conflicts == []
    assert await sessions.verify(plan, needle) == []
    kept = [
        r.content for r in store.load("chat-rule0001").records if isinstance(r, proto.UserRecord)
    ]
    assert [t for t in kept if proto.holds(t, needle)] == []
    assert [t for t in said if t not in holding] == [t for t in kept if proto.MARKER not in t]


async def audit_agrees(base: Path, needle: str, said: list[str], holding: list[str]) -> None:
    audit = Audit(base / "audit", base / "audit.key")
    audit.open()
    for n, text in enumerate(said):
        record = proto.AuditRecordV3(
            v=3,
            time="2026-12-07T00:00:00Z",
            session="chat-rule0001",
            call=f"c{n}",
            tool="recall",
            arguments=json.dumps({"query": text}),
            decision="auto",
            label=proto.Label(),
            status="ok",
            taint=proto.Label(),
            commits=proto.TextCommits(arguments=""),
            prev="",
            mac="",
        )
        await audit.append(record, datetime(2026, 12, 7, tzinfo=UTC))
    logged = AuditLogForget(audit)
    plan = await logged.plan("fg-rule000001", needle, None)
    assert plan.counts["audit"] == len(holding)
    applied = await proto.ForgetPart(logged).handle(
        proto.ForgetApply(plan="fg-rule000001", text=needle)
    )
    assert isinstance(applied, proto.ForgetApplied)
    assert await logged.verify(plan, needle) == []
    assert (await audit.verify()).broken_at is None


def surfaces_agree(needle: str, said: list[str], holding: list[str]) -> None:
    state = State(
        inflight=[
            Inflight(
                post_id=f"p{n}", channel_id="c", root_id="r", session="mm-r", text=t, create_at=0
            )
            for n, t in enumerate(said)
        ]
    )
    assert state_holds(state, needle) == len(holding)
    assert scrub_state(state, needle) == len(holding)
    assert state_holds(state, needle) == 0
    history = b"".join(entry_bytes(t, datetime(2026, 12, 7, tzinfo=UTC)) for t in said)
    left, count = scrub(history, needle)
    assert count == len(holding)
    assert history_texts(left) == [t for t in said if t not in holding]


def scratch() -> Path:
    base = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    for part in "mla":
        (base / part).mkdir()
    return base


@example(("ßk", ["w55\u200bSSk\u00adw", "wskw", "wSSKw"]))
@example(("\u03c3ak", ["w\u03a3AK\u2060w", "w\u03c2akw", "wsakw"]))
@example(("ﬁx", ["wFIXw", "wf\u00adixw", "wfxw"]))
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(texts())
async def test_every_store_holds_by_the_one_rule_and_its_check_after_agrees(
    drawn: tuple[str, list[str]],
) -> None:
    needle, said = drawn
    holding = [t for t in said if proto.holds(t, needle)]
    base = scratch()
    try:
        with trio.fail_after(30):
            await memoryd_agrees(base / "m", needle, said, holding)
            await loopd_agrees(base / "l", needle, said, holding)
            await audit_agrees(base / "a", needle, said, holding)
        surfaces_agree(needle, said, holding)
    finally:
        shutil.rmtree(base, ignore_errors=True)
