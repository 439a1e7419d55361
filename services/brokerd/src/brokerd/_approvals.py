"""Pending approvals: an `ask` call waits here for the owner, the timeout, or its loopd.

Exactly one of four things settles an approval: the owner's `approval_decide`, the
timeout, the loopd connection closing, or brokerd shutting down. Settling is
synchronous (no checkpoint between looking an approval up and marking it settled), so
under trio's cooperative scheduling a decision and the timeout cannot both win: the
first to settle is the outcome, and the other sees it. An owner whose decision came
second is told the approval was already decided, and how.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import assert_never

import msgspec
import trio

import proto
from proto import PeerGone, PendingApproval

from ._arguments import Arguments

__all__ = [
    "UNTRUSTED_SESSION",
    "AlreadyDecided",
    "Disconnected",
    "NotApproved",
    "OwnerApproves",
    "OwnerDenies",
    "PendingApprovals",
    "Settled",
    "ShutDown",
    "TimedOut",
    "UnknownApproval",
    "describe",
    "format_duration",
    "page",
    "why_not_run",
]

log = logging.getLogger("brokerd.approvals")

UNTRUSTED_SESSION = "this session has seen untrusted content"
"""How an approval shows that its session's taint is untrusted."""

_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no l, o, 0, 1: read aloud, typed back
_ID_CHARS = 6
_REMEMBERED = 1024


@dataclasses.dataclass(frozen=True, kw_only=True)
class OwnerApproves:
    """The owner approved, where `surface` says; in their own `version` if they gave one."""

    surface: proto.Surface
    version: Arguments | None = None
    """The owner's own version of the call's arguments, parsed."""
    note: str | None = None
    """The owner's words on the approval."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class OwnerDenies:
    """The owner denied, where `surface` says, with their reason if they gave one."""

    surface: proto.Surface
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class TimedOut:
    """The owner did not decide within `after_s`."""

    after_s: float


@dataclasses.dataclass(frozen=True)
class Disconnected:
    """loopd hung up while the approval was pending."""


@dataclasses.dataclass(frozen=True)
class ShutDown:
    """brokerd stopped before the owner decided."""


NotApproved = OwnerDenies | TimedOut | Disconnected | ShutDown
"""Every way an approval ends without the call running."""

Settled = OwnerApproves | NotApproved
"""How an approval was settled: exactly one of these, first come."""


def why_not_run(settled: NotApproved) -> str:
    """The sentence the model reads for a call whose approval was not given."""
    match settled:
        case OwnerDenies(reason=reason):
            return "the owner denied this call" + (f": {reason}" if reason else "")
        case TimedOut(after_s=after_s):
            return f"approval timed out after {format_duration(after_s)}"
        case Disconnected():
            return "loopd disconnected while the approval was pending"
        case ShutDown():
            return proto.NOT_DECIDED
        case _:
            assert_never(settled)


def _past(settled: Settled) -> str:
    """How it was settled, for an owner whose decision came second."""
    match settled:
        case OwnerApproves():
            return "the owner approved it"
        case OwnerDenies():
            return "the owner denied it"
        case TimedOut():
            return "it timed out"
        case Disconnected():
            return "its loopd disconnected"
        case ShutDown():
            return "the owner did not decide before boxmaker stopped"
        case _:
            assert_never(settled)


class UnknownApproval(LookupError):
    """A decision for an id that was never pending."""

    code = "unknown-approval"


class AlreadyDecided(LookupError):
    """A decision for an approval that is settled already."""

    code = "already-decided"


LIST_PAGE_BYTES = proto.MAX_FRAME - 4096
"""What the approvals of one `approvals` reply may take: a frame, less its envelope."""

_encoder = msgspec.json.Encoder()


def page(
    pending: list[PendingApproval], budget: int = LIST_PAGE_BYTES
) -> tuple[list[PendingApproval], list[str]]:
    """The oldest of `pending` that fit in `budget` bytes with the ids of the rest; those ids.

    An approval's arguments may take most of a frame (a consolidate of hundreds of
    entries), so two of them could not be listed together, and a failed list hid every
    other approval from the owner. At least one approval is always given.
    """
    budget -= sum(len(_encoder.encode(a.id)) + 1 for a in pending)
    size = 0
    for count, approval in enumerate(pending):
        size += len(_encoder.encode(approval)) + 1  # and its comma
        if size > budget and count > 0:
            return pending[:count], [a.id for a in pending[count:]]
    return pending, []


def format_duration(seconds: float) -> str:
    """`900` → `15 min`; durations that are not whole minutes in seconds: `90.5 s`."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def describe(approval: PendingApproval) -> str:
    """One line for the log: the id, session, tool, and the session's taint."""
    taint = f"; {UNTRUSTED_SESSION}" if approval.taint.untrusted else ""
    return (
        f"approval {approval.id}: session {approval.session} asks for {approval.tool} "
        f"(taint {approval.taint.describe()}){taint}"
    )


@dataclasses.dataclass
class _Pending:
    approval: PendingApproval
    done: trio.Event = dataclasses.field(default_factory=trio.Event)
    settled: Settled | None = None


class PendingApprovals:
    """The pending approvals of one brokerd, oldest first."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._pending: dict[str, _Pending] = {}
        self._settled: collections.OrderedDict[str, Settled] = collections.OrderedDict()
        self._closed = False

    def new_id(self) -> str:
        """A short id no pending or recently settled approval has: `ap-` and 6 characters."""
        while True:
            candidate = "ap-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_CHARS))
            if candidate not in self._pending and candidate not in self._settled:
                return candidate

    def pending(self) -> list[PendingApproval]:
        """The approvals waiting for the owner, oldest first."""
        return [entry.approval for entry in self._pending.values()]

    async def wait_settled(
        self,
        approval: PendingApproval,
        *,
        announce: Callable[[], Awaitable[None]],
        peer_gone: Callable[[], Awaitable[None]],
    ) -> Settled:
        """List `approval` as pending, `announce` it, and wait until it is settled.

        `announce` tells loopd (it runs once the approval is listed, so an owner who acts
        on the announcement finds it); `peer_gone` returns when loopd has disconnected.
        """
        entry = _Pending(approval)
        if self._closed:
            return self._settle(entry, ShutDown())
        self._pending[approval.id] = entry
        log.info("%s", describe(approval))
        try:
            try:
                await announce()
            except PeerGone:
                return self._settle(entry, Disconnected())

            async def watch_peer() -> None:
                await peer_gone()
                self._settle(entry, Disconnected())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_peer)
                with trio.move_on_after(self.timeout_s):
                    await entry.done.wait()
                nursery.cancel_scope.cancel()
            return self._settle(entry, TimedOut(self.timeout_s))
        finally:
            # Cancelled from outside (a forced shutdown): it must not stay listed.
            self._settle(entry, ShutDown())

    def get(self, approval_id: str) -> PendingApproval:
        """The pending approval `approval_id`.

        Raises:
            UnknownApproval: no approval with this id was pending.
            AlreadyDecided: it was settled before (by the owner, the timeout, ...).
        """
        return self._entry(approval_id).approval

    def _entry(self, approval_id: str) -> _Pending:
        entry = self._pending.get(approval_id)
        if entry is None:
            settled = self._settled.get(approval_id)
            if settled is None:
                raise UnknownApproval(f"no pending approval {_quoted_id(approval_id)}")
            raise AlreadyDecided(f"approval {approval_id} was already settled: {_past(settled)}")
        return entry

    def settle_by_owner(self, approval_id: str, answer: OwnerApproves | OwnerDenies) -> None:
        """Settle a pending approval with the owner's answer.

        A caller that checked the owner's version against `get`'s approval must call this
        without a checkpoint in between, so the approval it checked is the one settled.

        Raises:
            UnknownApproval: no approval with this id was pending.
            AlreadyDecided: it was settled before (by the owner, the timeout, ...).
        """
        self._settle(self._entry(approval_id), answer)
        verb = "approved" if isinstance(answer, OwnerApproves) else "denied"
        log.info("approval %s %s by the owner", approval_id, verb)

    def deny_holding(self, text: str, answer: OwnerDenies) -> list[str]:
        """Deny, with `answer`, every pending approval whose arguments hold `text`; their ids.

        A forget does this once it is decided, before it changes anything, so that no
        approval given later can write the text back. Synchronous, like every settling.
        """
        holding = [
            entry
            for entry in self._pending.values()
            if proto.holds_text(entry.approval.arguments, text)
        ]
        for entry in holding:
            self._settle(entry, answer)
        return [entry.approval.id for entry in holding]

    def withdraw_all(self) -> None:
        """Deny every pending approval, and any asked from now on: brokerd is shutting down."""
        self._closed = True
        for entry in list(self._pending.values()):
            self._settle(entry, ShutDown())

    def _settle(self, entry: _Pending, settled: Settled) -> Settled:
        if entry.settled is None:
            entry.settled = settled
            self._pending.pop(entry.approval.id, None)
            self._settled[entry.approval.id] = settled
            while len(self._settled) > _REMEMBERED:
                self._settled.popitem(last=False)
            entry.done.set()
            if not isinstance(settled, OwnerApproves | OwnerDenies):
                log.info("approval %s settled: %s", entry.approval.id, _past(settled))
        return entry.settled


ID_SHOWN = 64
"""How much of an unknown approval id an error repeats (ids are `ap-` and 6 characters)."""


def _quoted_id(approval_id: str) -> str:
    if len(approval_id) <= ID_SHOWN:
        return repr(approval_id)
    return f"{approval_id[:ID_SHOWN]!r}… ({len(approval_id):,} characters)"
