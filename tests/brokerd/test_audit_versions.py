"""Audit records of three versions: V1 lines as brokerd wrote them until issue 30, V2
lines until issue 31, V3 since. Old lines keep verifying byte for byte under their own
MAC domain; a log of them is moved to V3 once, at start, after it verifies, by a signed
migration record pinning the old head; a changed old line is tampering, and such a log
is never moved."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import proto
from brokerd import _audit_migration
from brokerd._audit import Audit
from proto import (
    AUDIT_GENESIS,
    AuditMigration,
    AuditRecordV1,
    AuditRecordV2,
    AuditRecordV3,
    Class,
    Label,
    Surface,
    TextCommits,
)

CAP_S = 10
KEY = bytes(range(32))
DEC = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)

# Three lines and the head's MAC as the code at caf25a9 (before V2) wrote them under KEY:
# an approved memory call (started, then ok) and a denial without a grant or a taint.
V1_LINES = [
    b'{"time":"2026-11-30T10:00:00Z","session":"chat-legacy000000001","call":"c1","too'
    b'l":"memory","arguments":"{\\"action\\":\\"add\\",\\"file\\":\\"memory\\",\\"text\\":\\"like'
    b's tea\\"}","grant":"builtin-memory","grant_sha256":"ababababababababababababababa'
    b'bababababababababababababababababab","decision":"approved","approval":"ap-abc234'
    b'","label":{"class":"private","untrusted":false},"status":"started","reason":null'
    b',"taint":{"class":"private","untrusted":true},"prev":"00000000000000000000000000'
    b'00000000000000000000000000000000000000","mac":"3a89028c33c921a90af1942d42f58d02d'
    b'fe60874d1fe8aec293694a60dee6294","surface":{"via":"bxctl","uid":1000}}',
    b'{"time":"2026-11-30T10:00:01Z","session":"chat-legacy000000001","call":"c1","too'
    b'l":"memory","arguments":"{\\"action\\":\\"add\\",\\"file\\":\\"memory\\",\\"text\\":\\"like'
    b's tea\\"}","grant":"builtin-memory","grant_sha256":"ababababababababababababababa'
    b'bababababababababababababababababab","decision":"approved","approval":"ap-abc234'
    b'","label":{"class":"secret","untrusted":false},"status":"ok","reason":null,"tain'
    b't":{"class":"private","untrusted":true},"prev":"3a89028c33c921a90af1942d42f58d02'
    b'dfe60874d1fe8aec293694a60dee6294","mac":"115cc85c3054984e95d4dfa5ff78a0bade7fac0'
    b'b2c54a5ab5e0c6055deac6df0","surface":{"via":"bxctl","uid":1000}}',
    b'{"time":"2026-11-30T10:00:02Z","session":"chat-legacy000000002","call":"c2","too'
    b'l":"read_file","arguments":"{\\"path\\":\\"/x\\"}","grant":null,"grant_sha256":null,'
    b'"decision":"denied","approval":null,"label":{"class":"private","untrusted":false'
    b'},"status":"denied","reason":"no grant for read_file","taint":null,"prev":"115cc'
    b'85c3054984e95d4dfa5ff78a0bade7fac0b2c54a5ab5e0c6055deac6df0","mac":"5f58c222060f'
    b'8e50e6bcc6db88445db15cff1d0ba723103d29b24ec651156c80"}',
]
V1_HEAD_MAC = "7477b95dd7550b14c73b57674aa48336ebc17dde4a67e25446f62b594fe2a728"


def legacy_log(directory: Path) -> None:
    """The audit directory of a brokerd from before V2: three V1 lines, their head, the key."""
    directory.mkdir(mode=0o700)
    (directory / "2026-11.jsonl").write_bytes(b"".join(line + b"\n" for line in V1_LINES))
    last = json.loads(V1_LINES[-1])["mac"]
    head = proto.AuditHead(records=3, last=last, mac=V1_HEAD_MAC)
    (directory / "head").write_bytes(msgspec.json.encode(head) + b"\n")
    key = directory.parent / "audit.key"
    key.write_text(KEY.hex() + "\n")
    os.chmod(key, 0o600)


def opened(directory: Path) -> Audit:
    audit = Audit(directory, directory.parent / "audit.key")
    audit.open()
    return audit


def v2(call: str, *, label: Label | None = None) -> AuditRecordV2:
    return AuditRecordV2(
        time="2026-12-01T09:00:00Z",
        session="chat-legacy000000002",
        call=call,
        tool="recall",
        arguments='{"query":"tea"}',
        grant="builtin-recall",
        grant_sha256="cd" * 32,
        decision="auto",
        label=label or Label(),
        status="ok",
        taint=Label(),
        prev=AUDIT_GENESIS,
        mac="",
    )


def v3(call: str) -> AuditRecordV3:
    return AuditRecordV3(
        v=3,
        time="2026-12-01T09:00:00Z",
        session="chat-legacy000000002",
        call=call,
        tool="recall",
        arguments='{"query":"tea"}',
        decision="auto",
        label=Label(),
        status="ok",
        taint=Label(),
        commits=TextCommits(arguments=""),
        prev=AUDIT_GENESIS,
        mac="",
    )


def all_lines(directory: Path) -> list[bytes]:
    return [
        line
        for path in sorted(directory.glob("*.jsonl"))
        for line in path.read_bytes().splitlines()
    ]


def test_the_old_lines_read_as_v1_and_keep_their_bytes_and_macs() -> None:
    records = [proto.AUDIT_LOG.decode(line) for line in V1_LINES]
    assert all(isinstance(record, AuditRecordV1) for record in records)
    assert [msgspec.json.encode(record) for record in records] == V1_LINES
    assert [proto.audit_mac(KEY, record) for record in records] == [r.mac for r in records]
    assert isinstance(records[0], AuditRecordV1)
    assert isinstance(records[2], AuditRecordV1)
    assert records[0].surface == Surface(via="bxctl", uid=1000)
    assert records[2].taint is None


def v1_then_v2_log(directory: Path) -> tuple[int, str]:
    """The V1 log, then two V2 lines chained to it (as brokerd before issue 31 wrote them)."""
    legacy_log(directory)
    last = json.loads(V1_LINES[-1])["mac"]
    lines = []
    for record in (v2("c3"), v2("c4", label=Label(untrusted=True))):
        chained = msgspec.structs.replace(record, prev=last)
        last = proto.audit_mac(KEY, chained)
        lines.append(msgspec.json.encode(msgspec.structs.replace(chained, mac=last)) + b"\n")
    (directory / "2026-12.jsonl").write_bytes(b"".join(lines))
    mac = proto.audit_head_mac(KEY, records=5, last=last, broken=None)
    head = proto.AuditHead(records=5, last=last, mac=mac)
    (directory / "head").write_bytes(msgspec.json.encode(head) + b"\n")
    return 5, last


async def test_a_v1_and_v2_log_is_moved_to_v3_once_and_pins_its_old_head(tmp_path: Path) -> None:
    directory = tmp_path / "audit"
    old_records, old_last = v1_then_v2_log(directory)
    audit = opened(directory)
    assert audit.broken is None
    assert audit.returned == {
        "chat-legacy000000001": Label(class_=Class.secret),
        "chat-legacy000000002": Label(untrusted=True),
    }
    with trio.fail_after(CAP_S):
        verdict = await audit.verify()
    assert (verdict.records, verdict.broken_at) == (6, None)
    november = (directory / "2026-11.jsonl").read_bytes().splitlines()
    december = (directory / "2026-12.jsonl").read_bytes().splitlines()
    assert len(november) == 3  # line for line
    moved = [proto.AUDIT_LOG.decode(line) for line in november + december[:2]]
    assert all(isinstance(record, AuditRecordV3) for record in moved)
    assert [getattr(r, "call", None) for r in moved] == ["c1", "c1", "c2", "c3", "c4"]
    assert moved[0].prev == AUDIT_GENESIS
    migration = proto.AUDIT_LOG.decode(december[-1])
    assert isinstance(migration, AuditMigration)
    assert (migration.old_records, migration.old_last) == (old_records, old_last)
    assert migration.prev == moved[-1].mac
    assert not (directory / ".migration").exists()
    with trio.fail_after(CAP_S):
        await audit.append(v3("c5"), DEC)
    before = all_lines(directory)
    again = opened(directory)  # once: a restart moves nothing
    assert all_lines(directory) == before
    assert again.broken is None
    with trio.fail_after(CAP_S):
        state = await again.call_state("chat-legacy000000002", "c2")
        newer = await again.call_state("chat-legacy000000002", "c4")
        verdict = await again.verify()
    assert (state.state, state.status) == ("denied", "denied")
    assert (newer.state, newer.status) == ("finished", "ok")
    assert (verdict.records, verdict.broken_at) == (7, None)


async def test_a_move_cut_off_is_finished_or_made_again_at_the_next_start(tmp_path: Path) -> None:
    directory = tmp_path / "audit"
    v1_then_v2_log(directory)
    old = all_lines(directory)
    _audit_migration.stage(directory, KEY, old_records=5, old_last="x" * 64, now=DEC)
    (directory / ".migration" / "head").unlink()  # the staging was cut before its head
    assert all_lines(directory) == old
    assert opened(directory).broken is None  # an unfinished staging is removed, the move redone
    moved = all_lines(directory)
    assert moved != old
    # a whole staging, a crash after its first file was moved: the start finishes it
    directory2 = tmp_path / "audit2"
    v1_then_v2_log(directory2)
    _audit_migration.stage(directory2, KEY, old_records=5, old_last="y" * 64, now=DEC)
    staged = directory2 / ".migration"
    first = sorted(staged.glob("*.jsonl"))[0]
    first.rename(directory2 / first.name)
    audit = opened(directory2)
    assert audit.broken is None
    assert not staged.exists()
    with trio.fail_after(CAP_S):
        verdict = await audit.verify()
    assert (verdict.records, verdict.broken_at) == (6, None)
    last = proto.AUDIT_LOG.decode(all_lines(directory2)[-1])
    assert isinstance(last, AuditMigration)
    assert last.old_last == "y" * 64


@pytest.mark.parametrize(
    ("line", "change"),
    [
        (0, (b'"status":"started"', b'"status":"ok"')),
        (1, (b'"class":"secret"', b'"class":"public"')),
        (2, (b'"reason":"no grant for read_file"', b'"reason":"no grant"')),
        (2, (b'"taint":null,', b"")),  # valid V1 too, but not the bytes it was signed as
        (2, (b"{", b'{"v":2,')),  # read as V2: another MAC domain
        (3, (b'"call":"c3"', b'"call":"c9"')),
        (3, (b'"v":2,', b"")),  # read as V1: another MAC domain, and not V1's shape
        (4, (b'"untrusted":true', b'"untrusted":false')),
        (4, (b'"status":"ok"', b'"status":"ok","reason":null')),  # not V2's own encoding
    ],
)
async def test_a_changed_old_line_is_tampering_and_the_log_is_not_moved(
    tmp_path: Path, line: int, change: tuple[bytes, bytes]
) -> None:
    directory = tmp_path / "audit"
    v1_then_v2_log(directory)
    files = sorted(directory.glob("*.jsonl"))
    path, number = (files[0], line) if line < 3 else (files[1], line - 3)
    lines = path.read_bytes().splitlines(keepends=True)
    old, new = change
    assert old in lines[number]
    lines[number] = lines[number].replace(old, new, 1)
    path.write_bytes(b"".join(lines))
    before = all_lines(directory)
    audit = opened(directory)
    assert audit.broken is not None
    assert f"{path.name} line {number + 1}: " in audit.broken
    assert all_lines(directory) == before  # not moved: it keeps being reported broken
    with trio.fail_after(CAP_S):
        verdict = await audit.verify()
    assert verdict.broken_at is not None
    assert opened(directory).broken is not None


def test_an_unknown_version_is_not_a_record() -> None:
    line = msgspec.json.encode(v2("c3")).replace(b'"v":2', b'"v":4')
    with pytest.raises(ValueError, match="audit record version 4 is not one of 1, 2, 3"):
        proto.AUDIT_LOG.decode(line)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | st.sampled_from(V1_LINES).map(lambda b: b[: len(b) // 2]))
def test_any_bytes_give_a_record_or_a_value_error(data: bytes) -> None:
    try:
        record = proto.AUDIT_LOG.decode(data)
    except ValueError:
        return
    assert isinstance(record, AuditRecordV1 | AuditRecordV2 | AuditRecordV3 | AuditMigration)


@settings(max_examples=100, deadline=None)
@given(
    reason=st.none() | st.text(max_size=20),
    surface=st.none() | st.builds(Surface, via=st.sampled_from(["bxctl", "mattermost"])),
    proposed=st.none() | st.text(max_size=20),
    grant=st.booleans(),
)
def test_every_v2_record_reads_back_as_itself(
    reason: str | None, surface: Surface | None, proposed: str | None, grant: bool
) -> None:
    record = msgspec.structs.replace(
        v2("c1"),
        reason=reason,
        surface=surface,
        proposed=proposed,
        grant="g" if grant else None,
        grant_sha256="ab" * 32 if grant else None,
    )
    signed = msgspec.structs.replace(record, mac=proto.audit_mac(KEY, record))
    line = msgspec.json.encode(signed)
    assert proto.AUDIT_LOG.decode(line) == signed
    assert None not in json.loads(line).values()
    as_v1 = AuditRecordV1(**{f: getattr(signed, f) for f in AuditRecordV1.__struct_fields__})
    assert proto.audit_mac(KEY, as_v1) != signed.mac  # each version its own MAC domain
