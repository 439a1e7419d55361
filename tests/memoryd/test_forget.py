"""memoryd's part of a forget: look, prepare, apply, abort, and finishing after a crash."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import sqlean
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memoryd_harness import SESSION, append, log_path, progress, said, user

import entries
import proto
from memoryd import Memoryd, on_home
from memoryd._edits import read_history, reconcile
from memoryd._forget import PLAN_DIR, redact_journal_line
from memoryd._owner import plan_undo
from proto import (
    AppliedEdit,
    Error,
    ForgetApplied,
    ForgetApply,
    ForgetLook,
    ForgetLooked,
    ForgetPrepare,
    ForgetPrepared,
    HandChange,
    HitSource,
    RecallRecord,
)

CAP_S = 30
PLAN = "fg-abcdef123456"
_encoder = msgspec.json.Encoder()


@asynccontextmanager
async def running(base: Path) -> AsyncIterator[Memoryd]:
    """memoryd on the home under `base` as `serve` starts it (committed plans finished)."""
    starter = base / "soul.md"
    starter.write_text("a persona\n")
    async with on_home(base / "home", soul_starter=starter) as role:
        yield role


def journal_line(before: list[str], after: list[str], arguments: str, call: str) -> str:
    line = AppliedEdit(
        time="2026-09-20T14:02:03Z",
        session=SESSION,
        call=call,
        approval=f"ap-{call}",
        action="add",
        file="memory.md",
        before=before,
        after=after,
        arguments=arguments,
    )
    return _encoder.encode(line).decode()


def spread(role: Memoryd, copies: list[str]) -> None:
    """Write each of `copies` (the text in some case) into every store memoryd has."""
    memory = role.memory
    home = role.settings.home
    first, *rest = copies
    kept = "an entry that stays"
    memory.write_entries("memory", (kept, f"locker code: {first}"))
    memory.write_entries("user", tuple(f"the owner said {c} once" for c in rest) or ("plain",))
    moved = datetime(2026, 9, 24, 20, 14, tzinfo=UTC)
    memory.append_archive(
        entries.archive_record(
            "archived, harmless", name="memory.md", session=SESSION, moved_at=moved
        )
        + "".join(
            entries.archive_record(
                f"archived {c}", name="memory.md", session=SESSION, moved_at=moved
            )
            for c in copies
        )
    )
    now = datetime(2026, 9, 24, tzinfo=UTC)
    for n, copy in enumerate(copies):
        arguments = json.dumps({"action": "add", "file": "memory", "text": f"code {copy}"})
        before = [kept] if n == 0 else [kept, f"locker code: {first}"]
        memory.append_journal(
            journal_line(before, [kept, f"locker code: {first}"], arguments, f"c{n}"), now
        )
    memory.recalls.mkdir(mode=0o700, exist_ok=True)
    for copy in copies:
        record = RecallRecord(
            time="2026-09-20T14:02:03Z",
            session=SESSION,
            query=f"what is {copy}",
            k=3,
            hits=[
                HitSource(
                    kind="session",
                    session=SESSION,
                    epoch=0,
                    record=1,
                    time="2026-09-20T14:02:03Z",
                    role="user",
                    class_="private",
                    untrusted=False,
                )
            ],
        )
        proto.append_line(proto.month_file(memory.recalls, now), _encoder.encode(record))
    append(
        home / "sessions",
        [
            user("nothing to see"),
            *[user(f"my locker code is {c}, remember it") for c in copies],
            said("noted", ("memory", json.dumps({"text": f"locker {first}"}))),
        ],
    )
    reconcile(memory)  # the journal says what the files hold now


def holders(home: Path, needle: str) -> list[str]:
    """Files under memory/ and index/ whose bytes hold `needle` in any case (utf-8)."""
    folded = needle.lower().encode()
    found = []
    for top in ("memory", "index"):
        for path in sorted((home / top).rglob("*")):
            if (
                path.is_file()
                and folded in path.read_bytes().decode(errors="replace").lower().encode()
            ):
                found.append(str(path.relative_to(home)))
    return found


needles = st.builds(
    lambda head, tail: f"Ж{head}{tail}".strip(),
    st.text(alphabet="abcXYZ019 -", min_size=1, max_size=8),
    st.text(alphabet="qrsQRS", min_size=0, max_size=4),
).filter(lambda n: proto.forget_problem(n) is None)


def cased(needle: str) -> st.SearchStrategy[str]:
    return st.sampled_from([needle, needle.upper(), needle.lower(), needle.swapcase()])


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), needle=needles)
async def test_no_file_under_memory_or_index_holds_a_forgotten_text(
    data: st.DataObject, needle: str
) -> None:
    copies = data.draw(st.lists(cased(needle), min_size=1, max_size=3))
    base = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    try:
        async with running(base) as role:
            spread(role, copies)
            await role.index.session_updated(SESSION)
            home = role.settings.home
            assert holders(home, needle), "the example puts copies everywhere"

            looked = await role.forgets.look(needle)
            assert {h.store for h in looked.holdings} >= {"journal", "recall log", "index"}
            assert {e.file for e in looked.entries} >= {"memory", "archive"}

            prepared = await role.forgets.prepare(PLAN, needle)
            assert prepared.holdings
            plan_dir = home / "memory" / PLAN_DIR
            assert sorted(p.name for p in plan_dir.iterdir()) == [
                f"{PLAN}.json",
                f"{PLAN}.steps.json",
            ]
            assert holders(home, needle) != [], "prepare changes nothing but the plan"
            for path in plan_dir.iterdir():
                assert needle.lower() not in path.read_text().lower(), "the plan holds no copy"

            applied = await role.forgets.apply(PLAN, needle)
            assert applied.conflicts == []
            assert holders(home, needle) == []
            assert not plan_dir.exists() or list(plan_dir.iterdir()) == []
            for word in proto.words(needle):
                found = await role.index.search(word, 10)
                assert not any(proto.holds(f.text, needle) for f in found.found)
            # The journal reads, keeps its ids, and says what the files hold.
            assert reconcile(role.memory) == []
            assert "an entry that stays" in role.memory.read_entries("memory")

            snapshot = {p: p.read_bytes() for p in (home / "memory").rglob("*") if p.is_file()}
            again = await role.forgets.apply(PLAN, None)
            assert again == ForgetApplied(plan=PLAN)
            assert {p: p.read_bytes() for p in snapshot} == snapshot
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_ids_and_approvals_survive_and_undo_refuses(short_dir: Path) -> None:
    async with running(short_dir) as role:
        spread(role, ["ZEBRA-7731"])
        ids = [proto.edit_id(line) for line in read_history(role.memory, None)]
        await role.forgets.apply(PLAN, "zebra-7731")
        journal = read_history(role.memory, None)
        assert [proto.edit_id(line) for line in journal[: len(ids)]] == ids
        touched = [line for line in journal if line.forgotten == PLAN]
        assert touched, "the lines holding it are marked"
        assert [line.approval for line in journal if isinstance(line, AppliedEdit)] == ["ap-c0"]
        own = journal[-1]
        assert isinstance(own, HandChange)
        assert own.forgotten == PLAN
        assert "locker code: [forgotten]" in own.before
        for line in (touched[0], own):
            refused = plan_undo(journal, proto.edit_id(line))
            assert isinstance(refused, Error)
            assert refused.code == "forgotten"
            assert refused.message == (
                f"edit {proto.edit_id(line)} touched a text that was forgotten; it cannot be "
                "undone; to have it back, tell it again"
            )
        assert isinstance(plan_undo(journal, None), Error), "the newest line is the forget's"


def test_an_unmarked_line_encodes_as_before() -> None:
    line = journal_line(["a"], ["a", "b"], "{}", "c1")
    decoded = msgspec.json.decode(line, type=proto.JournalLine)
    assert _encoder.encode(decoded).decode() == line
    assert "forgotten" not in line


def test_a_journal_line_keeps_its_ids_and_redacts_its_text() -> None:
    raw = journal_line(["a SECRET"], ["b"], json.dumps({"text": "secret"}), "c1").encode()
    new = redact_journal_line(raw, "secret", PLAN)
    assert new is not None
    line = msgspec.json.decode(new, type=proto.JournalLine)
    was = msgspec.json.decode(raw, type=proto.JournalLine)
    assert proto.edit_id(line) == proto.edit_id(was)
    assert isinstance(line, AppliedEdit)
    assert line.before == ["a [forgotten]"]
    assert line.forgotten == PLAN
    assert redact_journal_line(raw, "absent", PLAN) is None


async def test_a_kill_half_way_is_finished_at_the_next_start(short_dir: Path) -> None:
    needle = "ZEBRA-7731"
    async with running(short_dir) as role:
        spread(role, [needle, needle.lower()])
        await role.index.session_updated(SESSION)
        home = role.settings.home
        await role.forgets.prepare(PLAN, needle)
        plan_dir = home / "memory" / PLAN_DIR
        plan = proto.read_plan(plan_dir, PLAN)
        assert plan is not None
        committed = proto.ForgetPlan(
            plan=PLAN, committed=True, edits=plan.edits, counts=plan.counts
        )
        proto.write_plan(plan_dir, committed)
        for edit in committed.edits[: len(committed.edits) // 2]:  # killed half-way
            proto.apply_edit(home / "memory", edit)
    assert holders(home, needle)
    async with running(short_dir) as role:
        assert holders(home, needle) == []
        assert proto.read_plan(plan_dir, PLAN) is None
        found = await role.index.search("zebra 7731", 10)
        assert not any(proto.holds(f.text, needle) for f in found.found)
        assert reconcile(role.memory) == []


async def test_an_index_built_before_secure_delete_is_vacuumed_once(short_dir: Path) -> None:
    async with running(short_dir) as role:
        spread(role, ["ZEBRA-7731"])
        await role.index.session_updated(SESSION)
        path = role.index.path
    conn = sqlean.connect(str(path))
    conn.execute("DELETE FROM hits_config WHERE k = 'secure-delete'")
    conn.commit()
    conn.close()
    async with running(short_dir) as role:
        applied = await role.forgets.apply(PLAN, "zebra-7731")
        assert applied.conflicts == []
        assert holders(role.settings.home, "zebra-7731") == []
        conn = sqlean.connect(str(path))
        assert conn.execute("SELECT v FROM hits_config WHERE k = 'secure-delete'").fetchone() == (
            1,
        )
        conn.close()


async def test_a_log_rewritten_by_loopd_is_read_again_by_count(short_dir: Path) -> None:
    async with running(short_dir) as role:
        sessions = role.settings.sessions_dir
        append(sessions, [user("first ZEBRA-7731"), user("second")])
        await role.index.session_updated(SESSION)
        await role.forgets.apply(PLAN, "zebra-7731")
        append(sessions, [user("third words")])
        await role.index.session_updated(SESSION)  # a cursor again, into the old bytes
        path = log_path(sessions)
        lines = path.read_bytes().split(b"\n")
        redacted = [proto.redact_line(line, "zebra-7731") or line for line in lines]
        proto.write_atomically(path, b"\n".join(redacted))  # loopd's step, later: new inode
        append(sessions, [user("fourth words")])
        await role.index.session_updated(SESSION)
        assert [f.text for f in (await role.index.search("fourth", 10)).found] == ["fourth words"]
        assert [f.text for f in (await role.index.search("third", 10)).found] == ["third words"]
        assert progress(role.index.path) == {f"{SESSION}/0.jsonl": 4, "archive.md": 0}


async def test_look_counts_and_offers_near_matches(short_dir: Path) -> None:
    async with running(short_dir) as role:
        spread(role, ["ZEBRA-7731"])
        append(role.settings.sessions_dir, [user("a zebra named 7731 walked by")])
        await role.index.session_updated(SESSION)
        looked = await role.forgets.look("zebra-7731")
        assert "a zebra named 7731 walked by" in looked.near
        assert len(looked.near) <= 10
        assert all(len(n) <= 160 for n in looked.near)
        assert [e.entry for e in looked.entries if e.file == "memory"] == [
            "locker code: ZEBRA-7731"
        ]


async def test_the_broker_socket_serves_the_four_kinds(short_dir: Path) -> None:
    async with running(short_dir) as role:
        spread(role, ["ZEBRA-7731"])
        conn = None
        looked = await role.handle_broker(ForgetLook(text="zebra-7731"), conn)  # type: ignore[arg-type]
        assert isinstance(looked, ForgetLooked)
        prepared = await role.handle_broker(ForgetPrepare(plan=PLAN, text="zebra-7731"), conn)  # type: ignore[arg-type]
        assert isinstance(prepared, ForgetPrepared)
        await role.handle_broker(proto.ForgetAbort(plan=PLAN), conn)  # type: ignore[arg-type]
        assert proto.read_plan(role.forgets.plans, PLAN) is None
        applied = await role.handle_broker(ForgetApply(plan=PLAN, text="zebra-7731"), conn)  # type: ignore[arg-type]
        assert isinstance(applied, ForgetApplied)
        assert applied.conflicts == []
        with pytest.raises(proto.ServiceError):
            await role.handle_broker(ForgetLook(text="x"), conn)  # type: ignore[arg-type]


async def test_an_undecided_plan_is_deleted_at_start_and_a_committed_one_is_kept_by_abort(
    short_dir: Path,
) -> None:
    async with running(short_dir) as role:
        spread(role, ["ZEBRA-7731"])
        await role.forgets.prepare(PLAN, "zebra-7731")
        await role.forgets.prepare("fg-decided0001", "an entry")
        plans = role.forgets.plans
        decided = proto.read_plan(plans, "fg-decided0001")
        assert decided is not None
        proto.write_plan(plans, msgspec.structs.replace(decided, committed=True))
        await role.forgets.abort("fg-decided0001")
        assert proto.read_plan(plans, "fg-decided0001") is not None, "decided: abort keeps it"
        hour_ago = datetime.now(UTC).timestamp() - 2 * 3600
        os.utime(plans / f"{PLAN}.json", (hour_ago, hour_ago))
        home = role.settings.home
    async with running(short_dir) as role:
        assert sorted(p.name for p in plans.iterdir()) == []
        assert holders(home, "zebra-7731"), "never decided: nothing forgotten"
        assert "an entry that stays" not in role.memory.read_entries("memory")
