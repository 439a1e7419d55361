"""Deciding a `tool_request` from loopd.

Parse the arguments → find the grant (of several for a file or web tool, the one whose
paths or hosts admit the call) → check the session's taint against `max_taint` →
`deny`, or ask the runtime whether the call can run at all → `auto`: run it; `ask`:
hold it pending for the owner, then run it or deny it. Every call is answered with a
`tool_response` whose sentence says exactly why.

The audit fails closed. A call that will run gets its decision record (`started`)
written and fsynced first; if that cannot be done, the call does not run and the model
reads `AUDIT_UNWRITABLE`. Its outcome record follows once it ran (a failure to write
that one is logged: the decision is on record, and the answer goes out). A call that
does not run gets one record, its outcome.

The session's taint is the stricter of loopd's word and brokerd's own: the labels of
everything brokerd returned to that session (rebuilt from the audit log at start), so
a session that was sent untrusted text cannot claim to be trusted.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from datetime import datetime
from functools import partial
from typing import Protocol, assert_never

import msgspec
import trio

import proto
from proto import (
    ApprovalPending,
    AuditRecordV3,
    Label,
    Message,
    PendingApproval,
    Surface,
    ToolResponse,
    utc_now,
    utc_stamp,
)

from ._approvals import (
    Disconnected,
    OwnerApproves,
    OwnerDenies,
    PendingApprovals,
    ShutDown,
    TimedOut,
    why_not_run,
)
from ._arguments import ArgumentsRefused, check_tool_name, parse_arguments
from ._audit import AUDIT_UNWRITABLE, Audit
from ._grants import Grant, GrantSet
from ._outcomes import (
    Denied,
    Outcome,
    Policy,
    Ran,
    Refused,
    Run,
    Unapproved,
    Unrecorded,
    answer,
    audit_record,
)
from ._owner import check_undoes
from ._runtimes import (
    Approved,
    Auto,
    OwnEdit,
    RunOutput,
    RunRequest,
    Runtime,
    run_call,
)

__all__ = ["INTERRUPTED", "Decider", "LoopdConnection"]

log = logging.getLogger("brokerd.decide")

_CLEANUP_S = 5.0

CHANGED_BY_OWNER = "the owner approved this call with changes; what ran: {arguments}\n"
"""Put before the tool's answer when the owner approved their own version of the call."""

OWNER_TAINT = Label()
"""The taint an owner's own edit is decided under: its text is the owner's, not a model's."""

INTERRUPTED = "brokerd stopped before {tool} finished; it may have run in part"
"""The outcome recorded for a call cut off by brokerd's shutdown (no answer went out)."""


class LoopdConnection(Protocol):
    """The loopd connection a request came on (`proto.Connection`), as deciding uses it.

    Not `proto.Peer`, which is who is at the other end (a pid and a uid).
    """

    async def send(self, message: Message) -> None:
        """Send a frame ahead of the reply."""
        ...

    async def wait_peer_gone(self) -> None:
        """Return once loopd has closed its end."""
        ...


class Decider:
    """Decides, runs and audits tool calls."""

    def __init__(
        self, grants: GrantSet, approvals: PendingApprovals, audit: Audit, runtime: Runtime
    ) -> None:
        self.grants = grants
        self.approvals = approvals
        self.audit = audit
        self.runtime = runtime
        self.returned: dict[str, Label] = dict(audit.returned)
        """Per session, the labels of everything brokerd returned to it, joined."""

    def taint(self, request: proto.ToolRequest) -> Label:
        """The session's taint: the stricter of loopd's word and what brokerd returned to it."""
        own = self.returned.get(request.session)
        if own is None:
            return request.taint
        taint = request.taint.join(own)
        if taint != request.taint:
            log.warning(
                "session %s claims taint %s, but brokerd returned %s to it; deciding call %s "
                "under %s",
                request.session,
                request.taint.describe(),
                own.describe(),
                request.call.id,
                taint.describe(),
            )
        return taint

    async def answer_call(self, request: proto.ToolRequest, loopd: LoopdConnection) -> ToolResponse:
        """Decide one call from loopd, run it if it may run, audit it, and answer it."""
        taint = self.taint(request)
        decided = await self._run_or_not(request, taint, loopd)
        if isinstance(decided, Run):
            decided = await self._run(request, taint, decided)
        return await self._finish(request, taint, decided)

    async def _run_or_not(
        self, request: proto.ToolRequest, taint: Label, loopd: LoopdConnection
    ) -> Outcome | Run:
        """Whether the call runs (and under which grant), or what became of it instead."""
        tool = request.call.name
        try:
            check_tool_name(tool)
            arguments = parse_arguments(tool, request.call.arguments)
        except ArgumentsRefused as exc:
            return Refused(arguments=request.call.arguments, why=str(exc))
        canonical = arguments.canonical
        candidates = self.grants.find(tool)
        if not candidates:
            return Denied(arguments=canonical, why=f"no grant for {tool}", by=Policy())
        call = RunRequest(
            session=request.session,
            call_id=request.call.id,
            tool=tool,
            arguments=arguments,
            taint=taint,
            by=Auto(),
        )
        grant = candidates[0]
        if len(candidates) > 1:
            chosen = await self._choose(call, candidates)
            if not isinstance(chosen, Grant):
                return chosen
            grant = chosen
        if taint.class_.rank > grant.max_taint.rank:
            return Denied(
                arguments=canonical,
                why=f"this session has seen {taint.class_} content; the grant "
                f"{grant.name} allows {tool} only up to {grant.max_taint}",
                by=Policy(),
                grant=grant,
            )
        if grant.mode == "deny":
            why = f"the grant {grant.name} denies {tool}"
            return Denied(arguments=canonical, why=why, by=Policy(), grant=grant)
        refusal = await self.runtime.check(call, grant)
        if refusal is not None:
            return _refusal(canonical, refusal, grant)
        if grant.mode == "auto":
            return Run(call, grant)
        return await self._ask(call, grant, loopd)

    async def _choose(
        self, call: RunRequest, candidates: tuple[Grant, ...]
    ) -> Grant | Refused | Denied:
        """The one grant, of several for a tool, whose paths or hosts admit the call."""
        admitted: list[Grant] = []
        refusals: list[RunOutput] = []
        for grant in candidates:
            refusal = await self.runtime.check(call, grant)
            if refusal is None:
                admitted.append(grant)
            else:
                refusals.append(refusal)
        if len(admitted) == 1:
            return admitted[0]
        canonical = call.arguments.canonical
        if admitted:
            names = " and ".join(grant.name for grant in admitted)
            overlap = (
                f"the grants {names} all admit this {call.tool} call; make their paths or "
                "hosts disjoint (runbook: grants-invalid)"
            )
            return Denied(arguments=canonical, why=overlap, by=Policy())
        errors = [r for r in refusals if r.status != "denied"]
        if errors:  # about the call itself (a relative path, not a URL): the same for all
            return _refusal(canonical, errors[0], None)
        outside = "; ".join(r.content for r in refusals)
        return Denied(arguments=canonical, why=outside, by=Policy())

    async def _ask(self, call: RunRequest, grant: Grant, loopd: LoopdConnection) -> Denied | Run:
        canonical = call.arguments.canonical
        pending = PendingApproval(
            id=self.approvals.new_id(),
            session=call.session,
            call_id=call.call_id,
            tool=call.tool,
            arguments=canonical,  # raw: each client renders it for its owner's screen
            taint=call.taint,
            time=utc_stamp(),
        )
        settled = await self.approvals.wait_settled(
            pending,
            announce=partial(loopd.send, ApprovalPending(approval=pending)),
            peer_gone=loopd.wait_peer_gone,
        )
        match settled:
            case OwnerApproves(surface=surface, version=version, note=note):
                proposed = None
                if version is not None and version.canonical != canonical:
                    proposed = canonical
                    call = dataclasses.replace(call, arguments=version)
                by = Approved(approval=pending.id, surface=surface, note=note, proposed=proposed)
                return Run(dataclasses.replace(call, by=by), grant)
            case OwnerDenies() | TimedOut() | Disconnected() | ShutDown():
                return Denied(
                    arguments=canonical,
                    why=why_not_run(settled),
                    by=Unapproved(pending.id, settled),
                    grant=grant,
                )
            case _:
                assert_never(settled)

    async def owner_edit(self, request: proto.MemoryEdit, surface: Surface) -> ToolResponse:
        """The owner's own memory edit: decided `owner`, audited, run like an approved call.

        Its call id is minted here (`owner-…`), and so are an approval id and (by the
        runtime) its token, so memoryd's checks apply unchanged. A refusal is a
        `tool_response` with status `error`, like the model's, so the client shows it.
        """
        session = request.session or proto.OWNER_SESSION
        call_id = "owner-" + secrets.token_hex(8)
        as_call = proto.ToolRequest(
            session=session,
            call=proto.ToolCall(id=call_id, name="memory", arguments=request.arguments),
            taint=OWNER_TAINT,
        )
        try:
            check_undoes(request.undoes)
            arguments = parse_arguments("memory", request.arguments)
        except ArgumentsRefused as exc:
            refused = Refused(arguments=request.arguments, why=str(exc), surface=surface)
            return await self._finish(as_call, OWNER_TAINT, refused)
        grant = self.grants.find("memory")[0]  # built in: always there
        by = OwnEdit(approval=self.approvals.new_id(), surface=surface, undoes=request.undoes)
        call = RunRequest(
            session=session,
            call_id=call_id,
            tool="memory",
            arguments=arguments,
            taint=OWNER_TAINT,
            by=by,
        )
        ran = await self._run(as_call, OWNER_TAINT, Run(call, grant))
        return await self._finish(as_call, OWNER_TAINT, ran)

    async def _run(self, request: proto.ToolRequest, taint: Label, run: Run) -> Ran | Unrecorded:
        """Record the decision durably, then run the call; refuse it if it cannot be recorded."""
        call = run.request
        now = utc_now()
        started = audit_record(run, request, taint, now)
        assert started is not None
        try:
            await self.audit.append(started, now)
        except OSError as exc:
            log.error(
                "%s call %s in session %s refused: its audit record cannot be written: %s "
                "(runbook: %s)",
                call.tool,
                call.call_id,
                call.session,
                exc,
                AUDIT_UNWRITABLE,
            )
            return Unrecorded(run, str(exc.strerror or exc))
        finished = False
        try:
            output = await run_call(self.runtime, call, run.grant)
            finished = True
        finally:
            if not finished:  # cancelled: shutdown cut it off, and no answer goes out
                now = utc_now()
                interrupted = msgspec.structs.replace(
                    started,
                    time=utc_stamp(now),
                    label=Label(),
                    status="error",
                    reason=INTERRUPTED.format(tool=call.tool),
                )
                with trio.move_on_after(_CLEANUP_S, shield=True):
                    await self._append(interrupted, now)
        match call.by:
            case Approved(proposed=str()):
                changed = CHANGED_BY_OWNER.format(arguments=call.arguments.canonical)
                output = dataclasses.replace(output, content=changed + output.content)
            case Approved() | Auto() | OwnEdit():
                pass
            case _:
                assert_never(call.by)
        return Ran(run, output)

    async def _append(self, record: AuditRecordV3, now: datetime) -> None:
        """Append an outcome record; a failure is logged (the call's answer still goes out).

        Its fsync and head follow the answer (`Audit.append`'s `durable`): nothing runs
        under an outcome, and a crash that loses one leaves the call's `started` record
        without it, which counts as the worst label.
        """
        try:
            await self.audit.append(record, now, durable=False)
        except OSError as exc:
            log.error(
                "the audit record of the outcome of call %s could not be written: %s (runbook: %s)",
                record.call,
                exc,
                AUDIT_UNWRITABLE,
            )

    async def _finish(
        self, request: proto.ToolRequest, taint: Label, outcome: Outcome
    ) -> ToolResponse:
        """Audit the outcome, count its label against the session, and answer it."""
        outcome = _fitted(outcome, request)
        status, content, label = answer(outcome)
        response = ToolResponse(
            call_id=request.call.id, status=status, content=content, label=label
        )
        now = utc_now()
        record = audit_record(outcome, request, taint, now)
        if record is not None:
            await self._append(record, now)
        seen = self.returned.get(request.session)
        self.returned[request.session] = label if seen is None else seen.join(label)
        log.info(
            "%s %r call %r in session %s: %s",
            "refused" if record is None else record.decision,
            request.call.name,
            request.call.id,
            request.session,
            status,
        )
        return response


def _refusal(canonical: str, refusal: RunOutput, grant: Grant | None) -> Refused | Denied:
    """A runtime's refusal of a call before it runs: denied (outside a grant), or refused."""
    if refusal.status == "denied":
        return Denied(arguments=canonical, why=refusal.content, by=Policy(), grant=grant)
    return Refused(arguments=canonical, why=refusal.content, grant=grant)


def _fitted(outcome: Outcome, request: proto.ToolRequest) -> Outcome:
    """`outcome`, its text replaced by a sentence saying so if its answer would not fit a frame.

    A result can be that large; a refusal or denial only with an extreme text in it (an
    owner's reason of a megabyte): it stays a denial.
    """
    status, content, label = answer(outcome)
    try:
        proto.encode_frame(
            ToolResponse(call_id=request.call.id, status=status, content=content, label=label)
        )
    except proto.FrameTooLarge as exc:
        too_large = f"the result of {request.call.name} is too large to pass on ({exc})"
    else:
        return outcome
    match outcome:
        case Ran(output=output):
            return Ran(outcome.run, dataclasses.replace(output, status="error", content=too_large))
        case Refused() | Denied():
            return dataclasses.replace(outcome, why=too_large)
        case Unrecorded():
            return outcome
        case _:
            assert_never(outcome)
