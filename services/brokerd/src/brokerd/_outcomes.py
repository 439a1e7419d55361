"""What became of a tool call: refused, denied, ran, or refused unrecorded.

One Struct per outcome, each holding only what it can have: a call denied by the grants
has no approval; one the owner did not approve has its approval id, and where the owner
denied it if they did; only a call that ran has a label of its own. What loopd reads
(`answer`) and what the audit log records (`audit_record`) are derived from an outcome
in one place each, so a decision, its status and its reason cannot disagree.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import assert_never

from msgspec.structs import replace

import proto
from proto import AUDIT_GENESIS, AuditRecordV3, Label, Status, Surface, TextCommits, utc_stamp

from ._approvals import NotApproved, OwnerDenies
from ._audit import AUDIT_UNWRITABLE
from ._grants import Grant
from ._runtimes import Approved, Auto, LabelledOutput, OwnEdit, RunRequest

__all__ = [
    "AUDIT_UNWRITABLE_SENTENCE",
    "Denied",
    "Outcome",
    "Policy",
    "Ran",
    "Refused",
    "Run",
    "Unapproved",
    "Unrecorded",
    "answer",
    "audit_record",
]

MAX_REASON_CHARS = 1000
"""How much of a refusal or denial sentence an audit record keeps as its reason."""

AUDIT_UNWRITABLE_SENTENCE = (
    "the audit log cannot be written ({error}), so {tool} did not run; try again later "
    f"(runbook: {AUDIT_UNWRITABLE})"
)
"""Fixed apart from the error and the tool: a call whose decision could not be recorded."""


@dataclasses.dataclass(frozen=True)
class Run:
    """A call decided to run (`request.by` says who decided), and the grant it runs under."""

    request: RunRequest
    grant: Grant


@dataclasses.dataclass(frozen=True)
class Policy:
    """Denied by the grants.

    None for the tool, the session's taint, a `deny` grant, a path or host outside every
    grant, or grants that overlap.
    """


@dataclasses.dataclass(frozen=True)
class Unapproved:
    """Denied because the owner, asked as approval `approval`, did not approve it."""

    approval: str
    settled: NotApproved


@dataclasses.dataclass(frozen=True, kw_only=True)
class Refused:
    """Not run: the arguments are not the tool's, or its runtime cannot run it."""

    arguments: str
    why: str
    grant: Grant | None = None
    surface: Surface | None = None
    """Where the owner made the edit, when it is their own edit that is refused."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Denied:
    """Not run: the grants or the owner said no; `why` is the sentence the model reads."""

    arguments: str
    why: str
    by: Policy | Unapproved
    grant: Grant | None = None


@dataclasses.dataclass(frozen=True)
class Ran:
    """The call ran and answered `output` (the owner's change said first, if they made one)."""

    run: Run
    output: LabelledOutput


@dataclasses.dataclass(frozen=True)
class Unrecorded:
    """Not run, and not on record: its decision could not be written to the audit log."""

    run: Run
    error: str
    """Why the audit log could not be written."""


Outcome = Refused | Denied | Ran | Unrecorded
"""What became of a call."""


def answer(outcome: Outcome) -> tuple[Status, str, Label]:
    """What loopd reads of `outcome`: the status, the content and the result's label."""
    match outcome:
        case Refused(why=why):
            return "error", why, Label()
        case Denied(why=why):
            return "denied", why, Label()
        case Ran(output=output):
            return output.status, output.content, output.label
        case Unrecorded(run=run, error=error):
            tool = run.request.tool
            return "error", AUDIT_UNWRITABLE_SENTENCE.format(error=error, tool=tool), Label()
        case _:
            assert_never(outcome)


def audit_record(
    what: Run | Outcome, request: proto.ToolRequest, taint: Label, now: datetime
) -> AuditRecordV3 | None:
    """The audit record of a decision to run (`started`) or of an outcome; None for none.

    Unchained and unsigned (`prev` the genesis, `commits` and `mac` empty): `Audit.append`
    chains it, commits to its texts and signs it. An `Unrecorded` call has no record: none
    could be written.
    """
    record = AuditRecordV3(
        v=3,
        time=utc_stamp(now),
        session=request.session,
        call=request.call.id,
        tool=request.call.name,
        arguments=request.call.arguments,
        decision="refused",
        label=Label(),
        status="error",
        taint=taint,
        commits=TextCommits(arguments=""),
        prev=AUDIT_GENESIS,
        mac="",
    )
    match what:
        case Run():
            return _ran(record, what, "started", what.grant.label)
        case Ran(run=run, output=output):
            ran = _ran(record, run, output.status, output.label)
            if ran.reason is None and output.status != "ok":
                ran = replace(ran, reason=output.content[:MAX_REASON_CHARS])
            return ran
        case Refused(arguments=arguments, why=why, grant=grant, surface=surface):
            return replace(
                _under(grant, record),
                arguments=arguments,
                reason=why[:MAX_REASON_CHARS],
                surface=surface,
            )
        case Denied(arguments=arguments, why=why, grant=grant, by=by):
            denied = replace(
                _under(grant, record),
                arguments=arguments,
                decision="denied",
                status="denied",
                reason=why[:MAX_REASON_CHARS],
            )
            match by:
                case Policy():
                    return denied
                case Unapproved(approval=approval, settled=OwnerDenies(surface=surface)):
                    return replace(denied, approval=approval, surface=surface)
                case Unapproved(approval=approval):
                    return replace(denied, approval=approval)
                case _:
                    assert_never(by)
        case Unrecorded():
            return None
        case _:
            assert_never(what)


def _under(grant: Grant | None, record: AuditRecordV3) -> AuditRecordV3:
    if grant is None:
        return record
    return replace(record, grant=grant.name, grant_sha256=grant.grant_sha256)


def _ran(record: AuditRecordV3, run: Run, status: proto.AuditStatus, label: Label) -> AuditRecordV3:
    """The record of a call that runs (or ran): who decided, under which grant."""
    record = replace(
        _under(run.grant, record),
        arguments=run.request.arguments.canonical,
        status=status,
        label=label,
    )
    match run.request.by:
        case Auto():
            return replace(record, decision="auto")
        case Approved(approval=approval, surface=surface, note=note, proposed=proposed):
            said = f"approved by the owner: {note}" if note else None
            return replace(
                record,
                decision="approved",
                approval=approval,
                surface=surface,
                proposed=proposed,
                reason=said,
            )
        case OwnEdit(approval=approval, surface=surface):
            return replace(record, decision="owner", approval=approval, surface=surface)
        case _:
            assert_never(run.request.by)
