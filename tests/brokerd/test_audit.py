"""The audit log: the hash chain across months, whole lines, and what verify finds."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import trio

from brokerd._audit import Audit, Verdict
from proto import AUDIT_GENESIS as GENESIS
from proto import AuditRecord, Label

CAP_S = 10
SEPT = datetime(2026, 9, 30, 23, 59, 59, tzinfo=UTC)
OCT = datetime(2026, 10, 1, 0, 0, 1, tzinfo=UTC)


def record(call: str) -> AuditRecord:
    return AuditRecord(
        time="2026-09-30T23:59:59Z",
        session="chat-abcdefghijklmnop",
        call=call,
        tool="memory",
        arguments='{"action":"add","file":"memory","text":"x"}',
        grant="builtin-memory",
        grant_sha256="ab" * 32,
        decision="approved",
        approval="ap-abcdef",
        label=Label(),
        status="ok",
    )


async def written(directory: Path, *moments: datetime) -> Audit:
    audit = Audit(directory)
    audit.open()
    with trio.fail_after(CAP_S):
        for i, moment in enumerate(moments):
            await audit.append(record(f"c{i}"), moment)
    return audit


async def verified(audit: Audit) -> Verdict:
    with trio.fail_after(CAP_S):
        return await audit.verify()


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


async def test_the_chain_runs_across_month_files(tmp_path: Path) -> None:
    audit = await written(tmp_path, SEPT, SEPT, OCT)
    sept, october = lines(tmp_path / "2026-09.jsonl"), lines(tmp_path / "2026-10.jsonl")
    assert [json.loads(line)["call"] for line in sept + october] == ["c0", "c1", "c2"]
    assert json.loads(sept[0])["prev"] == GENESIS
    assert json.loads(sept[1])["prev"] == hashlib.sha256(sept[0]).hexdigest()
    assert json.loads(october[0])["prev"] == hashlib.sha256(sept[1]).hexdigest()
    first = json.loads(sept[0])
    assert set(first) == {
        "time", "session", "call", "tool", "arguments", "grant", "grant_sha256", "decision",
        "approval", "label", "status", "reason", "prev",
    }  # fmt: skip
    assert first["label"] == {"class": "private", "untrusted": False}
    assert (mode(tmp_path), mode(tmp_path / "2026-09.jsonl")) == (0o700, 0o600)
    verdict = await verified(audit)
    assert (verdict.records, verdict.broken_at) == (3, None)


async def test_a_restarted_brokerd_continues_the_chain(tmp_path: Path) -> None:
    await written(tmp_path, SEPT, SEPT)
    again = await written(tmp_path, OCT)
    october = lines(tmp_path / "2026-10.jsonl")
    assert (
        json.loads(october[0])["prev"]
        == hashlib.sha256(lines(tmp_path / "2026-09.jsonl")[1]).hexdigest()
    )
    assert (await verified(again)).broken_at is None


def tamper(path: Path, index: int, old: bytes, new: bytes) -> None:
    content = lines(path)
    assert old in content[index]
    content[index] = content[index].replace(old, new)
    path.write_bytes(b"\n".join(content) + b"\n")


@pytest.mark.parametrize(
    ("index", "old", "new", "broken_at"),
    [
        (
            0,
            b'"status":"ok"',
            b'"status":"denied"',
            "2026-09.jsonl line 1: its sha256 is not the prev of 2026-09.jsonl line 2",
        ),
        (
            1,
            b'"decision":"approved"',
            b'"decision":"auto"',
            "2026-09.jsonl line 2: its sha256 is not the prev of 2026-09.jsonl line 3",
        ),
        (
            2,
            b'"call":"c2"',
            b'"call":"cX"',
            "2026-09.jsonl line 3: its sha256 is not that of the last record brokerd wrote",
        ),
        (1, b'{"time"', b'{"tim', "2026-09.jsonl line 2: not an audit record"),
        (
            0,
            b'"prev":"' + GENESIS.encode(),
            b'"prev":"' + b"1" * 64,
            "2026-09.jsonl line 1: the first record's prev is not 64 zeros",
        ),
    ],
)
async def test_verify_names_the_first_broken_record(
    tmp_path: Path, index: int, old: bytes, new: bytes, broken_at: str
) -> None:
    audit = await written(tmp_path, SEPT, SEPT, SEPT)
    tamper(tmp_path / "2026-09.jsonl", index, old, new)
    verdict = await verified(audit)
    assert verdict.broken_at is not None
    assert verdict.broken_at.startswith(broken_at)


@pytest.mark.parametrize("removed", [0, 1, 2])
async def test_a_removed_record_is_found(tmp_path: Path, removed: int) -> None:
    audit = await written(tmp_path, SEPT, SEPT, SEPT)
    path = tmp_path / "2026-09.jsonl"
    kept = [line for i, line in enumerate(lines(path)) if i != removed]
    path.write_bytes(b"\n".join(kept) + b"\n")
    verdict = await verified(audit)
    assert verdict.broken_at is not None
    assert "removed" in verdict.broken_at or "64 zeros" in verdict.broken_at


async def test_a_deleted_log_is_found(tmp_path: Path) -> None:
    audit = await written(tmp_path, SEPT)
    (tmp_path / "2026-09.jsonl").unlink()
    verdict = await verified(audit)
    assert (verdict.records, verdict.broken_at) == (0, "the log is empty but records were written")


async def test_a_torn_final_line_is_dropped_at_start(tmp_path: Path) -> None:
    await written(tmp_path, SEPT, SEPT)
    path = tmp_path / "2026-09.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"time":"2026-09-30T23:5')
    again = await written(tmp_path, SEPT)
    assert path.read_bytes().startswith(whole)
    assert len(lines(path)) == 3
    assert (await verified(again)).broken_at is None


async def test_an_empty_log_verifies(tmp_path: Path) -> None:
    audit = await written(tmp_path / "audit")
    assert (await verified(audit)).records == 0
    assert (tmp_path / "audit").is_dir()
    (tmp_path / "audit" / "notes.txt").write_text("ignored")
    assert (await verified(audit)).broken_at is None
