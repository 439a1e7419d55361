"""Audit records of two versions in one log (issue 30): V1 lines as brokerd wrote them
until then, V2 lines after. Old lines keep verifying byte for byte under their own MAC
domain, the chain runs across versions, and a changed line of either is tampering."""

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
from brokerd._audit import Audit
from proto import AUDIT_GENESIS, AuditRecordV1, AuditRecordV2, Class, Label, Surface

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
    assert records[0].surface == Surface(via="bxctl", uid=1000)
    assert records[2].taint is None


async def test_a_log_of_v1_lines_then_v2_lines_verifies(tmp_path: Path) -> None:
    directory = tmp_path / "audit"
    legacy_log(directory)
    audit = opened(directory)
    assert audit.broken is None
    assert audit.returned == {
        "chat-legacy000000001": Label(class_=Class.secret),
        "chat-legacy000000002": Label(),
    }
    with trio.fail_after(CAP_S):
        await audit.append(v2("c3"), DEC)
        await audit.append(v2("c4", label=Label(untrusted=True)), DEC)
        verdict = await audit.verify()
    assert (verdict.records, verdict.broken_at) == (5, None)
    lines = all_lines(directory)
    assert lines[:3] == V1_LINES  # never rewritten
    third, fourth = (json.loads(line) for line in lines[3:])
    assert third["v"] == 2
    assert third["prev"] == json.loads(V1_LINES[-1])["mac"]  # one chain across versions
    assert fourth["prev"] == third["mac"]
    assert "reason" not in third  # None is left out of a V2 line
    again = opened(directory)  # a restart walks both versions
    assert again.broken is None
    assert again.returned["chat-legacy000000002"] == Label(untrusted=True)
    with trio.fail_after(CAP_S):
        state = await again.call_state("chat-legacy000000002", "c2")
        newer = await again.call_state("chat-legacy000000002", "c4")
    assert (state.state, state.status) == ("denied", "denied")
    assert (newer.state, newer.status) == ("finished", "ok")


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
async def test_a_changed_line_of_either_version_is_tampering(
    tmp_path: Path, line: int, change: tuple[bytes, bytes]
) -> None:
    directory = tmp_path / "audit"
    legacy_log(directory)
    audit = opened(directory)
    with trio.fail_after(CAP_S):
        await audit.append(v2("c3"), DEC)
        await audit.append(v2("c4", label=Label(untrusted=True)), DEC)
    files = sorted(directory.glob("*.jsonl"))
    path, number = (files[0], line) if line < 3 else (files[1], line - 3)
    lines = path.read_bytes().splitlines(keepends=True)
    old, new = change
    assert old in lines[number]
    lines[number] = lines[number].replace(old, new, 1)
    path.write_bytes(b"".join(lines))
    with trio.fail_after(CAP_S):
        verdict = await audit.verify()
    assert verdict.broken_at is not None
    assert verdict.broken_at.startswith(f"{path.name} line {number + 1}: ")


def test_an_unknown_version_is_not_a_record() -> None:
    line = msgspec.json.encode(v2("c3")).replace(b'"v":2', b'"v":3')
    with pytest.raises(ValueError, match="audit record version 3 is not one of 1, 2"):
        proto.AUDIT_LOG.decode(line)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | st.sampled_from(V1_LINES).map(lambda b: b[: len(b) // 2]))
def test_any_bytes_give_a_record_or_a_value_error(data: bytes) -> None:
    try:
        record = proto.AUDIT_LOG.decode(data)
    except ValueError:
        return
    assert isinstance(record, AuditRecordV1 | AuditRecordV2)


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
