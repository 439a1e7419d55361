"""`verify`'s parallel walk (a month file per worker, joined after) finds what the thread's
walk finds, in intact logs and damaged ones."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import proto
from brokerd import _audit_parallel
from brokerd._audit_migration import V3Line, seal
from brokerd._audit_parallel import walk_parallel
from brokerd._audit_walk import Walk, walk
from proto import AUDIT_GENESIS as GENESIS
from proto import AuditForget, AuditRecordV3, AuditRedaction, Label, TextCommits

from .test_audit import OCT, SEPT, lines, verified, written

KEY = bytes(range(32))
COMMIT_KEY = proto.audit_commit_key(KEY)
MONTHS = ["2026-01.jsonl", "2026-02.jsonl", "2026-03.jsonl", "2026-04.jsonl"]

texts = st.text(st.characters(codec="utf-8"), max_size=12)


@dataclass(frozen=True)
class Call:
    arguments: str
    reason: str | None
    proposed: str | None
    started: bool


calls = st.builds(
    Call,
    arguments=texts,
    reason=st.none() | texts,
    proposed=st.none() | texts,
    started=st.booleans(),
)


def call_record(n: int, call: Call) -> AuditRecordV3:
    return AuditRecordV3(
        v=3,
        time="2026-01-01T00:00:00Z",
        session=f"chat-{n % 3}",
        call=f"c{n}",
        tool="http_fetch",
        arguments=call.arguments,
        decision="auto",
        label=Label(),
        status="started" if call.started else "ok",
        reason=call.reason,
        proposed=call.proposed,
        taint=Label(),
        commits=TextCommits(arguments=""),
        prev=GENESIS,
        mac="",
    )


def encoded(record: V3Line) -> bytes:
    return msgspec.json.encode(record) + b"\n"


def build(directory: Path, months: list[list[Call]], forget: int | None) -> None:
    """A log brokerd could have written: `months` of calls, then, with `forget`, that
    record's arguments redacted and listed by a redaction (and the forget's own record)."""
    prev = GENESIS
    files: list[list[V3Line]] = []
    n = 0
    for month in months:
        sealed: list[V3Line] = []
        for call in month:
            record = seal(KEY, COMMIT_KEY, call_record(n, call), prev)
            sealed.append(record)
            prev, n = record.mac, n + 1
        files.append(sealed)
    if forget is not None and n:
        at = forget % n
        index, line = next(
            (i, at - sum(len(f) for f in files[:i]))
            for i in range(len(files))
            if at < sum(len(f) for f in files[: i + 1])
        )
        target = files[index][line]
        assert isinstance(target, AuditRecordV3)
        redacted = msgspec.structs.replace(target, arguments="[forgotten]")
        fields = proto.unmatched_texts(COMMIT_KEY, redacted) or {}
        if fields:
            files[index][line] = redacted
            place = proto.Redacted(file=MONTHS[index], line=line + 1, fields=fields)
            listing = seal(
                KEY,
                COMMIT_KEY,
                AuditRedaction(
                    v=3, time="2026-04-30T00:00:00Z", plan="p1", places=[place], prev="", mac=""
                ),
                prev,
            )
            own = seal(
                KEY,
                COMMIT_KEY,
                AuditForget(
                    v=3,
                    time="2026-04-30T00:00:01Z",
                    decision="owner",
                    surface=proto.Surface(via="bxctl", uid=1000),
                    plan="p1",
                    counts={"audit": 1},
                    digest="d" * 64,
                    prev="",
                    mac="",
                ),
                listing.mac,
            )
            files[-1] += [listing, own]
    for name, records in zip(MONTHS, files, strict=False):
        (directory / name).write_bytes(b"".join(encoded(r) for r in records))


@dataclass(frozen=True)
class ByteChanged:
    file: int
    at: int
    byte: int


@dataclass(frozen=True)
class LineRemoved:
    file: int
    line: int


@dataclass(frozen=True)
class LinesSwapped:
    file: int
    line: int
    other_file: int
    other_line: int


@dataclass(frozen=True)
class TornTail:
    file: int
    cut: int


@dataclass(frozen=True)
class FileRemoved:
    file: int


Damage = ByteChanged | LineRemoved | LinesSwapped | TornTail | FileRemoved

index = st.integers(0, 1_000)
damages: st.SearchStrategy[Damage] = st.one_of(
    st.builds(ByteChanged, file=index, at=index, byte=st.integers(0, 255)),
    st.builds(LineRemoved, file=index, line=index),
    st.builds(LinesSwapped, file=index, line=index, other_file=index, other_line=index),
    st.builds(TornTail, file=index, cut=st.integers(1, 40)),
    st.builds(FileRemoved, file=index),
)


def damage(directory: Path, harm: Damage) -> None:
    """Damage the log as `harm` says (nothing, when the file it names is empty)."""
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        return
    path = files[harm.file % len(files)]
    data = path.read_bytes()
    rows = data.splitlines(keepends=True)
    match harm:
        case ByteChanged(at=at, byte=byte) if data:
            at %= len(data)
            path.write_bytes(data[:at] + bytes([byte]) + data[at + 1 :])
        case LineRemoved(line=line) if rows:
            del rows[line % len(rows)]
            path.write_bytes(b"".join(rows))
        case LinesSwapped(line=line, other_file=other_file, other_line=other_line) if rows:
            other = files[other_file % len(files)]
            others = rows if other == path else other.read_bytes().splitlines(keepends=True)
            if others:
                i, j = line % len(rows), other_line % len(others)
                rows[i], others[j] = others[j], rows[i]
                path.write_bytes(b"".join(rows))
                if other != path:
                    other.write_bytes(b"".join(others))
        case TornTail(cut=cut) if data:
            path.write_bytes(data[: max(0, len(data) - cut)])
        case FileRemoved():
            path.unlink()
        case _:
            pass


def what_verify_reads(found: Walk) -> tuple[object, ...]:
    return (
        found.records,
        found.broken,
        found.last,
        found.last_where,
        found.forgets,
        found.torn,
    )


@pytest.fixture(scope="module")
def pool_ready() -> None:
    """One parallel walk first, so the forkserver's start is not any example's deadline."""
    with tempfile.TemporaryDirectory() as folder:
        build(Path(folder), [[Call("a", None, None, False)]] * 2, forget=None)
        assert walk_parallel(Path(folder), KEY).records == 2


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    months=st.lists(st.lists(calls, min_size=1, max_size=4) | st.just([]), min_size=2, max_size=4),
    forget=st.none() | st.integers(0, 100),
    harms=st.lists(damages, max_size=2),
)
def test_the_parallel_walk_finds_what_the_walk_finds(
    pool_ready: None, months: list[list[Call]], forget: int | None, harms: list[Damage]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        build(directory, months, forget)
        for harm in harms:
            damage(directory, harm)
        sequential = walk(directory, KEY)
        parallel = walk_parallel(directory, KEY)
        assert what_verify_reads(parallel) == what_verify_reads(sequential)


def test_a_forget_across_months_verifies_in_parallel(pool_ready: None, tmp_path: Path) -> None:
    build(tmp_path, [[Call("a", None, None, False)], [Call("b", "r", "p", False)]], forget=0)
    found = walk_parallel(tmp_path, KEY)
    assert (found.records, found.broken) == (4, None)
    assert [f.records for f in found.forgets.values()] == [1]


def test_a_month_removed_from_the_middle_is_named(pool_ready: None, tmp_path: Path) -> None:
    months = [[Call("a", None, None, False)] * 2] * 3
    build(tmp_path, months, forget=None)
    (tmp_path / MONTHS[1]).unlink()
    found = walk_parallel(tmp_path, KEY)
    assert found.broken == (
        f"{MONTHS[2]} line 1: its prev is not the MAC of {MONTHS[0]} line 2 (records were "
        "removed, moved or copied between them)"
    )
    assert found.records == 4


async def test_verify_of_a_large_log_walks_it_in_workers_and_finds_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = await written(tmp_path, SEPT, SEPT, OCT, OCT)
    shown: list[int] = []
    monkeypatch.setattr(_audit_parallel, "PARALLEL_BYTES", 0)
    walked = _audit_parallel.walk_parallel

    def walk_shown(directory: Path, key: bytes) -> Walk:
        shown.append(1)
        return walked(directory, key)

    monkeypatch.setattr(_audit_parallel, "walk_parallel", walk_shown)
    assert (await verified(audit)).broken_at is None
    october = tmp_path / "2026-10.jsonl"
    october.write_bytes(b"".join(line + b"\n" for line in lines(october)[1:]))
    verdict = await verified(audit)
    assert shown == [1, 1]
    assert verdict.broken_at is not None
    assert "2026-10.jsonl line 1: its prev is not the MAC of 2026-09.jsonl line 2" in (
        verdict.broken_at
    )
