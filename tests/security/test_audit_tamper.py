"""Every way of tampering with the audit log is found, while brokerd runs and after a restart.

A real brokerd writes the records (list_dir calls, each a `started` and an `ok` record,
and a denial); the test then changes the files as someone who can write them but not
read brokerd's audit key would. The running brokerd's `audit_verify` fails; so does a
restarted one's, which also warns at start (runbook audit-tampered) and says so in its
READY status, and keeps failing after it appends again, until the owner starts a new log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from brokerd_harness import BrokerdHome, grant, request

import proto
from brokerd._audit import AUDIT_TAMPERED
from proto import AuditHead

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"


def month_file(home: BrokerdHome) -> Path:
    (path,) = home.audit.glob("*.jsonl")
    return path


def read_lines(home: BrokerdHome) -> list[bytes]:
    return month_file(home).read_bytes().splitlines(keepends=True)


def write_lines(home: BrokerdHome, lines: list[bytes]) -> None:
    month_file(home).write_bytes(b"".join(lines))


def change(home: BrokerdHome) -> None:
    lines = read_lines(home)
    assert b'"status":"ok"' in lines[1]
    lines[1] = lines[1].replace(b'"status":"ok"', b'"status":"denied"')
    write_lines(home, lines)


def change_the_last(home: BrokerdHome) -> None:
    lines = read_lines(home)
    lines[-1] = lines[-1].replace(b'"status":"denied"', b'"status":"ok"')
    write_lines(home, lines)


def delete(home: BrokerdHome) -> None:
    lines = read_lines(home)
    del lines[2]
    write_lines(home, lines)


def delete_the_first(home: BrokerdHome) -> None:
    write_lines(home, read_lines(home)[1:])


def reorder(home: BrokerdHome) -> None:
    lines = read_lines(home)
    lines[1], lines[2] = lines[2], lines[1]
    write_lines(home, lines)


def duplicate(home: BrokerdHome) -> None:
    lines = read_lines(home)
    lines.insert(2, lines[1])
    write_lines(home, lines)


def duplicate_the_last(home: BrokerdHome) -> None:
    lines = read_lines(home)
    write_lines(home, [*lines, lines[-1]])


def truncate(home: BrokerdHome) -> None:
    write_lines(home, read_lines(home)[:-2])


def truncate_all(home: BrokerdHome) -> None:
    month_file(home).unlink()


def cut_without_newline(home: BrokerdHome) -> None:
    """The last record made to look like a torn write, which a start would drop."""
    month_file(home).write_bytes(month_file(home).read_bytes()[:-1])


def replace_the_head(home: BrokerdHome) -> None:
    """Cut two records and forge the head to match: the link is in the cut record's prev."""
    lines = read_lines(home)
    write_lines(home, lines[:-2])
    cut = json.loads(lines[-2])
    head = AuditHead(records=len(lines) - 2, last=cut["prev"], mac="0" * 64)
    (home.audit / "head").write_bytes(msgspec.json.encode(head))


def forge_at_the_end(home: BrokerdHome) -> None:
    """Append a record that claims the chain: its prev is the head's, which anyone can read."""
    head_line = (home.audit / "head").read_bytes().splitlines()[-1]  # the last line is the head
    head = msgspec.json.decode(head_line, type=AuditHead)
    last = proto.AUDIT_LOG.decode(read_lines(home)[-1].rstrip(b"\n"))
    forged = msgspec.structs.replace(
        last, call="c-forged", decision="approved", prev=head.last, mac="f" * 64
    )
    write_lines(home, [*read_lines(home), msgspec.json.encode(forged) + b"\n"])


def replace_the_head_with_garbage(home: BrokerdHome) -> None:
    (home.audit / "head").write_bytes(b"\x00garbage")


def delete_the_head(home: BrokerdHome) -> None:
    (home.audit / "head").unlink()


def rechain_with_sha256(home: BrokerdHome) -> None:
    """Change a record and rebuild the chain and head with hashes anyone can compute."""
    lines = [line.rstrip(b"\n") for line in read_lines(home)]
    records = [json.loads(line) for line in lines]
    records[1]["status"] = "denied"
    prev = proto.AUDIT_GENESIS
    out = []
    for record in records:
        record["prev"] = prev
        record["mac"] = ""
        record["mac"] = hashlib.sha256(
            json.dumps(record, separators=(",", ":")).encode()
        ).hexdigest()
        out.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        prev = record["mac"]
    write_lines(home, out)
    fake = AuditHead(records=len(out), last=prev, mac=hashlib.sha256(prev.encode()).hexdigest())
    (home.audit / "head").write_bytes(msgspec.json.encode(fake))


def rechain_with_another_key(home: BrokerdHome) -> None:
    """Change a record and re-sign every record and the head with a key of one's own."""
    key = b"\x01" * proto.KEY_BYTES
    records = [proto.AUDIT_LOG.decode(line.rstrip(b"\n")) for line in read_lines(home)]
    records[1] = msgspec.structs.replace(records[1], status="denied")
    prev = proto.AUDIT_GENESIS
    out = []
    for record in records:
        chained = msgspec.structs.replace(record, prev=prev)
        prev = proto.audit_mac(key, chained)
        out.append(msgspec.json.encode(msgspec.structs.replace(chained, mac=prev)) + b"\n")
    write_lines(home, out)
    mac = proto.audit_head_mac(key, records=len(out), last=prev, broken=None)
    forged = AuditHead(records=len(out), last=prev, mac=mac)
    (home.audit / "head").write_bytes(msgspec.json.encode(forged))


TAMPERING: dict[str, Callable[[BrokerdHome], None]] = {
    "change": change,
    "change-the-last": change_the_last,
    "delete": delete,
    "delete-the-first": delete_the_first,
    "reorder": reorder,
    "duplicate": duplicate,
    "duplicate-the-last": duplicate_the_last,
    "forge-at-the-end": forge_at_the_end,
    "truncate": truncate,
    "truncate-all": truncate_all,
    "cut-without-newline": cut_without_newline,
    "replace-the-head": replace_the_head,
    "replace-the-head-with-garbage": replace_the_head_with_garbage,
    "delete-the-head": delete_the_head,
    "rechain-with-sha256": rechain_with_sha256,
    "rechain-with-another-key": rechain_with_another_key,
}


async def write_some_records(home: BrokerdHome) -> int:
    notes = home.base / "notes"
    notes.mkdir(exist_ok=True)
    for i in range(3):
        reply = await home.answer(request("list_dir", {"path": str(notes)}, call=f"c{i}"))
        assert reply.status == "ok"
    denied = await home.answer(request("shell", {"cmd": "ls"}, call="c3"))
    assert denied.status == "denied"
    return 7


@pytest.fixture
def started(broker_home: BrokerdHome) -> BrokerdHome:
    notes = broker_home.base / "notes"
    paths = f'[constraints]\npaths = ["{notes}/**"]\n'
    broker_home.write_grant("notes", grant("list_dir", "auto", extra=paths))
    broker_home.write_grant("shell", grant("shell", "deny"))
    broker_home.start()
    return broker_home


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(TAMPERING))
async def test_tampering_is_found_before_and_after_a_restart(
    started: BrokerdHome, kind: str
) -> None:
    home = started
    count = await write_some_records(home)
    assert await home.verify() == proto.AuditVerified(records=count, ok=True)

    TAMPERING[kind](home)
    running = await home.verify()
    assert not running.ok, running
    assert running.broken_at

    ready = home.restart().ready
    assert ready is not None
    assert f"the audit log is broken (runbook: {AUDIT_TAMPERED})" in ready
    assert f"(runbook: {AUDIT_TAMPERED})" in home.log()
    assert "Traceback" not in home.log()
    after = await home.verify()
    assert not after.ok, after

    # brokerd goes on recording, and the log stays reported as broken, across restarts.
    notes = home.base / "notes"
    reply = await home.answer(request("list_dir", {"path": str(notes)}, call="c9"))
    assert reply.status == "ok"
    assert not (await home.verify()).ok
    home.restart()
    assert not (await home.verify()).ok
    assert f"(runbook: {AUDIT_TAMPERED})" in home.log()


# Tampering whose trace a later append could cover: the head (which every append
# rewrites) and a log cut back to a head's count. The chain breaks of the other kinds stay
# in the log whatever is appended.
COVERABLE = ["replace-the-head", "replace-the-head-with-garbage", "delete-the-head", "truncate"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", COVERABLE)
async def test_tampering_is_not_healed_by_the_next_record_while_brokerd_runs(
    started: BrokerdHome, kind: str
) -> None:
    """Nobody verifies between the tampering and the next call: the break must still show."""
    home = started
    await write_some_records(home)
    TAMPERING[kind](home)
    notes = home.base / "notes"
    reply = await home.answer(request("list_dir", {"path": str(notes)}, call="c9"))
    assert reply.status == "ok"  # brokerd goes on recording
    running = await home.verify()
    assert not running.ok, running
    assert f"(runbook: {AUDIT_TAMPERED})" in home.log()
    ready = home.restart().ready
    assert ready is not None
    assert f"the audit log is broken (runbook: {AUDIT_TAMPERED})" in ready
    assert not (await home.verify()).ok


@pytest.mark.slow
@pytest.mark.parametrize("kind", COVERABLE)
async def test_a_break_found_by_verify_is_kept_while_brokerd_runs(
    started: BrokerdHome, kind: str
) -> None:
    home = started
    await write_some_records(home)
    TAMPERING[kind](home)
    first = await home.verify()
    assert not first.ok
    notes = home.base / "notes"
    for call in ("c8", "c9"):
        assert (await home.answer(request("list_dir", {"path": str(notes)}, call=call))).status
    again = await home.verify()
    assert not again.ok, again
    assert first.broken_at is not None
    assert again.broken_at is not None


async def test_an_untouched_log_stays_intact_across_restarts(started: BrokerdHome) -> None:
    count = await write_some_records(started)
    ready = started.restart().ready
    assert ready is not None
    assert "audit log is broken" not in ready
    assert "runbook" not in started.log()
    assert await started.verify() == proto.AuditVerified(records=count, ok=True)


async def test_a_log_and_head_put_back_to_an_earlier_copy_are_found_while_brokerd_runs(
    started: BrokerdHome,
) -> None:
    """A rollback of both files is consistent on disk: only the running brokerd knows."""
    home = started
    notes = home.base / "notes"
    await home.answer(request("list_dir", {"path": str(notes)}, call="c0"))
    log_then, head_then = month_file(home).read_bytes(), (home.audit / "head").read_bytes()
    await write_some_records(home)
    month_file(home).write_bytes(log_then)
    (home.audit / "head").write_bytes(head_then)
    verdict = await home.verify()
    assert not verdict.ok
    assert verdict.broken_at == (
        "the log holds 2 records but brokerd has written 9: records were removed from its end"
    )


async def test_the_owner_starts_a_new_log_as_the_runbook_says(started: BrokerdHome) -> None:
    home = started
    await write_some_records(home)
    truncate(home)
    home.stop()
    home.audit.rename(home.home / "audit.broken")  # the runbook's step
    home.start()
    assert "runbook" not in home.log()
    assert await home.verify() == proto.AuditVerified(records=0, ok=True)
    assert f"\n## {AUDIT_TAMPERED}\n" in RUNBOOK.read_text()
