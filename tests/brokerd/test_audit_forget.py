"""Forget in the audit log (issue 31): a text redacted from every record that holds it, the
chain still verifying and saying so, and any other change of a text still tampering."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lines_store import holding_files

import proto
from brokerd._audit import Audit, Verdict
from brokerd._audit_checkpoint import Checkpoint
from brokerd._audit_forget import AuditLogForget, plan_edits
from proto import AUDIT_GENESIS, AuditRecordV3, Label, Surface, TextCommits

CAP_S = 10
DEC = datetime(2026, 12, 6, 9, 0, 0, tzinfo=UTC)
NOV = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
PLAN = "fg-testplan0001"
OWNER = Surface(via="bxctl", uid=1000)
SECRET = "Zebra-7731"


def record(
    call: str,
    arguments: str = '{"query":"tea"}',
    *,
    proposed: str | None = None,
    reason: str | None = None,
) -> AuditRecordV3:
    return AuditRecordV3(
        v=3,
        time="2026-12-06T09:00:00Z",
        session="chat-forget000000001",
        call=call,
        tool="memory",
        arguments=arguments,
        decision="approved",
        label=Label(),
        status="ok",
        reason=reason,
        taint=Label(),
        proposed=proposed,
        commits=TextCommits(arguments=""),
        prev=AUDIT_GENESIS,
        mac="",
    )


def opened(directory: Path) -> Audit:
    audit = Audit(directory, directory.parent / "audit.key")
    audit.open()
    return audit


def files_holding(directory: Path, text: str) -> list[str]:
    """Every file under the audit directory whose bytes hold `text`, folded."""
    return [str(p.relative_to(directory)) for p in holding_files(directory, text)]


def part_of(audit: Audit) -> proto.ForgetPart[proto.NoSteps]:
    return proto.ForgetPart(AuditLogForget(audit))


def look(audit: Audit, text: str) -> int:
    return sum(len(edit.lines) for edit in plan_edits(audit.directory, text))


async def forget(audit: Audit, text: str, *, surface: Surface = OWNER) -> proto.ForgetApplied:
    part = part_of(audit)
    with trio.fail_after(CAP_S):
        await part.handle(proto.ForgetPrepare(plan=PLAN, text=text))
        planned = part.files.plans.read(PLAN)
        assert not proto.holds(msgspec.json.encode(planned).decode(), text)
        applied = await part.handle(proto.ForgetApply(plan=PLAN, text=text))
        assert isinstance(applied, proto.ForgetApplied)
        await audit.append_forget(
            plan=PLAN,
            counts={"audit": applied.holdings[0].count, "journal": 2},
            digest=audit.forget_digest(text),
            surface=surface,
            session=None,
        )
    return applied


def month(directory: Path, name: str = "2026-12.jsonl") -> list[bytes]:
    return (directory / name).read_bytes().splitlines()


def rewrite(directory: Path, number: int, line: bytes, name: str = "2026-12.jsonl") -> None:
    lines = month(directory, name)
    lines[number - 1] = line
    (directory / name).write_bytes(b"".join(li + b"\n" for li in lines))


async def three_holding(directory: Path) -> Audit:
    audit = opened(directory)
    with trio.fail_after(CAP_S):
        await audit.append(record("c1", json.dumps({"text": f"code {SECRET}"})), NOV)
        await audit.append(record("c2"), DEC)
        await audit.append(record("c3", proposed=f"the {SECRET.upper()} one"), DEC)
        await audit.append(record("c4", reason=f"approved by the owner: {SECRET}"), DEC)
    return audit


async def test_a_forget_redacts_every_record_and_verify_reports_it(tmp_path: Path) -> None:
    directory = tmp_path / "audit"
    audit = await three_holding(directory)
    assert look(audit, SECRET.lower()) == 3
    applied = await forget(audit, SECRET.lower())
    assert applied.holdings == [proto.Holding(store="audit", count=3, unit="records")]
    assert applied.conflicts == []
    assert files_holding(directory, SECRET) == []
    assert look(audit, SECRET) == 0
    assert not list((directory / ".forget").glob("fg-*"))
    with trio.fail_after(CAP_S):
        verdict = await audit.verify()
    assert verdict.broken_at is None
    assert verdict.records == 6  # four calls, the redaction, the forget
    assert [(f.plan, f.records, f.surface) for f in verdict.forgets] == [(PLAN, 3, OWNER)]
    forgotten = proto.AUDIT_LOG.decode(month(directory)[-1])
    assert isinstance(forgotten, proto.AuditForget)
    assert forgotten.digest == audit.forget_digest(SECRET)  # any case: the same text
    redacted = proto.AUDIT_LOG.decode(month(directory, "2026-11.jsonl")[0])
    assert isinstance(redacted, AuditRecordV3)
    assert json.loads(redacted.arguments) == {"text": f"code {proto.MARKER}"}
    again = opened(directory)  # a start accepts it too
    assert again.broken is None
    with trio.fail_after(CAP_S):
        assert (await again.verify()).forgets == verdict.forgets


async def test_the_plan_and_the_look_write_nothing_but_the_plan(tmp_path: Path) -> None:
    directory = tmp_path / "audit"
    audit = await three_holding(directory)
    before = {p: p.read_bytes() for p in directory.glob("*.jsonl")}
    part = part_of(audit)
    looked = await part.handle(proto.ForgetLook(text=SECRET))
    assert looked == proto.ForgetLooked(
        holdings=[proto.Holding(store="audit", count=3, unit="records")]
    )
    await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    planned = part.files.plans.read(PLAN)
    assert planned is not None
    assert (planned.counts, planned.stage) == ({"audit": 3}, "prepared")
    assert {p: p.read_bytes() for p in directory.glob("*.jsonl")} == before
    await part.handle(proto.ForgetAbort(plan=PLAN))
    assert not list((directory / ".forget").glob("fg-*"))


# 2026-12.jsonl after the forget: c2 (line 1, untouched), c3 (2, its proposed redacted),
# c4 (3, its reason redacted), the redaction, the forget.
Change = Callable[[AuditRecordV3, AuditRecordV3], AuditRecordV3]
CHANGES: dict[str, tuple[int, Change]] = {
    "one byte of a text no forget touched": (
        1,
        lambda r, _: msgspec.structs.replace(r, arguments='{"query":"tex"}'),
    ),
    "a redacted text changed again": (
        2,
        lambda r, _: msgspec.structs.replace(r, proposed="the [forgotten] two"),
    ),
    "a redacted text taken from another redacted record": (
        3,
        lambda r, other: msgspec.structs.replace(r, reason=other.proposed),
    ),
    "a text swapped into another field": (
        3,
        lambda r, _: msgspec.structs.replace(r, reason=r.arguments),
    ),
    "a record redacted that no forget lists": (
        1,
        lambda r, _: msgspec.structs.replace(r, arguments='{"query":"[forgotten]"}'),
    ),
}


@pytest.mark.parametrize("what", CHANGES)
async def test_a_text_changed_any_other_way_is_tampering(tmp_path: Path, what: str) -> None:
    line, change = CHANGES[what]
    directory = tmp_path / "audit"
    audit = await three_holding(directory)
    await forget(audit, SECRET)
    lines = month(directory)
    target = proto.AUDIT_LOG.decode(lines[line - 1])
    other = proto.AUDIT_LOG.decode(lines[1])
    assert isinstance(target, AuditRecordV3)
    assert isinstance(other, AuditRecordV3)
    changed = change(target, other)
    assert changed != target
    rewrite(directory, line, msgspec.json.encode(changed))
    with trio.fail_after(CAP_S):
        verdict = await audit.verify()
    assert verdict.broken_at is not None
    assert verdict.broken_at.startswith(f"2026-12.jsonl line {line}: the text of its ")
    assert opened(directory).broken is not None


async def test_a_half_applied_forget_is_finished_by_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "audit"
    audit = await three_holding(directory)
    part = part_of(audit)
    await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    apply_file_edits = proto.apply_file_edits
    applied: list[str] = []

    def dies_after_one(root: Path, edits: list[proto.FileEdit]) -> list[str]:
        for edit in edits:
            if applied:
                raise KeyboardInterrupt  # killed: nothing after it runs
            applied.append(edit.path)
            apply_file_edits(root, [edit])
        return []

    monkeypatch.setattr(proto, "apply_file_edits", dies_after_one)
    with trio.fail_after(CAP_S), pytest.raises(KeyboardInterrupt):
        await part.handle(proto.ForgetApply(plan=PLAN))
    monkeypatch.setattr(proto, "apply_file_edits", apply_file_edits)
    assert applied == ["2026-11.jsonl"]
    assert files_holding(directory, SECRET) == ["2026-12.jsonl"]
    again = opened(directory)
    assert await part_of(again).recover() == [PLAN]
    assert files_holding(directory, SECRET) == []
    assert not list((directory / ".forget").glob("fg-*"))
    assert again.broken is None
    with trio.fail_after(CAP_S):
        verdict = await again.verify()
    assert verdict.broken_at is None
    assert [(f.plan, f.records) for f in verdict.forgets] == [(PLAN, 3)]


async def test_a_crash_before_the_listing_leaves_the_plan_to_finish(tmp_path: Path) -> None:
    directory = tmp_path / "audit"
    audit = await three_holding(directory)
    part = part_of(audit)
    await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    await part.handle(proto.ForgetPrepare(plan="fg-neverdecided", text=SECRET))
    plan = part.files.plans.read(PLAN)
    assert plan is not None
    part.files.plans.write(PLAN, msgspec.structs.replace(plan, stage="committed"))
    again = opened(directory)
    assert await part_of(again).recover() == [PLAN]
    assert files_holding(directory, SECRET) == []
    with trio.fail_after(CAP_S):
        verdict = await again.verify()
    assert verdict.broken_at is None
    assert part.files.plans.ids() == ["fg-neverdecided"]  # brokerd's to decide, whatever age


# -- any text, in any text field of any records -----------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéÉßØø"
_SKELETON = "".join(
    [
        *AuditRecordV3.__struct_fields__,
        *proto.AuditHead.__struct_fields__,  # the head file's words, and JSON's own
        *Checkpoint.__struct_fields__,  # the checkpoint's ("unfinished" holds "he")
        "kind call forget redaction migration owner bxctl private untrusted false true null",
        "chat-forget000000001 memory approved ok 2026-12-06t09:00:00z fg-testplan0001 audit",
        "journal places file line fields digest counts decision surface via uid 1000",
        proto.MARKER,
    ]
).lower()

needles = (
    st.text(alphabet=_LETTERS + "0123456789 -_.!?#", min_size=2, max_size=12)
    .filter(lambda t: t.strip() == t and len(t.strip()) >= 2)
    .filter(lambda t: not set(t.lower()) <= set("0123456789abcdef"))
    .filter(lambda t: t.lower() not in _SKELETON)
)
fillers = st.text(alphabet=_LETTERS + " ,:", max_size=12)


@st.composite
def texts_holding(draw: st.DrawFn, needle: str) -> str:
    """A text that holds `needle` (in some case) or not, as plain text or inside JSON."""
    parts = [draw(fillers)]
    for _ in range(draw(st.integers(0, 2))):
        cased = draw(st.sampled_from([needle, needle.upper(), needle.lower()]))
        parts += [cased, draw(fillers)]
    text = "".join(parts)
    if draw(st.booleans()):
        return json.dumps({"text": text, "n": 1}, ensure_ascii=draw(st.booleans()))
    return text


@st.composite
def logs(draw: st.DrawFn) -> tuple[str, list[AuditRecordV3]]:
    needle = draw(needles)
    records = []
    for i in range(draw(st.integers(1, 5))):
        records.append(
            record(
                f"c{i}",
                draw(texts_holding(needle)),
                proposed=draw(st.none() | texts_holding(needle)),
                reason=draw(st.none() | texts_holding(needle)),
            )
        )
    return needle, records


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs())
def test_any_text_forgotten_leaves_no_audit_file_holding_it(
    drawn: tuple[str, list[AuditRecordV3]],
) -> None:
    needle, records = drawn
    holding = sum(
        any(
            t is not None and proto.holds_text(t, needle)
            for t in (r.arguments, r.proposed, r.reason)
        )
        for r in records
    )
    assume(holding)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "audit"

        async def run() -> Verdict:
            audit = opened(directory)
            with trio.fail_after(CAP_S):
                for r in records:
                    await audit.append(r, DEC)
            applied = await forget(audit, needle)
            assert applied.conflicts == []
            assert applied.holdings[0].count == holding
            with trio.fail_after(CAP_S):
                return await audit.verify()

        verdict = trio.run(run)
        assert files_holding(directory, needle) == []
        assert verdict.broken_at is None
        assert [(f.plan, f.records) for f in verdict.forgets] == [(PLAN, holding)]
        assert opened(directory).broken is None
