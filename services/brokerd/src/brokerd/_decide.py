"""Deciding a `tool_request` from loopd (ARCHITECTURE §5, spec §8).

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
from typing import Protocol

import msgspec
import trio

import proto
from proto import (
    ApprovalPending,
    AuditRecord,
    AuditStatus,
    Decision,
    Label,
    Message,
    PendingApproval,
    Status,
    Surface,
    ToolResponse,
    utc_now,
    utc_stamp,
)

from ._approvals import Approvals
from ._arguments import ArgumentsRefused, check_tool_name, parse_arguments
from ._audit import AUDIT_UNWRITABLE, Audit
from ._grants import Grant, GrantSet
from ._owner import check_undoes
from ._runtimes import Call, RunOutput, Runtime, run_call

__all__ = ["AUDIT_UNWRITABLE_SENTENCE", "INTERRUPTED", "Decider", "LoopdConnection"]

log = logging.getLogger("brokerd.decide")

_MAX_REASON_CHARS = 1000
_CLEANUP_S = 5.0

AUDIT_UNWRITABLE_SENTENCE = (
    "the audit log cannot be written ({error}), so {tool} did not run; try again later "
    f"(runbook: {AUDIT_UNWRITABLE})"
)
"""Fixed apart from the error and the tool: a call whose decision could not be recorded."""

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Decided:
    """Everything the audit record and the reply need."""

    arguments: str
    grant: Grant | None
    decision: Decision
    status: Status
    content: str
    label: Label = dataclasses.field(default_factory=Label)
    approval: str | None = None
    reason: str | None = None
    unrecorded: bool = False
    """True for the refusal of a call whose record could not be written: none is tried."""
    surface: Surface | None = None
    """Where the owner decided, when they did."""
    proposed: str | None = None
    """The model's arguments, when what ran is the owner's version."""


@dataclasses.dataclass(frozen=True)
class _Run:
    """A call decided to run: unasked (`auto`) or `approved` by the owner."""

    call: Call
    grant: Grant
    decision: Decision
    approval: str | None = None
    reason: str | None = None
    surface: Surface | None = None
    proposed: str | None = None


class Decider:
    """Decides, runs and audits tool calls."""

    def __init__(
        self, grants: GrantSet, approvals: Approvals, audit: Audit, runtime: Runtime
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

    async def decide(self, request: proto.ToolRequest, loopd: LoopdConnection) -> ToolResponse:
        """Decide one call and answer it; `request.approval` from loopd is ignored."""
        taint = self.taint(request)
        decided = await self._decide(request, taint, loopd)
        if isinstance(decided, _Run):
            decided = await self._run(request, taint, decided)
        return await self._finish(request, taint, decided)

    async def _decide(
        self, request: proto.ToolRequest, taint: Label, loopd: LoopdConnection
    ) -> _Decided | _Run:
        tool = request.call.name
        try:
            check_tool_name(tool)
            arguments = parse_arguments(tool, request.call.arguments)
        except ArgumentsRefused as exc:
            return _Decided(
                arguments=request.call.arguments,
                grant=None,
                decision="refused",
                status="error",
                content=str(exc),
            )
        canonical = arguments.canonical
        candidates = self.grants.find(tool)
        if not candidates:
            return _Decided(
                arguments=canonical,
                grant=None,
                decision="denied",
                status="denied",
                content=f"no grant for {tool}",
            )
        call = Call(
            session=request.session,
            call_id=request.call.id,
            tool=tool,
            arguments=arguments,
            taint=taint,
        )
        grant = candidates[0]
        if len(candidates) > 1:
            chosen = await self._choose(call, candidates)
            if isinstance(chosen, _Decided):
                return chosen
            grant = chosen
        if taint.class_.rank > grant.max_taint.rank:
            return _Decided(
                arguments=canonical,
                grant=grant,
                decision="denied",
                status="denied",
                content=f"this session has seen {taint.class_} content; the grant "
                f"{grant.name} allows {tool} only up to {grant.max_taint}",
            )
        if grant.mode == "deny":
            return _Decided(
                arguments=canonical,
                grant=grant,
                decision="denied",
                status="denied",
                content=f"the grant {grant.name} denies {tool}",
            )
        refusal = await self.runtime.check(call, grant)
        if refusal is not None:
            decision: Decision = "denied" if refusal.status == "denied" else "refused"
            return _Decided(
                arguments=canonical,
                grant=grant,
                decision=decision,
                status=refusal.status,
                content=refusal.content,
            )
        if grant.mode == "auto":
            return _Run(call, grant, "auto")
        return await self._ask(call, grant, loopd)

    async def _choose(self, call: Call, candidates: tuple[Grant, ...]) -> Grant | _Decided:
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
            return _Decided(
                arguments=canonical, grant=None, decision="denied", status="denied", content=overlap
            )
        errors = [r for r in refusals if r.status != "denied"]
        if errors:  # about the call itself (a relative path, not a URL): the same for all
            return _Decided(
                arguments=canonical,
                grant=None,
                decision="refused",
                status=errors[0].status,
                content=errors[0].content,
            )
        outside = "; ".join(r.content for r in refusals)
        return _Decided(
            arguments=canonical, grant=None, decision="denied", status="denied", content=outside
        )

    async def _ask(self, call: Call, grant: Grant, loopd: LoopdConnection) -> _Decided | _Run:
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
        outcome = await self.approvals.wait(
            pending,
            announce=partial(loopd.send, ApprovalPending(approval=pending)),
            peer_gone=loopd.wait_peer_gone,
        )
        if not outcome.approved:
            return _Decided(
                arguments=canonical,
                grant=grant,
                decision="denied",
                status="denied",
                content=outcome.sentence,
                approval=pending.id,
                surface=outcome.surface,
            )
        said = f"approved by the owner: {outcome.sentence}" if outcome.sentence else None
        proposed = None
        if outcome.arguments is not None and outcome.arguments.canonical != canonical:
            proposed = canonical
            call = dataclasses.replace(call, arguments=outcome.arguments)
        if call.tool == "memory" and outcome.surface is not None:
            decided = proto.OwnerApproved(surface=outcome.surface, proposed=proposed)
            call = dataclasses.replace(call, decided=decided)
        return _Run(
            call,
            grant,
            "approved",
            approval=pending.id,
            reason=said,
            surface=outcome.surface,
            proposed=proposed,
        )

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
            refused = _Decided(
                arguments=request.arguments,
                grant=None,
                decision="refused",
                status="error",
                content=str(exc),
                surface=surface,
            )
            return await self._finish(as_call, OWNER_TAINT, refused)
        grant = self.grants.find("memory")[0]  # built in: always there
        call = Call(
            session=session,
            call_id=call_id,
            tool="memory",
            arguments=arguments,
            taint=OWNER_TAINT,
            decided=proto.OwnerEdit(surface=surface, undoes=request.undoes),
        )
        run = _Run(call, grant, "owner", approval=self.approvals.new_id(), surface=surface)
        return await self._finish(as_call, OWNER_TAINT, await self._run(as_call, OWNER_TAINT, run))

    async def _run(self, request: proto.ToolRequest, taint: Label, run: _Run) -> _Decided:
        """Record the decision durably, then run the call; refuse it if it cannot be recorded."""
        canonical = run.call.arguments.canonical
        now = utc_now()
        started = self._record(
            request,
            taint,
            now,
            arguments=canonical,
            grant=run.grant,
            decision=run.decision,
            approval=run.approval,
            label=run.grant.label,
            status="started",
            reason=run.reason,
            surface=run.surface,
            proposed=run.proposed,
        )
        try:
            await self.audit.append(started, now)
        except OSError as exc:
            log.error(
                "%s call %s in session %s refused: its audit record cannot be written: %s "
                "(runbook: %s)",
                run.call.tool,
                run.call.call_id,
                run.call.session,
                exc,
                AUDIT_UNWRITABLE,
            )
            refusal = AUDIT_UNWRITABLE_SENTENCE.format(
                error=exc.strerror or exc, tool=run.call.tool
            )
            return _Decided(
                arguments=canonical,
                grant=run.grant,
                decision="refused",
                status="error",
                content=refusal,
                approval=run.approval,
                unrecorded=True,
                surface=run.surface,
                proposed=run.proposed,
            )
        finished = False
        try:
            output = await run_call(self.runtime, run.call, run.grant, run.approval)
            finished = True
        finally:
            if not finished:  # cancelled: shutdown cut it off, and no answer goes out
                now = utc_now()
                interrupted = msgspec.structs.replace(
                    started,
                    time=utc_stamp(now),
                    label=Label(),
                    status="error",
                    reason=INTERRUPTED.format(tool=run.call.tool),
                )
                with trio.move_on_after(_CLEANUP_S, shield=True):
                    await self._append(interrupted, now)
        if run.proposed is not None:
            output = dataclasses.replace(
                output, content=CHANGED_BY_OWNER.format(arguments=canonical) + output.content
            )
        return _ran(canonical, run, output)

    def _record(
        self,
        request: proto.ToolRequest,
        taint: Label,
        now: datetime,
        *,
        arguments: str,
        grant: Grant | None,
        decision: Decision,
        approval: str | None,
        label: Label,
        status: AuditStatus,
        reason: str | None,
        surface: Surface | None = None,
        proposed: str | None = None,
    ) -> AuditRecord:
        return AuditRecord(
            time=utc_stamp(now),
            session=request.session,
            call=request.call.id,
            tool=request.call.name,
            arguments=arguments,
            grant=grant.name if grant else None,
            grant_sha256=grant.grant_sha256 if grant else None,
            decision=decision,
            approval=approval,
            label=label,
            status=status,
            reason=reason,
            taint=taint,
            surface=msgspec.UNSET if surface is None else surface,
            proposed=msgspec.UNSET if proposed is None else proposed,
        )

    async def _append(self, record: AuditRecord, now: datetime) -> None:
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
        self, request: proto.ToolRequest, taint: Label, decided: _Decided
    ) -> ToolResponse:
        response = ToolResponse(
            call_id=request.call.id,
            status=decided.status,
            content=decided.content,
            label=decided.label,
        )
        try:
            proto.encode_frame(response)
        except proto.FrameTooLarge as exc:
            too_large = f"the result of {request.call.name} is too large to pass on ({exc})"
            decided = dataclasses.replace(decided, status="error", content=too_large)
            response = ToolResponse(
                call_id=request.call.id, status="error", content=too_large, label=decided.label
            )
        reason = decided.reason
        if reason is None and decided.status != "ok":
            reason = decided.content[:_MAX_REASON_CHARS]
        if not decided.unrecorded:
            now = utc_now()
            await self._append(
                self._record(
                    request,
                    taint,
                    now,
                    arguments=decided.arguments,
                    grant=decided.grant,
                    decision=decided.decision,
                    approval=decided.approval,
                    label=decided.label,
                    status=decided.status,
                    reason=reason,
                    surface=decided.surface,
                    proposed=decided.proposed,
                ),
                now,
            )
        seen = self.returned.get(request.session)
        self.returned[request.session] = (
            response.label if seen is None else seen.join(response.label)
        )
        log.info(
            "%s %r call %r in session %s: %s",
            decided.decision,
            request.call.name,
            request.call.id,
            request.session,
            decided.status,
        )
        return response


def _ran(canonical: str, run: _Run, output: RunOutput) -> _Decided:
    assert output.label is not None  # run_call always labels
    return _Decided(
        arguments=canonical,
        grant=run.grant,
        decision=run.decision,
        status=output.status,
        content=output.content,
        label=output.label,
        approval=run.approval,
        reason=run.reason,
        surface=run.surface,
        proposed=run.proposed,
    )
