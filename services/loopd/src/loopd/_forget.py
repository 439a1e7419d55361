"""loopd's part of a forget: the text taken out of every session's log and baseline.

The part itself (prepare, apply, abort, recovery, and their answers) is `proto.ForgetPart`;
this module is loopd's `proto.ForgetStore`. A log line is redacted as its record kind says
(`proto.redact_line`): what was said (a message's content and reasoning, a tool call's
arguments, a tool result's content) becomes `proto.MARKER` where it holds the text, and
the record's type, time, ids, call ids, refs, tool names and label stay exactly, so the
session keeps its shape: its calls still pair with their results and its label is what
it was. A line that is not a record is redacted as text and stays a line. In a baseline
only the system text is redacted; the tool schemas are loopd's own. A baseline is
written once and replayed byte for byte: a forget is the one exception (the owner's
decision), since the model must never be sent the text again.

Each session is changed under its turn lock, so no turn reads it half-forgotten or
appends to a file being replaced, and loopd's kept copy of it is dropped there. With
the text in hand, each session is planned again under its lock: a turn that ended since
the plan was made is in it. The sessions looked at again are the plan's and those loopd
wrote since the plan was made (it writes every one of them, so it knows; after a restart
it does not, and looks at all). A session whose turn runs past `forget_wait_s` (one
waiting for the owner's approval) is left for brokerd to ask again, its plan committed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Collection
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import msgspec
import trio

import proto
from proto import ForgetLooked, Holding, LinesEdit, NoSteps, ServiceError, WholeEdit

from ._sessions import SessionStore

__all__ = ["SESSIONS", "SessionBusy", "SessionsForget", "plan_session", "plan_sessions"]

log = logging.getLogger("loopd.forget")

SESSIONS = "sessions"
BASELINES = "baselines"

_LOG_KINDS = (proto.SessionRecord,)
_BASELINE_KINDS = (proto.Baseline,)


class SessionBusy(Exception):
    """A session's turn held its lock longer than a forget may wait."""

    def __init__(self, session: str) -> None:
        super().__init__(session)
        self.session = session


HoldSession = Callable[[str], AbstractAsyncContextManager[None]]
"""Holds a session's turn lock for the block, or raises `SessionBusy`."""
Notify = Callable[[str, str], Awaitable[None]]
"""Tells memoryd a forget (session, plan id) rewrote a session's log (`session_updated`)."""


def _rewrite(root: Path, session: str, edits: list[proto.FileEdit]) -> list[str]:
    """Apply `edits` to `session`'s files, said first in the journal of changes (blocking)."""
    proto.note_change(root, session)
    return proto.apply_file_edits(root, edits)


def session_of(edit: proto.FileEdit) -> str:
    """The session an edit's path (`<id>/<file>`, relative to sessions/) belongs to."""
    return edit.path.split("/", 1)[0]


def _session_ids(root: Path) -> list[str]:
    """Every session directory's id, sorted; `.forget` and anything not a session left out."""
    if not root.is_dir():
        return []
    ids: list[str] = []
    for entry in os.scandir(root):
        try:
            proto.check_session_id(entry.name)
        except proto.BadSessionId:
            continue
        if entry.is_dir(follow_symlinks=False):
            ids.append(entry.name)
    return sorted(ids)


def plan_session(root: Path, session: str, needle: str) -> list[proto.FileEdit]:
    """The edits that take `needle` out of one session's log and baseline (blocking)."""
    directory = root / proto.check_session_id(session)
    edits: list[proto.FileEdit] = []
    try:
        data = (directory / proto.LOG_FILE).read_bytes()
    except FileNotFoundError:
        data = b""
    if proto.may_hold(data, needle):  # most logs of a large home: nothing to decode
        # Split as `apply_file_edits` splits: a final line without its newline is a line.
        lines = proto.line_edits(data.split(b"\n"), needle, _LOG_KINDS)
        if lines:
            edits.append(LinesEdit(path=f"{session}/{proto.LOG_FILE}", lines=lines))
    try:
        baseline = (directory / proto.BASELINE_FILE).read_bytes()
    except FileNotFoundError:
        return edits
    redacted = proto.redact_line(baseline, needle, _BASELINE_KINDS)
    if redacted is not None:
        edits.append(proto.whole_edit(f"{session}/{proto.BASELINE_FILE}", baseline, redacted))
    return edits


def plan_sessions(
    root: Path, needle: str, only: Collection[str] | None = None
) -> list[proto.FileEdit]:
    """The edits that take `needle` out of every session under `root` (or those `only`)."""
    sessions = _session_ids(root) if only is None else sorted(only)
    return [edit for session in sessions for edit in plan_session(root, session, needle)]


def _by_session(edits: list[proto.FileEdit]) -> dict[str, list[proto.FileEdit]]:
    by_session: dict[str, list[proto.FileEdit]] = {}
    for edit in edits:
        by_session.setdefault(session_of(edit), []).append(edit)
    return by_session


def _counts(edits: list[proto.FileEdit]) -> dict[str, int]:
    messages = sum(len(e.lines) for e in edits if isinstance(e, LinesEdit))
    return {SESSIONS: messages, BASELINES: sum(isinstance(e, WholeEdit) for e in edits)}


def _newest_first(root: Path, sessions: Collection[str]) -> list[str]:
    """Sessions by when they were made (their baseline's `created`), newest first, then by id.

    Not by the files' times: the forget's own rewrite changes those.
    """

    def created(session: str) -> str:
        try:
            return proto.read_baseline(root / session).created
        except (OSError, ValueError):
            return ""

    return sorted(sorted(sessions), key=created, reverse=True)


class SessionsForget:
    """sessions/ as a part of every forget (`proto.ForgetPart` drives it)."""

    name = "loopd"
    steps = NoSteps

    def __init__(self, store: SessionStore, hold: HoldSession, notify: Notify) -> None:
        self.store = store
        self.root = store.root
        self.hold = hold
        self.notify = notify
        """Tells memoryd of each session rewritten; the service sets what suits its state."""
        self.writing = trio.Lock()
        """Held by each request, and by each new session's first write: a session begun
        before a forget is never written while it applies, nor after it with the text."""
        self.applied = 0
        """How many applies have begun: a session begun at an older count has its baseline
        (a copy of memory) made again before it is written."""
        self._since: dict[str, int] = {}
        """Per plan made in this run, `SessionStore.writes` when it was made."""

    def held(self) -> AbstractAsyncContextManager[None]:
        """No new session is written meanwhile."""
        return self.writing

    async def look(self, text: str) -> ForgetLooked:
        """The sessions holding `text`, newest first; writes nothing."""

        def found() -> list[Holding]:
            edits = plan_sessions(self.root, text)
            plan = proto.ForgetPlan[NoSteps](plan="fg-look00", edits=edits)
            return [
                msgspec.structs.replace(h, names=_newest_first(self.root, h.names))
                for h in self.holdings(_counts(edits), plan)
            ]

        return ForgetLooked(holdings=await trio.to_thread.run_sync(found))

    async def plan(
        self, plan: str, text: str, stored: proto.ForgetPlan[NoSteps] | None
    ) -> proto.ForgetPlan[NoSteps]:
        """The plan over every session; planned before in this run, over those that may hold it."""
        only = self._looked_at(plan, stored)
        self._since.setdefault(plan, self.store.writes)
        edits = await trio.to_thread.run_sync(plan_sessions, self.root, text, only)
        if only is not None and stored is not None:  # the sessions not looked at again
            again = set(only)
            edits = [e for e in stored.edits if session_of(e) not in again] + edits
        return proto.ForgetPlan(plan=plan, edits=edits, counts=_counts(edits))

    def _looked_at(self, plan: str, stored: proto.ForgetPlan[NoSteps] | None) -> set[str] | None:
        """The sessions that may hold the text now: the plan's and those written since."""
        since = self._since.get(plan)
        if stored is None or since is None:
            return None  # planned in an earlier run: every session
        return {session_of(edit) for edit in stored.edits} | self.store.written_since(since)

    async def apply(
        self, plan: proto.ForgetPlan[NoSteps], text: str | None, keep: proto.Keep[NoSteps]
    ) -> list[str]:
        """Apply the plan session by session, each under its turn lock (planned again there)."""
        self.applied += 1
        conflicts: list[str] = []
        busy: list[str] = []
        for session, edits in _by_session(plan.edits).items():
            try:
                async with self.hold(session):
                    if text is not None:
                        fresh = await trio.to_thread.run_sync(
                            plan_session, self.root, session, text
                        )
                        if fresh != edits:
                            kept = [e for e in plan.edits if session_of(e) != session] + fresh
                            plan = msgspec.structs.replace(plan, edits=kept, counts=_counts(kept))
                            await keep(plan)
                            edits = fresh
                    conflicts += await trio.to_thread.run_sync(_rewrite, self.root, session, edits)
                    self.store.drop(session)
            except SessionBusy:
                busy.append(session)
                continue
            await self.notify(session, plan.plan)
        if busy:
            log.info("forget %s waits for the turns of %s", plan.plan, ", ".join(busy))
            raise ServiceError(
                "session-busy",
                f"session {busy[0]} has a turn running"
                + (f" (and {len(busy) - 1} more)" if len(busy) > 1 else "")
                + f"; forget {plan.plan} is decided and finishes there when asked again",
                runbook="forget",
            )
        return conflicts

    async def verify(self, plan: proto.ForgetPlan[NoSteps], text: str | None) -> list[str]:
        """Where a file is not as planned; given the text, every session that still holds it."""
        only = self._looked_at(plan.plan, plan)
        self._since.pop(plan.plan, None)

        def problems() -> list[str]:
            found = [p for e in plan.edits for p in proto.verify_file_edit(self.root, e)]
            if text is not None:
                left = plan_sessions(self.root, text, only)
                found += [f"{edit.path}: still holds it" for edit in left]
            return found

        return await trio.to_thread.run_sync(problems)

    def holdings(
        self, counts: dict[str, int], plan: proto.ForgetPlan[NoSteps] | None
    ) -> list[Holding]:
        """`sessions` (messages) and `baselines` (sessions), naming the sessions if known."""
        edits = plan.edits if plan is not None else []
        return [
            Holding(
                store=SESSIONS,
                count=counts.get(SESSIONS, 0),
                unit="messages",
                names=sorted({session_of(e) for e in edits if isinstance(e, LinesEdit)}),
            ),
            Holding(
                store=BASELINES,
                count=counts.get(BASELINES, 0),
                unit="sessions",
                names=sorted({session_of(e) for e in edits if isinstance(e, WholeEdit)}),
            ),
        ]
