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
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lines_store import holding_files
from memoryd_harness import SESSION, append, log_path, progress, said, user

import entries
import proto
from memoryd import Memoryd, on_home
from memoryd._edits import read_history, reconcile
from memoryd._forget import plan_files
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
    """Files under memory/ and index/ whose bytes hold `needle` folded (`proto.fold`)."""
    found = []
    for top in ("memory", "index"):
        found += [str(p.relative_to(home)) for p in holding_files(home / top, needle)]
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

            part = role.forget_part
            looked = await part.handle(ForgetLook(text=needle))
            assert isinstance(looked, ForgetLooked)
            assert {h.store for h in looked.holdings} >= {"journal", "recall log", "index"}
            assert {e.file for e in looked.entries} >= {"memory", "archive"}

            prepared = await part.handle(ForgetPrepare(plan=PLAN, text=needle))
            assert isinstance(prepared, ForgetPrepared)
            assert prepared.holdings
            plan_dir = home / "memory" / proto.PLAN_DIR
            assert sorted(p.name for p in plan_dir.iterdir()) == [f"{PLAN}.json"]
            assert holders(home, needle) != [], "prepare changes nothing but the plan"
            assert holding_files(plan_dir, needle) == [], "the plan holds no copy"

            applied = await part.handle(ForgetApply(plan=PLAN, text=needle))
            assert isinstance(applied, ForgetApplied)
            assert applied.conflicts == []
            assert holders(home, needle) == []
            assert sorted(p.name for p in plan_dir.iterdir()) == [proto.ENDED_FILE]
            for word in proto.words(needle):
                found = await role.index.search(word, 10)
                assert not any(proto.holds(f.text, needle) for f in found.found)
            # The journal reads, keeps its ids, and says what the files hold.
            assert reconcile(role.memory) == []
            assert "an entry that stays" in role.memory.read_entries("memory")

            snapshot = {p: p.read_bytes() for p in (home / "memory").rglob("*") if p.is_file()}
            again = await part.handle(ForgetApply(plan=PLAN))
            assert isinstance(again, ForgetApplied)
            assert again.again
            assert again.holdings == applied.holdings
            assert {p: p.read_bytes() for p in snapshot} == snapshot
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_ids_and_approvals_survive_and_undo_refuses(short_dir: Path) -> None:
    async with running(short_dir) as role:
        spread(role, ["ZEBRA-7731"])
        ids = [proto.edit_id(line) for line in read_history(role.memory, None)]
        await role.forget_part.handle(ForgetApply(plan=PLAN, text="zebra-7731"))
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


async def test_a_journal_line_keeps_its_ids_and_redacts_its_text(short_dir: Path) -> None:
    raw = journal_line(["a SECRET"], ["b"], json.dumps({"text": "secret"}), "c1")
    async with running(short_dir) as role:
        role.memory.append_journal(raw, datetime(2026, 9, 20, tzinfo=UTC))
        planned = plan_files(role.memory, "secret", PLAN)
        assert plan_files(role.memory, "absent", PLAN).edits == []
    (edit,) = planned.edits
    assert isinstance(edit, proto.LinesEdit)
    (step,) = edit.lines
    line = msgspec.json.decode(step.new, type=proto.JournalLine)
    was = msgspec.json.decode(raw, type=proto.JournalLine)
    assert proto.edit_id(line) == proto.edit_id(was)
    assert isinstance(line, AppliedEdit)
    assert line.before == ["a [forgotten]"]
    assert line.arguments == '{"text":"[forgotten]"}'
    assert line.forgotten == PLAN


async def test_a_kill_half_way_is_finished_at_the_next_start(short_dir: Path) -> None:
    needle = "ZEBRA-7731"
    async with running(short_dir) as role:
        spread(role, [needle, needle.lower()])
        await role.index.session_updated(SESSION)
        home = role.settings.home
        await role.forget_part.handle(ForgetPrepare(plan=PLAN, text=needle))
        plans = role.forget_part.files.plans
        plan = plans.read(PLAN)
        assert plan is not None
        committed = msgspec.structs.replace(plan, stage="committed")
        plans.write(PLAN, committed)
        for edit in committed.edits[: len(committed.edits) // 2]:  # killed half-way
            proto.apply_file_edits(home / "memory", [edit])
    assert holders(home, needle)
    a_day_ago = plans.path(PLAN).stat().st_mtime - 86400  # down a day: nothing decides by age
    os.utime(plans.path(PLAN), (a_day_ago, a_day_ago))
    async with running(short_dir) as role:
        assert holders(home, needle) == []
        assert plans.read(PLAN) is None
        assert role.forget_part.files.ended(PLAN) is not None
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
        applied = await role.forget_part.handle(ForgetApply(plan=PLAN, text="zebra-7731"))
        assert isinstance(applied, ForgetApplied)
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
        await role.forget_part.handle(ForgetApply(plan=PLAN, text="zebra-7731"))
        append(sessions, [user("third words")])
        await role.index.session_updated(SESSION)  # a cursor again, into the old bytes
        path = log_path(sessions)
        lines = path.read_bytes().split(b"\n")
        redacted = [proto.redact_line(line, "zebra-7731") or line for line in lines]
        proto.write_atomically(path, b"\n".join(redacted))  # loopd's step, later: new inode
        append(sessions, [user("fourth words")])
        await role.index.session_updated(SESSION)
        assert [f.text for f in (await role.index.search("fourth", 10)).found] == ["fourth words"]
        # Each record indexed once; "fourth words" follows "third words" (the context
        # ranking finds a reply by the message it follows), after it.
        thirds = [f.text for f in (await role.index.search("third", 10)).found]
        assert thirds[0] == "third words"
        assert thirds.count("third words") == 1
        assert progress(role.index.path) == {f"{SESSION}/0.jsonl": 4, "archive.md": 0}


async def test_look_counts_and_offers_near_matches(short_dir: Path) -> None:
    async with running(short_dir) as role:
        spread(role, ["ZEBRA-7731"])
        append(role.settings.sessions_dir, [user("a zebra named 7731 walked by")])
        await role.index.session_updated(SESSION)
        looked = await role.forget_part.handle(ForgetLook(text="zebra-7731"))
        assert isinstance(looked, ForgetLooked)
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
        assert role.forget_part.files.plans.read(PLAN) is None
        with pytest.raises(proto.ServiceError) as refused:  # aborted: it cannot go on
            await role.handle_broker(ForgetApply(plan=PLAN, text="zebra-7731"), conn)  # type: ignore[arg-type]
        assert refused.value.code == "forget-aborted"
        other = "fg-other0000001"
        applied = await role.handle_broker(ForgetApply(plan=other, text="zebra-7731"), conn)  # type: ignore[arg-type]
        assert isinstance(applied, ForgetApplied)
        assert applied.conflicts == []
        with pytest.raises(proto.ServiceError) as refused:
            await role.handle_broker(ForgetLook(text="x"), conn)  # type: ignore[arg-type]
        assert refused.value.code == "bad-forget"


async def test_a_prepared_plan_waits_a_week_and_a_committed_one_is_kept_by_abort(
    short_dir: Path,
) -> None:
    async with running(short_dir) as role:
        spread(role, ["ZEBRA-7731"])
        await role.index.session_updated(SESSION)
        part = role.forget_part
        await part.handle(ForgetPrepare(plan=PLAN, text="zebra-7731"))
        await part.handle(ForgetPrepare(plan="fg-decided0001", text="plain"))
        plans = part.files.plans
        decided = plans.read("fg-decided0001")
        assert decided is not None
        plans.write("fg-decided0001", msgspec.structs.replace(decided, stage="committed"))
        with pytest.raises(proto.ServiceError) as refused:
            await part.handle(proto.ForgetAbort(plan="fg-decided0001"))
        assert refused.value.code == "forget-decided"
        assert plans.read("fg-decided0001") is not None, "decided: abort keeps it"
        a_week_ago = datetime.now(UTC).timestamp() - 7 * 86400
        os.utime(plans.path(PLAN), (a_week_ago, a_week_ago))
        home = role.settings.home
    async with running(short_dir) as role:
        assert plans.ids() == [PLAN], "the decided one finished at start; the other waits"
        assert holders(home, "zebra-7731"), "never decided: nothing forgotten"
        assert role.memory.read_entries("user") == ()
        applied = await role.forget_part.handle(ForgetApply(plan=PLAN))  # brokerd's word, late
        assert isinstance(applied, ForgetApplied)
        assert holders(home, "zebra-7731") == []


@pytest.mark.parametrize(
    "rows",
    [
        ["my pin is 55\u200b12", "pin 5512", "PIN 55\u00ad12", "5-5-1-2 is not it"],
        ["Hauptstraße 3", "HAUPTSTRASSE 3", "Hauptstrasse 3", "Haupt strasse 3"],
    ],
)
async def test_the_index_holds_by_the_one_rule_and_its_check_after_agrees(
    short_dir: Path, rows: list[str]
) -> None:
    needle = "5512" if "pin" in rows[1] else "hauptSTRASSE"
    async with running(short_dir) as role:
        append(role.settings.sessions_dir, [user(text) for text in rows])
        await role.index.session_updated(SESSION)
        held = await trio.to_thread.run_sync(role.index.holding, needle)
        assert sorted(text for _, text, *_ in held) == sorted(
            r for r in rows if proto.holds(r, needle)
        )
        assert len(held) == 3
        applied = await role.forget_part.handle(ForgetApply(plan=PLAN, text=needle))
        assert isinstance(applied, ForgetApplied)
        assert applied.conflicts == []
        assert await trio.to_thread.run_sync(role.index.verify_forget, needle) == []
        found = await role.index.search(rows[3], 10)
        assert rows[3] in [f.text for f in found.found]  # what does not hold it stays


async def test_a_turn_indexed_between_memoryds_part_and_loopds_is_made_again(
    short_dir: Path,
) -> None:
    """memoryd's part goes first; a turn that ends before loopd rewrites its session is
    indexed from the log as it was, and made again from it once loopd says it rewrote it."""
    async with running(short_dir) as role:
        sessions = role.settings.sessions_dir
        append(sessions, [user("first ZEBRA-7731"), user("tea")])
        await role.index.session_updated(SESSION)
        await role.forget_part.handle(ForgetApply(plan=PLAN, text="zebra-7731"))  # memoryd's part
        append(sessions, [user("it ended meanwhile: zebra-7731 again"), user("more tea")])
        await role.index.session_updated(SESSION)  # from the log before loopd's part
        assert await trio.to_thread.run_sync(role.index.holding, "zebra-7731")
        path = log_path(sessions)  # loopd's part: the log rewritten, memoryd told so
        lines = path.read_bytes().split(b"\n")
        kinds = (proto.SessionRecord,)
        redacted = [proto.redact_line(line, "zebra-7731", kinds) or line for line in lines]
        proto.write_atomically(path, b"\n".join(redacted))
        await role.index.session_updated(SESSION, rewritten=PLAN)
        assert await trio.to_thread.run_sync(role.index.holding, "zebra-7731") == []
        assert await trio.to_thread.run_sync(role.index.verify_forget, "zebra-7731") == []
        found = await role.index.search("tea meanwhile", 10)
        assert sorted(f.text for f in found.found) == [
            "it ended meanwhile: [forgotten] again",
            "more tea",
            "tea",
        ]
        assert progress(role.index.path)[f"{SESSION}/0.jsonl"] == 4


async def test_a_log_rewritten_for_a_forget_memoryd_does_not_know_is_made_again_whole(
    short_dir: Path,
) -> None:
    """memoryd restarted since its part of the forget: every row of the session is looked at."""
    async with running(short_dir) as role:
        sessions = role.settings.sessions_dir
        append(sessions, [user("first ZEBRA-7731"), user("tea")])
        await role.index.session_updated(SESSION)
        path = log_path(sessions)
        lines = path.read_bytes().split(b"\n")
        kinds = (proto.SessionRecord,)
        redacted = [proto.redact_line(line, "zebra-7731", kinds) or line for line in lines]
        proto.write_atomically(path, b"\n".join(redacted))
        await role.index.session_updated(SESSION, rewritten="fg-notknownhere1")
        assert await trio.to_thread.run_sync(role.index.holding, "zebra-7731") == []
