"""The audit log: the keyed chain across months, the head, whole lines, what verify finds,
and the session labels read back at start. Tampering at large is tests/security's."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import proto
from brokerd._audit import UNKNOWN_RESULT, Audit, Verdict
from proto import AUDIT_GENESIS as GENESIS
from proto import AuditHead, AuditRecordV3, AuditStatus, Class, Label, TextCommits

CAP_S = 10
SEPT = datetime(2026, 9, 30, 23, 59, 59, tzinfo=UTC)
OCT = datetime(2026, 10, 1, 0, 0, 1, tzinfo=UTC)


def record(
    call: str,
    *,
    session: str = "chat-abcdefghijklmnop",
    status: AuditStatus = "ok",
    label: Label | None = None,
) -> AuditRecordV3:
    return AuditRecordV3(
        v=3,
        time="2026-09-30T23:59:59Z",
        session=session,
        call=call,
        tool="memory",
        arguments='{"action":"add","file":"memory","text":"x"}',
        grant="builtin-memory",
        grant_sha256="ab" * 32,
        decision="approved",
        approval="ap-abcdef",
        label=label or Label(),
        status=status,
        taint=Label(),
        commits=TextCommits(arguments=""),
        prev=GENESIS,
        mac="",
    )


def opened(directory: Path) -> Audit:
    audit = Audit(directory, key_path(directory))
    audit.open()
    return audit


def key_path(directory: Path) -> Path:
    return directory.parent / f"{directory.name}.key"


def mac_of(line: bytes) -> str:
    mac = json.loads(line)["mac"]
    assert isinstance(mac, str)
    return mac


def signed(directory: Path, line: bytes) -> bool:
    record = proto.AUDIT_LOG.decode(line)
    return proto.audit_mac(proto.read_key(key_path(directory)), record) == record.mac


async def written(directory: Path, *moments: datetime) -> Audit:
    audit = opened(directory)
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
    assert json.loads(sept[1])["prev"] == mac_of(sept[0])
    assert json.loads(october[0])["prev"] == mac_of(sept[1])
    assert all(signed(tmp_path, line) for line in sept + october)
    first = json.loads(sept[0])
    assert set(first) == {
        "kind", "v", "time", "session", "call", "tool", "arguments", "grant", "grant_sha256",
        "decision", "approval", "label", "status", "taint", "commits", "prev", "mac",
    }  # fmt: skip
    assert (first["kind"], first["v"]) == ("call", 3)
    assert set(first["commits"]) == {"arguments"}
    assert first["label"] == {"class": "private", "untrusted": False}
    assert (mode(tmp_path), mode(tmp_path / "2026-09.jsonl")) == (0o700, 0o600)
    assert mode(key_path(tmp_path)) == 0o600
    verdict = await verified(audit)
    assert (verdict.records, verdict.broken_at) == (3, None)


async def test_the_head_holds_the_count_and_the_last_link_under_its_mac(tmp_path: Path) -> None:
    await written(tmp_path, SEPT, OCT)
    head = msgspec.json.decode((tmp_path / "head").read_bytes().splitlines()[-1], type=AuditHead)
    last = mac_of(lines(tmp_path / "2026-10.jsonl")[-1])
    key = proto.read_key(key_path(tmp_path))
    mac = proto.audit_head_mac(key, records=2, last=last, broken=None)
    assert head == AuditHead(records=2, last=last, mac=mac)
    assert mode(tmp_path / "head") == 0o600


async def test_a_new_log_gets_a_head_at_once(tmp_path: Path) -> None:
    audit = opened(tmp_path / "audit")
    head = msgspec.json.decode((tmp_path / "audit" / "head").read_bytes(), type=AuditHead)
    assert (head.records, head.last, head.broken) == (0, GENESIS, None)
    assert audit.broken is None


async def test_a_restarted_brokerd_continues_the_chain(tmp_path: Path) -> None:
    await written(tmp_path, SEPT, SEPT)
    again = await written(tmp_path, OCT)
    october = lines(tmp_path / "2026-10.jsonl")
    assert json.loads(october[0])["prev"] == mac_of(lines(tmp_path / "2026-09.jsonl")[1])
    assert (await verified(again)).broken_at is None
    assert again.broken is None


async def test_a_head_one_record_behind_is_a_crash_not_tampering(tmp_path: Path) -> None:
    await written(tmp_path, SEPT)
    head_then = (tmp_path / "head").read_bytes()
    await written(tmp_path, SEPT)
    (tmp_path / "head").write_bytes(head_then)  # stopped between the line and its head
    again = opened(tmp_path)
    assert again.broken is None
    assert await verified(again) == Verdict(records=2)
    assert json.loads((tmp_path / "head").read_bytes())["records"] == 2


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
            "2026-09.jsonl line 1: its MAC does not match",
        ),
        (
            1,
            b'"decision":"approved"',
            b'"decision":"auto"',
            "2026-09.jsonl line 2: its MAC does not match",
        ),
        (
            2,
            b'"call":"c2"',
            b'"call":"cX"',
            "2026-09.jsonl line 3: its MAC does not match",
        ),
        (
            1,
            b'{"kind":"call",',
            b'{ "kind":"call",',
            "2026-09.jsonl line 2: its MAC does not match",
        ),
        (
            1,
            b'\\"text\\":\\"x',
            b'\\"text\\":\\"y',
            "2026-09.jsonl line 2: the text of its arguments does not match",
        ),
        (
            2,
            b'"status":"ok"',
            b'"status":"ok","reason":"x"',  # a text field's presence is signed
            "2026-09.jsonl line 3: its MAC does not match",
        ),
        (1, b'"time"', b'"tim', "2026-09.jsonl line 2: not an audit record"),
        (
            0,
            b'"prev":"' + GENESIS.encode(),
            b'"prev":"' + b"1" * 64,
            "2026-09.jsonl line 1: its MAC does not match",
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
    assert "removed" in verdict.broken_at


async def test_a_deleted_log_is_found(tmp_path: Path) -> None:
    audit = await written(tmp_path, SEPT)
    (tmp_path / "2026-09.jsonl").unlink()
    verdict = await verified(audit)
    assert (verdict.records, verdict.broken_at) == (
        0,
        "the log holds 0 records but brokerd has written 1: records were removed from its end",
    )


async def test_a_torn_final_line_is_dropped_at_start(tmp_path: Path) -> None:
    await written(tmp_path, SEPT, SEPT)
    path = tmp_path / "2026-09.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"time":"2026-09-30T23:5')
    again = await written(tmp_path, SEPT)
    assert path.read_bytes().startswith(whole)
    assert len(lines(path)) == 3
    assert (await verified(again)).broken_at is None
    assert again.broken is None


async def test_an_empty_log_verifies(tmp_path: Path) -> None:
    audit = await written(tmp_path / "audit")
    assert (await verified(audit)).records == 0
    assert (tmp_path / "audit").is_dir()
    (tmp_path / "audit" / "notes.txt").write_text("ignored")
    assert (await verified(audit)).broken_at is None


async def test_the_labels_returned_to_each_session_are_read_back(tmp_path: Path) -> None:
    fetched = Label(class_=Class.public, untrusted=True)
    audit = opened(tmp_path)
    with trio.fail_after(CAP_S):
        for rec in (
            record("c1", session="chat-a", status="started", label=Label(class_=Class.public)),
            record("c1", session="chat-a", label=fetched),
            record("c2", session="chat-a", status="denied"),
            record("c3", session="chat-b"),
            record("c4", session="chat-c", status="started"),  # no outcome: killed mid-call
        ):
            await audit.append(rec, SEPT)
    again = opened(tmp_path)
    assert again.returned == {
        "chat-a": Label(class_=Class.private, untrusted=True),
        "chat-b": Label(class_=Class.private),
        "chat-c": UNKNOWN_RESULT,
    }
    assert again.broken is None


async def test_the_audit_says_what_became_of_a_call(tmp_path: Path) -> None:
    audit = Audit(tmp_path / "audit", tmp_path / "keys" / "audit.key")
    audit.open()
    now = datetime(2026, 12, 1, tzinfo=UTC)

    def rec(call: str, decision: str, status: str) -> AuditRecordV3:
        return AuditRecordV3(
            v=3,
            time="2026-12-01T00:00:00Z",
            session="chat-abcdefghij",
            call=call,
            tool="memory",
            arguments="{}",
            grant="builtin-memory",
            grant_sha256="x",
            decision=decision,  # type: ignore[arg-type]
            label=Label(),
            status=status,  # type: ignore[arg-type]
            taint=Label(),
            commits=TextCommits(arguments=""),
            prev=GENESIS,
            mac="",
        )

    await audit.append(rec("ran", "approved", "started"), now)
    await audit.append(rec("ran", "approved", "ok"), now)
    await audit.append(rec("running", "auto", "started"), now)
    await audit.append(rec("no", "denied", "denied"), now)
    states = {
        call: await audit.call_state("chat-abcdefghij", call)
        for call in ("ran", "running", "no", "never")
    }
    assert {c: (s.state, s.status) for c, s in states.items()} == {
        "ran": ("finished", "ok"),
        "running": ("started", None),
        "no": ("denied", "denied"),
        "never": ("unknown", None),
    }


# -- the head as appended lines, and records made durable after their answer (issue 22) ---


def head_lines(directory: Path) -> list[AuditHead]:
    return [
        msgspec.json.decode(line, type=AuditHead)
        for line in (directory / "head").read_bytes().splitlines()
    ]


async def test_each_head_is_a_line_appended_and_a_start_leaves_one(tmp_path: Path) -> None:
    await written(tmp_path, SEPT, SEPT, SEPT)
    assert [head.records for head in head_lines(tmp_path)] == [0, 1, 2, 3]
    assert (tmp_path / "head").read_bytes().endswith(b"\n")
    again = opened(tmp_path)
    assert [head.records for head in head_lines(tmp_path)] == [3]
    assert await verified(again) == Verdict(records=3)


async def test_a_long_head_file_is_replaced_by_its_last_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("brokerd._audit_files.HEAD_COMPACT_BYTES", 700)
    audit = await written(tmp_path, *[SEPT] * 9)
    heads = head_lines(tmp_path)
    assert len(heads) < 4  # a head line is about 200 bytes
    assert heads[-1].records == 9
    assert await verified(audit) == Verdict(records=9)


async def test_a_torn_head_line_at_start_is_a_crash_not_tampering(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await written(tmp_path, SEPT, SEPT)
    data = (tmp_path / "head").read_bytes()
    (tmp_path / "head").write_bytes(data[:-40])  # the power cut in the middle of the last head
    again = opened(tmp_path)
    assert again.broken is None
    assert "torn line" in caplog.text
    assert "runbook" not in caplog.text
    assert await verified(again) == Verdict(records=2)
    assert [head.records for head in head_lines(tmp_path)] == [2]


async def test_a_fragment_added_to_the_head_while_brokerd_runs_is_found(tmp_path: Path) -> None:
    audit = await written(tmp_path, SEPT)
    with (tmp_path / "head").open("ab") as head:
        head.write(b'{"records":')
    with trio.fail_after(CAP_S):
        await audit.append(record("c9"), SEPT)
    verdict = await verified(audit)
    assert verdict.broken_at is not None
    assert "is not a head" in verdict.broken_at
    assert opened(tmp_path).broken is not None


async def test_a_record_not_waited_for_is_written_at_once_and_made_durable_just_after(
    tmp_path: Path,
) -> None:
    audit = opened(tmp_path)
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            audit.flush_in(nursery)
            await audit.append(record("c0", status="started"), SEPT)
            assert head_lines(tmp_path)[-1].records == 1
            await audit.append(record("c0"), SEPT, durable=False)
            assert len(lines(tmp_path / "2026-09.jsonl")) == 2  # before its answer goes out
            assert head_lines(tmp_path)[-1].records == 1  # its head follows
    assert head_lines(tmp_path)[-1].records == 2
    assert await verified(audit) == Verdict(records=2)


async def test_a_record_whose_head_never_came_is_taken_in_at_start(tmp_path: Path) -> None:
    """brokerd killed after an outcome's line, before its head: the crash case."""
    audit = opened(tmp_path)
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            audit.flush_in(nursery)
            await audit.append(record("c0", status="started"), SEPT)
            await audit.append(record("c0"), SEPT, durable=False)
            nursery.cancel_scope.cancel()
            head_then = (tmp_path / "head").read_bytes()
    (tmp_path / "head").write_bytes(head_then)  # as it was when brokerd was killed
    again = opened(tmp_path)
    assert again.broken is None
    assert await verified(again) == Verdict(records=2)
    assert again.returned == {record("c0").session: Label()}


async def test_the_next_decision_makes_an_earlier_outcome_durable_with_it(tmp_path: Path) -> None:
    audit = opened(tmp_path)
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            audit.flush_in(nursery)
            await audit.append(record("c0", status="started"), SEPT)
            await audit.append(record("c0"), SEPT, durable=False)
            await audit.append(record("c1", status="started"), OCT)  # a new month file too
            assert head_lines(tmp_path)[-1].records == 3
    assert await verified(audit) == Verdict(records=3)
    assert opened(tmp_path).broken is None


@settings(max_examples=40)
@given(
    durable=st.lists(st.booleans(), min_size=1, max_size=8),
    cut=st.integers(min_value=0, max_value=400),
)
async def test_a_head_file_cut_anywhere_in_its_last_line_is_never_tampering(
    durable: list[bool], cut: int
) -> None:
    """A crash can leave the head file ending anywhere in the line being appended."""
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name) / "audit"
        audit = opened(directory)
        with trio.fail_after(CAP_S):
            async with trio.open_nursery() as nursery:
                audit.flush_in(nursery)
                for i, sure in enumerate(durable):
                    await audit.append(record(f"c{i}"), SEPT, durable=sure)
        data = (directory / "head").read_bytes()
        last_start = data.rstrip(b"\n").rfind(b"\n") + 1
        (directory / "head").write_bytes(data[: min(len(data), last_start + cut)])
        again = opened(directory)
        assert again.broken is None
        assert await verified(again) == Verdict(records=len(durable))


async def test_a_head_written_whole_before_issue_22_is_read_and_kept(tmp_path: Path) -> None:
    """Before, the head file was one head without its newline, replaced at every append."""
    await written(tmp_path, SEPT, SEPT)
    (last,) = head_lines(tmp_path)[-1:]
    (tmp_path / "head").write_bytes(msgspec.json.encode(last))
    again = opened(tmp_path)
    assert again.broken is None
    assert (tmp_path / "head").read_bytes() == msgspec.json.encode(last) + b"\n"
    assert await verified(again) == Verdict(records=2)
