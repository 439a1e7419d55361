"""brokerd's socket on loopd: look, prepare, apply and abort loopd's part of a forget.

Each session is changed under its turn lock, so no turn reads it half-forgotten or
appends to a file being replaced, and loopd's kept copy of it is dropped there: the next
turn reads the files again and never sends the text. A session whose turn is running
(waiting for the owner's approval, say) is waited for, a bounded time; then brokerd is
told which session is busy and asks again later, with the plan committed meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import assert_never

import msgspec
import trio

import proto
from proto import (
    Connection,
    ForgetAbort,
    ForgetApplied,
    ForgetApply,
    ForgetLook,
    ForgetLooked,
    ForgetPlan,
    ForgetPrepare,
    ForgetPrepared,
    Message,
    ServiceError,
)

from ._forget import (
    PLAN_DIR,
    FileEdit,
    applied_sessions,
    apply_session,
    changed_since,
    find,
    holdings,
    leftovers,
    plan_session,
    plan_sessions,
    session_of,
)
from ._sessions import SessionStore
from ._turn import notify_memoryd

__all__ = ["Forgetter", "SessionBusy"]

log = logging.getLogger("loopd.forget")

MTIME_SLACK_NS = 2_000_000_000
"""Files changed this long before a plan was written are looked at again: a file system's
clock granularity, and a turn that wrote while the plan was being made."""


class SessionBusy(Exception):
    """A session's turn held its lock longer than a forget may wait."""

    def __init__(self, session: str) -> None:
        super().__init__(session)
        self.session = session


HoldSession = Callable[[str], AbstractAsyncContextManager[None]]
"""Holds a session's turn lock for the block, or raises `SessionBusy`."""


def _needle(text: str) -> str:
    if problem := proto.forget_problem(text):
        raise ServiceError("forget-refused", problem)
    # Stripped: every copy of the text as given holds the stripped text.
    return text.strip()


def _with_session(plan: ForgetPlan, session: str, edits: list[FileEdit]) -> ForgetPlan:
    """`plan` with one session's edits replaced by `edits`."""
    kept = [edit for edit in plan.edits if session_of(edit) != session]
    every = kept + edits
    return msgspec.structs.replace(plan, edits=every, counts=find(every).counts)


@dataclasses.dataclass
class Forgetter:
    """loopd's forget: the four requests of the broker-loop socket."""

    store: SessionStore
    memory_socket: Path
    hold: HoldSession
    writing: trio.Lock = dataclasses.field(default_factory=trio.Lock)
    """Held by each apply, and by each new session's first write: a session begun before
    a forget is never written while it applies, nor after it with the text."""
    applied: int = 0
    """How many applies have begun: a session begun at an older count has its baseline
    (a copy of memory) made again before it is written."""

    @property
    def root(self) -> Path:
        """sessions/."""
        return self.store.root

    @property
    def plans(self) -> Path:
        """sessions/.forget/."""
        return self.store.root / PLAN_DIR

    async def handle(self, request: proto.BrokerLoopRequest, conn: Connection) -> Message:
        """forget_look, forget_prepare, forget_apply, forget_abort."""
        match request:
            case ForgetLook():
                needle = _needle(request.text)
                edits = await trio.to_thread.run_sync(plan_sessions, self.root, needle)
                found = await trio.to_thread.run_sync(holdings, self.root, find(edits))
                return ForgetLooked(holdings=found)
            case ForgetPrepare():
                needle = _needle(request.text)
                await self._read_plan(request.plan)  # refuses a bad id before any work
                edits = await trio.to_thread.run_sync(plan_sessions, self.root, needle)
                counted = find(edits)
                plan = ForgetPlan(plan=request.plan, edits=edits, counts=counted.counts)
                await trio.to_thread.run_sync(proto.write_plan, self.plans, plan)
                found = await trio.to_thread.run_sync(holdings, self.root, counted)
                return ForgetPrepared(plan=request.plan, holdings=found)
            case ForgetApply():
                return await self.apply(request)
            case ForgetAbort():
                stored = await self._read_plan(request.plan)
                if stored is not None and not stored.committed:
                    await trio.to_thread.run_sync(proto.remove_plan, self.plans, request.plan)
                return proto.Ok()
            case _:
                assert_never(request)

    def _made_ns(self, plan: str) -> int | None:
        """When the plan `plan` was written (its file's mtime), or None without one."""
        try:
            return (self.plans / f"{plan}.json").stat().st_mtime_ns
        except (FileNotFoundError, ValueError):
            return None

    async def _read_plan(self, plan: str) -> ForgetPlan | None:
        try:
            return await trio.to_thread.run_sync(proto.read_plan, self.plans, plan)
        except (ValueError, msgspec.DecodeError) as exc:
            raise ServiceError("bad-plan", f"cannot use forget plan {plan!r}: {exc}") from None

    async def apply(self, request: ForgetApply) -> Message:
        """Commit the plan, apply it session by session under each turn lock, verify, delete.

        With the text, the plan is made again from the files as they are (a turn may
        have written a copy since the plan was prepared), and each session once more
        under its lock; without it (brokerd retrying after a crash) the stored plan is
        finished as it is.
        """
        async with self.writing:
            self.applied += 1
            return await self._apply(request)

    async def _apply(self, request: ForgetApply) -> Message:
        stored = await self._read_plan(request.plan)
        made_ns = await trio.to_thread.run_sync(self._made_ns, request.plan)
        needle = None if request.text is None else _needle(request.text)
        looked_at: set[str] | None = None  # every session
        if needle is not None:
            if stored is not None and made_ns is not None:
                # Only what changed since the plan was made can hold a copy it missed.
                looked_at = await trio.to_thread.run_sync(
                    changed_since, self.root, made_ns - MTIME_SLACK_NS
                )
                looked_at |= {session_of(edit) for edit in stored.edits}
            edits = await trio.to_thread.run_sync(plan_sessions, self.root, needle, looked_at)
            plan = ForgetPlan(
                plan=request.plan, committed=True, edits=edits, counts=find(edits).counts
            )
        elif stored is None:
            return ForgetApplied(plan=request.plan)  # finished before
        else:
            plan = msgspec.structs.replace(stored, committed=True)
        await trio.to_thread.run_sync(proto.write_plan, self.plans, plan)
        conflicts: list[str] = []
        busy: list[str] = []
        for session, edits in applied_sessions(plan.edits).items():
            try:
                async with self.hold(session):
                    if needle is not None:
                        fresh = await trio.to_thread.run_sync(
                            plan_session, self.root, session, needle
                        )
                        if fresh != edits:
                            plan = _with_session(plan, session, fresh)
                            await trio.to_thread.run_sync(proto.write_plan, self.plans, plan)
                            edits = fresh
                    conflicts += await trio.to_thread.run_sync(apply_session, self.root, edits)
                    self.store.drop(session)
            except SessionBusy:
                busy.append(session)
                continue
            await notify_memoryd(self.memory_socket, session)
        if busy:
            log.info("forget %s waits for the turns of %s", request.plan, ", ".join(busy))
            raise ServiceError(
                "session-busy",
                f"session {busy[0]} has a turn running"
                + (f" (and {len(busy) - 1} more)" if len(busy) > 1 else "")
                + f"; forget {request.plan} is decided and finishes there when asked again",
                runbook="forget",
            )
        if needle is not None:
            conflicts += await trio.to_thread.run_sync(leftovers, self.root, needle, looked_at)
        await trio.to_thread.run_sync(proto.remove_plan, self.plans, request.plan)
        found = await trio.to_thread.run_sync(holdings, self.root, find(plan.edits))
        for conflict in conflicts:
            log.warning("forget %s: %s", request.plan, conflict)
        return ForgetApplied(plan=request.plan, holdings=found, conflicts=conflicts)
