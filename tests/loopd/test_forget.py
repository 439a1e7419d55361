"""loopd's part of a forget: no session file keeps the text, and every session keeps its shape.

A text spread over any sessions' messages (the owner's, the model's content and
reasoning, a tool call's arguments, a tool's result), a torn last line and the frozen
baselines is taken out by prepare + apply over the broker-loop socket; every session then
loads with the same records (count, types, ids, call ids, refs, labels), a second apply
changes nothing, and a plan committed before a crash is finished at the next start.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import inmemory
import msgspec
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lines_store import holding_files

import proto
from bxctl import app
from bxctl._common import CommandError
from bxctl._sessions import resolve_session
from loopd import Loopd
from loopd._config import ModelSection, resolve
from loopd._forget import plan_sessions
from loopd._sessions import SessionStore
from loopd._tools import tool_schemas
from proto import (
    AssistantRecord,
    Baseline,
    Class,
    ForgetApplied,
    ForgetApply,
    ForgetLook,
    ForgetLooked,
    ForgetPrepare,
    ForgetPrepared,
    SessionRecord,
    ToolCall,
    ToolResultRecord,
    UserRecord,
)

TIME = "2026-12-05T10:00:00Z"
LATER = "2026-12-06T10:00:00Z"
PLAN = "fg-testplan0001"
# No "z" and no "q" outside the needle, whose every copy starts with "zq": nothing but a
# copy of it can hold it, so what a test finds after a forget is a copy left behind.
PLAIN = st.text(alphabet="abcdefghijkl mnoprstuvwxy.,!é{}[]:", max_size=12)
NEEDLES = st.builds(
    lambda tail: "zq" + tail,
    st.text(alphabet="abcdefgh-_ 0123456789éÜ", min_size=1, max_size=8).filter(
        lambda t: not t.endswith(" ")
    ),
)


def random_case(text: str, flips: list[bool]) -> str:
    return "".join(c.upper() if flips[i % len(flips)] else c for i, c in enumerate(text))


@st.composite
def said(draw: st.DrawFn, needle: str) -> str:
    """A text that holds the needle (in any case) or not."""
    if not draw(st.booleans()):
        return draw(PLAIN)
    flips = draw(st.lists(st.booleans(), min_size=1, max_size=4))
    return draw(PLAIN) + random_case(needle, flips) + draw(PLAIN)


@st.composite
def arguments(draw: st.DrawFn, needle: str) -> str:
    """A tool call's arguments: JSON (escaped, as some servers send it, or not), or not JSON."""
    text = draw(said(needle))
    match draw(st.sampled_from(["json", "escaped", "nested", "broken"])):
        case "json":
            return json.dumps({"query": text}, ensure_ascii=False)
        case "escaped":
            return json.dumps({"query": text, "n": 3})  # é as \\u00e9
        case "nested":
            return json.dumps({"edit": json.dumps({"add": text})})
        case _:
            return '{"query": "' + text


@st.composite
def records(draw: st.DrawFn, needle: str) -> list[SessionRecord]:
    out: list[SessionRecord] = []
    for n in range(draw(st.integers(0, 6))):
        match draw(st.sampled_from(["user", "assistant", "tool"])):
            case "user":
                ref = draw(st.none() | st.just(f"ref-{n}"))
                out.append(UserRecord(time=TIME, content=draw(said(needle)), ref=ref))
            case "assistant":
                calls = [
                    ToolCall(id=f"call_{n}_{k}", name="recall", arguments=draw(arguments(needle)))
                    for k in range(draw(st.integers(0, 2)))
                ]
                out.append(
                    AssistantRecord(
                        time=TIME,
                        content=draw(st.none() | said(needle)),
                        reasoning_content=draw(st.none() | said(needle)),
                        tool_calls=calls,
                        tokens=draw(st.none() | st.integers(1, 999)),
                    )
                )
            case _:
                out.append(
                    ToolResultRecord(
                        time=TIME,
                        call_id=f"call_{n}_0",
                        name="recall",
                        content=draw(said(needle)),
                        class_=draw(st.sampled_from(list(Class))),
                        untrusted=draw(st.booleans()),
                    )
                )
    return out


@st.composite
def homes(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, list[SessionRecord], bytes]]]:
    """A needle, and sessions: (id, system text, records, a torn last line or b"")."""
    needle = draw(NEEDLES)
    sessions = []
    for i in range(draw(st.integers(1, 4))):
        system = "You are boxmaker.\n\n" + draw(said(needle))
        torn = draw(
            st.just(b"") | said(needle).map(lambda t: b'{"type":"user","content":"' + t.encode())
        )
        sessions.append((f"chat-{i:08d}", system, draw(records(needle)), torn))
    return needle, sessions


def make_loopd(home: Path, config_dir: Path, **settings_: Any) -> Loopd:
    config = proto.LoopdConfig(
        paths=proto.PathsSection(home=str(home)),
        model=ModelSection(url="http://127.0.0.1:9/v1"),
    )
    import dataclasses

    return Loopd(dataclasses.replace(resolve(config, config_dir=config_dir), **settings_))


def write_session(
    store: SessionStore,
    session: str,
    system: str,
    logged: Sequence[SessionRecord],
    torn: bytes,
    *,
    created: str = TIME,
) -> None:
    baseline = Baseline(
        session=session, epoch=0, created=created, model="m", system=system, tools=tool_schemas()
    )
    made = store.create(session, baseline)
    for record in logged:
        made.append(record)
    if torn:
        with open(made.log_path, "ab") as f:
            f.write(torn)


def shape(record: SessionRecord) -> tuple[object, ...]:
    """What a forget must keep of a record: all but its text."""
    match record:
        case UserRecord():
            return ("user", record.time, record.ref)
        case AssistantRecord():
            calls = tuple((c.id, c.name) for c in record.tool_calls)
            return ("assistant", record.time, record.tokens, calls)
        case ToolResultRecord():
            return ("tool_result", record.time, record.call_id, record.name, record.label)
    raise AssertionError(record)


def holders(root: Path, needle: str) -> list[str]:
    """Every file under `root` whose bytes hold the needle, folded (`proto.fold`)."""
    return [str(path.relative_to(root)) for path in holding_files(root, needle)]


def counts(holdings: list[proto.Holding]) -> list[tuple[str, int]]:
    return [(h.store, h.count) for h in holdings]


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bx", dir="/tmp") as d:
        path = Path(d)
        (path / "system.md").write_text("You are boxmaker.\n")
        yield path


async def broker(loopd: Loopd, request: proto.Message, expect: type[Any]) -> Any:
    return await inmemory.call(proto.BROKER_LOOP, loopd.handle_broker, request, expect)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(home=homes(), with_text=st.booleans())
async def test_a_forget_leaves_no_copy_and_every_session_its_shape(
    home: tuple[str, list[tuple[str, str, list[SessionRecord], bytes]]], with_text: bool
) -> None:
    needle, sessions = home
    with scratch() as d:
        loopd = make_loopd(d / "home", d)
        store = loopd.store
        for session, system, logged, torn in sessions:
            write_session(store, session, system, logged, torn)
        before = {s: store.load(s) for s, *_ in sessions}
        lines = {s: (store.root / s / "0.jsonl").read_bytes().count(b"\n") for s, *_ in sessions}
        looked = await broker(loopd, ForgetLook(text=needle), ForgetLooked)
        prepared = await broker(loopd, ForgetPrepare(plan=PLAN, text=needle), ForgetPrepared)
        assert counts(prepared.holdings) == counts(looked.holdings)
        assert holders(store.root / proto.PLAN_DIR, needle) == []  # the plan never holds it
        applied = await broker(
            loopd, ForgetApply(plan=PLAN, text=needle if with_text else None), ForgetApplied
        )
        assert applied.conflicts == []
        assert counts(applied.holdings) == counts(looked.holdings)
        assert holders(store.root, needle) == []
        assert [p.name for p in (store.root / proto.PLAN_DIR).iterdir()] == [proto.ENDED_FILE]
        for session, *_ in sessions:
            after = store.load(session)
            assert [shape(r) for r in after.records] == [shape(r) for r in before[session].records]
            assert after.label == before[session].label
            assert after.baseline.tools == before[session].baseline.tools
            log_bytes = (store.root / session / "0.jsonl").read_bytes()
            assert log_bytes.count(b"\n") == lines[session]
        done = snapshot(store.root)
        for text in (needle, None):  # asked again (an answer lost): said again, nothing redone
            again = await broker(loopd, ForgetApply(plan=PLAN, text=text), ForgetApplied)
            assert again.again
            assert counts(again.holdings) == counts(applied.holdings)
        assert snapshot(store.root) == done


async def test_look_names_the_sessions_newest_first_and_writes_nothing(short_dir: Path) -> None:
    loopd = make_loopd(short_dir / "home", short_dir)
    (short_dir / "system.md").write_text("You are boxmaker.\n")
    said_it = [UserRecord(time=TIME, content="my code is ZEBRA-7731")]
    write_session(loopd.store, "chat-00000002", "sys; zebra-7731", said_it, b"")
    write_session(
        loopd.store, "chat-00000001", "You are boxmaker.", said_it * 2, b"", created=LATER
    )
    write_session(loopd.store, "chat-00000003", "You are boxmaker.", [], b"", created=LATER)
    before = snapshot(loopd.store.root)
    looked = await broker(loopd, ForgetLook(text="Zebra-7731"), ForgetLooked)
    assert looked.holdings == [
        proto.Holding(
            store="sessions", count=3, unit="messages", names=["chat-00000001", "chat-00000002"]
        ),
        proto.Holding(store="baselines", count=1, unit="sessions", names=["chat-00000002"]),
    ]
    assert snapshot(loopd.store.root) == before


async def test_abort_ends_an_undecided_plan_and_a_committed_one_is_kept(short_dir: Path) -> None:
    loopd = make_loopd(short_dir / "home", short_dir)
    write_session(
        loopd.store, "chat-00000001", "s", [UserRecord(time=TIME, content="zebra-7731")], b""
    )
    plans = loopd.forget_part.files.plans
    await broker(loopd, ForgetPrepare(plan=PLAN, text="zebra-7731"), ForgetPrepared)
    assert await broker(loopd, proto.ForgetAbort(plan=PLAN), proto.Ok) == proto.Ok()
    assert plans.read(PLAN) is None
    other = "fg-testplan0002"
    await broker(loopd, ForgetPrepare(plan=other, text="zebra-7731"), ForgetPrepared)
    prepared = plans.read(other)
    assert prepared is not None
    committed = msgspec.structs.replace(prepared, stage="committed")
    plans.write(other, committed)
    with pytest.raises(proto.RemoteError) as refused:
        await broker(loopd, proto.ForgetAbort(plan=other), proto.Ok)
    assert refused.value.error.code == "forget-decided"
    assert plans.read(other) == committed


async def test_a_committed_plan_half_applied_is_finished_at_start(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    loopd = make_loopd(short_dir / "home", short_dir)
    store = loopd.store
    for n in range(2):
        logged = [UserRecord(time=TIME, content=f"code {n}: ZEBRA-7731")]
        write_session(store, f"chat-0000000{n}", "sys ZEBRA-7731", logged, b"")
    plans = loopd.forget_part.files.plans
    edits = plan_sessions(store.root, "zebra-7731")
    plans.write(PLAN, proto.ForgetPlan(plan=PLAN, stage="committed", edits=edits))
    proto.apply_file_edits(store.root, edits[:1])  # killed after the first file
    plans.write("fg-preparedlong1", proto.ForgetPlan(plan="fg-preparedlong1"))
    a_day_ago = time.time() - 86400  # prepared a day ago: still brokerd's to decide
    os.utime(plans.path("fg-preparedlong1"), (a_day_ago, a_day_ago))
    assert holders(store.root, "zebra-7731")  # the half not yet applied

    restarted = make_loopd(short_dir / "home", short_dir)
    await restarted.recover(nursery)
    assert holders(store.root, "zebra-7731") == []
    assert plans.ids() == ["fg-preparedlong1"]
    assert restarted.forget_part.files.ended(PLAN) is not None
    assert [len(store.load(f"chat-0000000{n}").records) for n in range(2)] == [1, 1]


async def test_a_damaged_torn_line_is_redacted_as_text_and_stays_a_line(short_dir: Path) -> None:
    loopd = make_loopd(short_dir / "home", short_dir)
    write_session(
        loopd.store,
        "chat-00000001",
        "s",
        [UserRecord(time=TIME, content="hi")],
        b'{"type":"user","content":"my Zebra-7731 and ZEBRA-7731 too',
    )
    log_path = loopd.store.root / "chat-00000001" / "0.jsonl"
    await broker(loopd, ForgetApply(plan=PLAN, text="zebra-7731"), ForgetApplied)
    lines = log_path.read_bytes().split(b"\n")
    assert len(lines) == 2
    assert lines[1] == b'{"type":"user","content":"my [forgotten] and [forgotten] too'
    assert loopd.store.load("chat-00000001").records == [UserRecord(time=TIME, content="hi")]


async def test_loopd_finishes_a_decided_forget_before_it_serves_and_answers_brokerd(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    loopd = make_loopd(short_dir / "home", short_dir)
    logged = [UserRecord(time=TIME, content="code ZEBRA-7731")]
    write_session(loopd.store, "chat-00000001", "s", logged, b"")
    edits = plan_sessions(loopd.store.root, "zebra-7731")
    loopd.forget_part.files.plans.write(
        PLAN, proto.ForgetPlan(plan=PLAN, stage="committed", edits=edits)
    )
    shutdown = trio.Event()
    with trio.fail_after(10):
        await loopd.start(nursery, shutdown)
        assert holders(loopd.store.root, "zebra-7731") == []
        looked = await proto.call(
            loopd.settings.forget_socket,
            ForgetLook(text="[forgotten]"),
            ForgetLooked,
            deadline_s=5,
        )
        shutdown.set()
    assert looked.holdings[0].names == ["chat-00000001"]
    assert loopd.settings.forget_socket == short_dir / "home" / "run/broker-loop/loop.sock"


async def test_bxctl_lists_and_resolves_sessions_but_never_the_plans(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = short_dir / "home"
    loopd = make_loopd(home, short_dir)
    logged = [UserRecord(time=TIME, content="code ZEBRA-7731")]
    write_session(loopd.store, "chat-00000001", "s", logged, b"")
    await broker(loopd, ForgetPrepare(plan=PLAN, text="zebra-7731"), ForgetPrepared)
    assert (loopd.store.root / proto.PLAN_DIR / f"{PLAN}.json").is_file()
    assert loopd.store.list() == ["chat-00000001"]
    (home / "config").mkdir()
    assert app(["sessions", "list", "--home", str(home)], result_action="return_value") == 0
    listed = capsys.readouterr()
    assert "chat-00000001" in listed.out
    assert proto.PLAN_DIR not in listed.out + listed.err
    with pytest.raises(CommandError, match="no session"):
        resolve_session(home, ".for")


async def test_apply_finds_a_copy_in_a_session_opened_or_written_since_the_plan(
    short_dir: Path,
) -> None:
    loopd = make_loopd(short_dir / "home", short_dir)
    (short_dir / "system.md").write_text("You are boxmaker.\n")
    write_session(
        loopd.store, "chat-00000001", "s", [UserRecord(time=TIME, content="zebra-7731")], b""
    )
    write_session(loopd.store, "chat-00000002", "s", [UserRecord(time=TIME, content="tea")], b"")
    a_year_on = time.time_ns() + 365 * 86400 * 1_000_000_000  # a clock that jumped: no matter
    for path in (loopd.store.root / "chat-00000002").iterdir():
        os.utime(path, ns=(a_year_on, a_year_on))
    await broker(loopd, ForgetPrepare(plan=PLAN, text="zebra-7731"), ForgetPrepared)
    # after the plan: a session opened with the text, and a turn in the untouched one
    write_session(
        loopd.store, "chat-00000003", "s; ZEBRA-7731", [UserRecord(time=TIME, content="x")], b""
    )
    loopd.store.load("chat-00000002").append(UserRecord(time=TIME, content="Zebra-7731 now"))
    applied = await broker(loopd, ForgetApply(plan=PLAN, text="zebra-7731"), ForgetApplied)
    assert applied.conflicts == []
    assert holders(loopd.store.root, "zebra-7731") == []
    assert counts(applied.holdings) == [("sessions", 2), ("baselines", 1)]
