"""brokerd's two sockets and what each request does.

loop-broker (loopd): `tool_request` → (`approval_pending`) → `tool_response`.
owner-broker (bxctl, mattermostd): `approvals_list`, `approval_decide`, `approval_revise`,
`memory_edit`, `grants_list`, `audit_verify`, `forget_preview`, `forget` (`_forget`).
Approvals and forgets are reachable from the owner's socket only: no tool call of the model
can forget, or decide anything.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import assert_never

import trio

import proto
from proto import (
    ApprovalDecide,
    ApprovalRevise,
    ApprovalRevised,
    Approvals,
    ApprovalsList,
    Approve,
    AuditVerified,
    AuditVerify,
    CallState,
    Connection,
    Deny,
    Forget,
    ForgetPreview,
    Grants,
    GrantsList,
    MemoryEdit,
    Message,
    Ok,
    ServiceError,
    ToolRequest,
)

from . import _approvals
from ._audit import AUDIT_TAMPERED, Audit
from ._audit_forget import AuditLogForget
from ._config import Settings
from ._decide import Decider
from ._forget import ForgetCoordinator, LocalPart, RolePart, Tell
from ._grants import GrantSet, load_grants
from ._local_tools import LocalLimits, LocalRuntime
from ._owner import BadSurface, RevisionRefused, revise, surface_of
from ._runtimes import CompositeRuntime, MemoryRuntime, RefusingRuntime, Runtime

__all__ = ["GRANTS_INVALID", "Brokerd", "configured_runtime"]

log = logging.getLogger("brokerd")

_OWNER_REFUSALS = (
    _approvals.UnknownApproval,
    _approvals.AlreadyDecided,
    RevisionRefused,
    BadSurface,
)

MIN_FORGET_CALL_S = 120.0
"""The least a forget's call to memoryd may take: `[memory] call_timeout_s` is set for a
recall or an edit, and a forget rewrites every store that holds the text (the bench's
1M-record home takes up to a minute)."""

GRANTS_INVALID = "grants-invalid"
"""The runbook entry for grant files that failed to load."""


def configured_runtime(
    settings: Settings, approval_key: bytes, limits: LocalLimits | None = None
) -> Runtime:
    """The composite runtime: memoryd for recall and memory, `[runtime] kind` for the rest."""
    other: Runtime = LocalRuntime(limits) if settings.runtime == "local" else RefusingRuntime()
    memory = MemoryRuntime(
        settings.memory_socket,
        call_timeout_s=settings.memory_call_timeout_s,
        approval_key=approval_key,
    )
    return CompositeRuntime(memory, other)


class Brokerd:
    """The role: owns grants/, audit/ and the pending approvals; serves loopd and the owner.

    `prepare` does the blocking work of a start (keys, audit log, grants); the handlers
    serve only after it.
    """

    decider: Decider

    def __init__(self, settings: Settings, runtime: Runtime | None = None) -> None:
        self.settings = settings
        self.audit = Audit(settings.audit_dir, settings.audit_key)
        self.approvals = _approvals.PendingApprovals(settings.approval_timeout_s)
        self.grants = GrantSet(by_tool={})
        self._runtime = runtime
        self.audit_part = proto.ForgetPart(AuditLogForget(self.audit))
        self.forgets = ForgetCoordinator(
            settings.audit_dir / proto.PLAN_DIR,
            self.audit,
            self.approvals,
            [
                RolePart(
                    "memoryd",
                    settings.memory_socket,
                    call_timeout_s=max(settings.memory_call_timeout_s, MIN_FORGET_CALL_S),
                ),
                RolePart(
                    "loopd", settings.loopd_socket, call_timeout_s=settings.loopd_call_timeout_s
                ),
                LocalPart(self.audit_part),
            ],
        )

    def prepare(self) -> None:
        """Create the keys, check the audit log, load the grants and forget ledgers; blocking.

        Raises:
            proto.StartFailed: a key cannot be used.
            OSError: a key, the audit directory or its head cannot be created or read.
        """
        try:
            approval_key = proto.ensure_key(self.settings.approval_key, shared=True)
            self.audit.open()
        except proto.KeyUnusable as exc:
            raise proto.StartFailed(str(exc)) from None
        self.forgets.load()
        self.grants = load_grants(self.settings.grants_dir)
        runtime = self._runtime or configured_runtime(self.settings, approval_key)
        self.decider = Decider(self.grants, self.approvals, self.audit, runtime)
        for problem in self.grants.problems:
            log.warning(
                "grant %s not loaded: %s (runbook: %s)",
                problem.file,
                problem.message,
                GRANTS_INVALID,
            )

    async def start(self, work: trio.Nursery, shutdown: trio.Event) -> str:
        """Serve both sockets in `work` until `shutdown`; return a status line."""
        s = self.settings
        serve = partial(proto.serve_unix, shutdown=shutdown, read_timeout_s=s.read_timeout_s)
        await self.audit_part.recover()  # the audit's part of a decided forget, before any append
        self.forgets.finish_in(work, shutdown)  # forgets an earlier run left are finished first
        await work.start(partial(serve, proto.LOOP_BROKER, s.loop_socket, self.handle_loop))
        await work.start(partial(serve, proto.OWNER_BROKER, s.admin_socket, self.handle_owner))
        work.start_soon(self._withdraw_on_shutdown, shutdown)
        self.audit.flush_in(work)
        grants = len(self.grants.by_tool)
        problems = len(self.grants.problems)
        status = (
            f"serving {s.home}: {grants} grants, {problems} grant problems, runtime {s.runtime}"
        )
        if self.audit.broken is not None:
            status += f"; the audit log is broken (runbook: {AUDIT_TAMPERED})"
        return status

    async def _withdraw_on_shutdown(self, shutdown: trio.Event) -> None:
        await shutdown.wait()
        self.approvals.withdraw_all()

    async def handle_loop(self, request: proto.LoopBrokerRequest, conn: Connection) -> Message:
        """tool_request → approval_pending (for ask) → tool_response; call_state."""
        match request:
            case CallState():
                try:
                    return await self.audit.call_state(request.session, request.call)
                except OSError as exc:
                    raise ServiceError(
                        "audit-unreadable", f"the audit log cannot be read: {exc}"
                    ) from None
            case ToolRequest():
                return await self.decider.answer_call(request, conn)
            case _:
                assert_never(request)

    async def handle_owner(self, request: proto.OwnerBrokerRequest, conn: Connection) -> Message:
        """The owner's requests: approvals, edits, grants, the audit, and forgets."""
        match request:
            case ApprovalsList():
                pending = self.approvals.pending()
                if request.ids is not None:
                    wanted = set(request.ids)
                    pending = [approval for approval in pending if approval.id in wanted]
                shown, more = _approvals.page(pending)
                return Approvals(pending=shown, more=more)
            case ApprovalDecide():
                self._settle_by_owner(request, conn.peer_uid)
                return Ok()
            case ApprovalRevise():
                try:
                    revised = revise(self.approvals.get(request.id), request.arguments)
                except _OWNER_REFUSALS as exc:
                    raise ServiceError(exc.code, str(exc)) from None
                return ApprovalRevised(id=request.id, arguments=revised.canonical)
            case MemoryEdit():
                try:
                    surface = surface_of(request.surface, conn.peer_uid)
                except BadSurface as exc:
                    raise ServiceError(exc.code, str(exc)) from None
                return await self.decider.owner_edit(request, surface)
            case GrantsList():
                return Grants(grants=self.grants.infos(), problems=list(self.grants.problems))
            case AuditVerify():
                try:
                    verdict = await self.audit.verify()
                except OSError as exc:
                    raise ServiceError(
                        "audit-unreadable", f"the audit log cannot be read: {exc}"
                    ) from None
                return AuditVerified(
                    records=verdict.records,
                    ok=verdict.broken_at is None,
                    broken_at=verdict.broken_at,
                    forgets=verdict.forgets,
                )
            case ForgetPreview():
                return await self.forgets.preview(request.text, _teller(conn))
            case Forget():
                try:
                    surface = surface_of(request.surface, conn.peer_uid)
                except BadSurface as exc:
                    raise ServiceError(exc.code, str(exc)) from None
                return await self.forgets.forget(
                    request.text, surface, request.session, _teller(conn)
                )
            case _:
                assert_never(request)

    def _settle_by_owner(self, request: ApprovalDecide, peer_uid: int) -> None:
        """Settle an approval with the owner's verdict (in their version) and surface.

        No checkpoint between looking the approval up and settling it: the version checked
        is checked against the call that runs.
        """
        try:
            surface = surface_of(request.surface, peer_uid)
            pending = self.approvals.get(request.id)
            answer: _approvals.OwnerApproves | _approvals.OwnerDenies
            match request.verdict:
                case Approve(version=version, note=note):
                    mine = None if version is None else revise(pending, version)
                    answer = _approvals.OwnerApproves(surface=surface, version=mine, note=note)
                case Deny(reason=reason):
                    answer = _approvals.OwnerDenies(surface=surface, reason=reason)
                case _:
                    assert_never(request.verdict)
            self.approvals.settle_by_owner(request.id, answer)
        except _OWNER_REFUSALS as exc:
            raise ServiceError(exc.code, str(exc)) from None


def _teller(conn: Connection) -> Tell:
    """Tell the owner on `conn` how a forget goes, until they hang up (then tell nobody)."""
    gone = False

    async def tell(progress: proto.ForgetProgress) -> None:
        nonlocal gone
        if not gone:
            try:
                await conn.send(progress)
            except proto.PeerGone:
                gone = True

    return tell
