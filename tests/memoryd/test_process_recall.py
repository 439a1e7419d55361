"""recall, session_updated and reindex through a real memoryd process and its sockets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import trio
from bxctl_run import run
from memoryd_harness import OTHER, SESSION, append, result, said, user
from roles import RunningRole, start_role

import proto
from proto import Class, Label, Reindex, Reindexed, ToolCall, ToolRequest, ToolResponse

CAP_S = 30
FRESH = "chat-fresh0session"


def recall_call(query: str) -> ToolRequest:
    return ToolRequest(
        session=OTHER,
        call=ToolCall(id="r1", name="recall", arguments=json.dumps({"query": query})),
    )


async def recall_when_ready(broker: Path, query: str) -> ToolResponse:
    """Recall, retrying while the index is still being built at start-up."""
    while True:
        reply = await proto.call(broker, recall_call(query), ToolResponse)
        if "being built" not in reply.content:
            return reply
        await trio.sleep(0.05)


@pytest.fixture
def process(short_dir: Path) -> Iterator[tuple[Path, RunningRole]]:
    """A home with two session logs, and memoryd started on it (no index yet)."""
    home = short_dir / "home"
    sessions = home / "sessions"
    append(sessions, [user("the launch window moved to Thursday"), said("Noted.")])
    append(sessions, [result(Class.public, untrusted=True), said("the page says launch")], OTHER)
    config = short_dir / "memoryd.toml"
    config.write_text(f'[paths]\nhome = "{home}"\n')
    (short_dir / "soul.md").write_text("Starter soul.\n")
    role = start_role("memoryd", config, log=short_dir / "memoryd.log")
    try:
        yield home, role
    finally:
        role.kill()  # the test stops it; this is for a test that failed first


async def test_recall_through_a_memoryd_process(process: tuple[Path, RunningRole]) -> None:
    home, role = process
    sessions = home / "sessions"
    broker = home / proto.BROKER_MEMORY.relative_path
    loop = home / proto.LOOP_MEMORY.relative_path
    admin = home / proto.OWNER_MEMORY.relative_path
    with trio.fail_after(CAP_S):
        first = await recall_when_ready(broker, "launch window")
        append(sessions, [user("the parcel comes on Monday")])
        await proto.call(loop, proto.SessionUpdated(session=SESSION), proto.Ok)
        parcel = await proto.call(broker, recall_call("parcel"), ToolResponse)
        reindexed = await proto.call(admin, Reindex(), Reindexed)
        after = await proto.call(broker, recall_call("launch window"), ToolResponse)
    ended = await trio.to_thread.run_sync(role.stop)
    stderr = ended.log
    assert ended.returncode == 0, stderr
    assert first.status == "ok"
    assert first.content.startswith("[1] session mm-8ass9m…, 2026-09-20 14:02 UTC, the owner said")
    assert "the page says launch" in first.content
    assert first.label == Label(class_=Class.private, untrusted=True)
    assert parcel.content.endswith("the owner said · private\nthe parcel comes on Monday")
    assert reindexed == Reindexed(logs=2, records=4, archive=0)
    assert after.content == first.content
    assert "no index at" in stderr  # built at start-up
    [recalls] = list((home / "memory" / "recalls").glob("*.jsonl"))
    queries = [json.loads(line)["query"] for line in recalls.read_text().splitlines()]
    # every answer left one line; a retry while the index was being built left none
    assert queries == ["launch window", "parcel", "launch window"]


async def test_an_index_damaged_while_running_is_named_and_lost_nothing(
    process: tuple[Path, RunningRole],
) -> None:
    """Garbage over the index files: session_updated answers memory-index-damaged, not a crash."""
    home, role = process
    sessions = home / "sessions"
    broker = home / proto.BROKER_MEMORY.relative_path
    loop = home / proto.LOOP_MEMORY.relative_path
    admin = home / proto.OWNER_MEMORY.relative_path
    index = home / "index"
    with trio.fail_after(CAP_S):
        await recall_when_ready(broker, "launch window")
        for path in index.glob("memory.sqlite3*"):
            path.write_bytes(b"\xa5" * max(path.stat().st_size, 4096))
        # A session memoryd has not read yet: its count is looked up in the damaged file.
        append(sessions, [user("the parcel comes on Monday")], FRESH)
        with pytest.raises(proto.RemoteError) as damaged:
            await proto.call(loop, proto.SessionUpdated(session=FRESH), proto.Ok)
        block = await proto.call(loop, proto.MemoryBlock(), proto.MemoryBlockReply)
        reindexed = await proto.call(admin, Reindex(), Reindexed)
        parcel = await proto.call(broker, recall_call("parcel"), ToolResponse)
    ended = await trio.to_thread.run_sync(role.stop)
    assert ended.returncode == 0, ended.log
    assert damaged.value.error.code == "memory-index-damaged", damaged.value.error
    assert damaged.value.error.runbook == "memory-index-damaged"
    assert str(index / "memory.sqlite3") in damaged.value.error.message
    assert block.text.startswith("# soul.md\nStarter soul.")
    assert reindexed == Reindexed(logs=3, records=4, archive=0)
    assert parcel.content.endswith("the owner said · private\nthe parcel comes on Monday")
    assert "Traceback" not in ended.log


def journal_of_a_full_memory(home: Path, edits: int) -> list[proto.AppliedEdit]:
    """`edits` replaces of a memory.md kept near its limit, written as memoryd journals them."""
    facts = [f"Fact {i}: " + "x" * 95 for i in range(20)]  # 2,100 characters: nearly full
    records = []
    for n in range(edits):
        before = list(facts)
        facts[n % 20] = f"Fact {n % 20}, version {n}: " + "y" * 84
        records.append(
            proto.AppliedEdit(
                time="2026-11-01T08:00:00Z",
                session=SESSION,
                call=f"call-{n}",
                approval=f"ap-{n:06d}",
                action="replace",
                file="memory.md",
                before=before,
                after=list(facts),
            )
        )
    journal = home / "memory" / "edits"
    journal.mkdir(parents=True, mode=0o700)
    lines = b"".join(msgspec.json.encode(r) + b"\n" for r in records)
    assert len(lines) > proto.MAX_FRAME  # a year of use: more than one frame can carry
    (journal / "2026-11.jsonl").write_bytes(lines)
    (home / "memory").chmod(0o700)
    return records


async def test_a_journal_larger_than_a_frame_is_shown_whole(
    process: tuple[Path, RunningRole], capsys: pytest.CaptureFixture[str]
) -> None:
    home, role = process
    records = journal_of_a_full_memory(home, 300)
    assert await run("memory", "history", "--json", "--home", str(home)) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [edit["call"] for edit in shown] == [r.call for r in reversed(records)]
    assert [edit["id"] for edit in shown] == [proto.edit_id(r) for r in reversed(records)]
    assert await run("memory", "history", "--all", "--home", str(home)) == 0
    out = capsys.readouterr().out
    assert out.count("  replace memory.md  session") == 300
    assert await run("memory", "history", "--home", str(home)) == 0
    newest = capsys.readouterr()
    assert newest.out.count("  replace memory.md  session") == 20
    assert newest.err.startswith("280 older: `")
    assert "bxctl memory history --limit 200 --home" in newest.err
    ended = await trio.to_thread.run_sync(role.stop)
    assert ended.returncode == 0, ended.log
