"""The owner's forget, coordinated across memoryd, loopd and brokerd's own audit.

Each role forgets in its own store (`proto.ForgetPart`); brokerd coordinates a two-phase
commit and never writes the text. A forget writes a ledger
(`audit/.forget/<plan>.ledger.json`), asks every part to prepare its plan, and only when
all have prepared marks the ledger `committed`: that is the decision. Then it denies the
pending approvals that hold the text, appends its own audit record (counts and a keyed
digest), and has each part apply, in order. From the decision on, every part is applied
until it answers, across restarts of either side: with the text while this run has it
(in memory only), else from the plan the part keeps. A ledger found `preparing` at start
is a forget never decided: every part is told to abort, and the ledger goes.

A part that is not running (it died; `bxctl up` or systemd brings it back) is asked again
while the owner waits, for at most `PART_WAIT_S`, and the owner is told what is waited
for (`forget_progress`). Before the decision, a part still gone then means nothing is
forgotten; after it, the owner is told which stores are done and which will finish by
themselves.

Invariants:
- No file brokerd writes and no line it logs holds the text.
- Before the ledger says `committed`, nothing changed in any store and no approval was
  denied; after it, the forget finishes without the owner asking again.
- The text reaches a part only over its broker socket (memoryd, loopd) or in memory (the
  audit), never through a tool call of the model: only the owner's socket takes `forget`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

import msgspec
import trio

import proto
from proto import (
    ForgetAbort,
    ForgetApplied,
    ForgetApply,
    ForgetLook,
    ForgetLooked,
    ForgetPrepare,
    ForgetPrepared,
    ForgetPreviewed,
    ForgetProgress,
    Forgotten,
    Message,
    Ok,
    PartLeft,
    ServiceError,
    Surface,
)

from ._approvals import OwnerDenies, PendingApprovals, format_duration
from ._audit import Audit

__all__ = [
    "FORGOTTEN_BY_OWNER",
    "ForgetCoordinator",
    "ForgetLedger",
    "LocalPart",
    "Part",
    "PartFailed",
    "RolePart",
    "Tell",
]

log = logging.getLogger("brokerd.forget")

FORGOTTEN_BY_OWNER = "forgotten by the owner"
"""The reason of a pending approval a forget denies because its arguments hold the text."""

MAX_NEAR = 10
"""How many near matches a preview offers."""

AUDIT_PART = "brokerd"
"""The name of brokerd's own part (its audit log) in a ledger and in an answer."""

RETRY_FIRST_S, RETRY_LONGEST_S = 0.5, 10.0
"""How a part that did not answer is asked again (`proto.Backoff`)."""

PART_WAIT_S = 60.0
"""How long the owner's forget waits for parts that are not running to come back."""

TELL_EVERY_S = 2.0
"""How often the owner is told how a forget goes (`forget_progress`)."""

M = TypeVar("M", bound=Message)
T = TypeVar("T")

Tell = Callable[[ForgetProgress], Awaitable[None]]
"""Tells the owner how a forget goes; never raises."""
Step = Literal["preview", "prepare", "apply"]


async def _told_nobody(progress: ForgetProgress) -> None:
    return None


class PartFailed(Exception):
    """A part did not do what it was asked; the message says why, for the owner."""

    def __init__(self, part: str, code: str, message: str) -> None:
        super().__init__(message)
        self.part = part
        self.code = code

    @property
    def gone(self) -> bool:
        """Whether the part is not running (it may come back), rather than said no."""
        return self.code in ("unreachable", "broken")


class Part(Protocol):
    """One store's side of a forget: a role over its broker socket, or brokerd's audit."""

    @property
    def name(self) -> str:
        """The part's name in a ledger and in an answer."""
        ...

    async def ask(self, request: Message, expect: type[M]) -> M:
        """The part's answer to `request`; `PartFailed` for every way it has none."""
        ...


class RolePart:
    """memoryd or loopd: the forget requests over its broker socket."""

    def __init__(self, name: str, socket: Path, *, call_timeout_s: float) -> None:
        self.name = name
        self.socket = socket
        self.call_timeout_s = call_timeout_s

    async def ask(self, request: Message, expect: type[M]) -> M:
        """One request over the socket, every failure a `PartFailed` worded for the owner."""
        name = self.name
        try:
            return await proto.call(self.socket, request, expect, deadline_s=self.call_timeout_s)
        except proto.Unreachable:
            code, why = "unreachable", f"{name} is not running"
        except proto.CallTimedOut:
            code, why = (
                "timeout",
                f"{name} did not answer within {format_duration(self.call_timeout_s)}",
            )
        except proto.RemoteError as exc:
            code, why = exc.error.code, f"{name} could not do it: {exc.error.message}"
        except (proto.CallBroken, proto.NoReply):
            code, why = "broken", f"{name} stopped in the middle of it"
        except proto.CallFailed as exc:
            code, why = exc.code, f"{name} gave no usable answer: {exc}"
        raise PartFailed(name, code, why)


class LocalPart:
    """A part in this process (brokerd's audit): its `proto.ForgetPart`, asked directly."""

    def __init__(self, part: proto.ForgetPart[proto.NoSteps]) -> None:
        self.part = part
        self.name = part.store.name

    async def ask(self, request: Message, expect: type[M]) -> M:
        """The part's answer; a refusal is a `PartFailed` as a role's would be."""
        assert isinstance(request, ForgetLook | ForgetPrepare | ForgetApply | ForgetAbort)
        try:
            reply = await self.part.handle(request)
        except ServiceError as exc:
            raise PartFailed(self.name, exc.code, f"{self.name} could not do it: {exc}") from None
        assert isinstance(reply, expect), reply
        return reply


class ForgetRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the forget's own audit record says: counts and a keyed digest, never the text."""

    counts: dict[str, int]
    digest: str
    surface: Surface
    session: str | None = None


class ForgetLedger(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """brokerd's note of one forget in flight: never the text.

    `preparing` until every part has prepared; `committed` from the decision on. `done`
    names the parts that finished their side (applied once committed, aborted before);
    `lost`, those that no longer had a plan to finish. `record` is the forget's audit
    record until it is appended (then left out).
    """

    plan: proto.PlanId
    state: Literal["preparing", "committed"]
    parts: list[str]
    done: list[str] = msgspec.field(default_factory=list)
    lost: list[str] = msgspec.field(default_factory=list)
    record: ForgetRecord | msgspec.UnsetType = msgspec.UNSET

    @property
    def unfinished(self) -> list[str]:
        """The parts still to finish, in the ledger's order."""
        return [p for p in self.parts if p not in self.done and p not in self.lost]

    @property
    def finished(self) -> bool:
        """Every part finished (or lost) and the audit record written: the ledger goes."""
        return not self.unfinished and isinstance(self.record, msgspec.UnsetType)


@dataclasses.dataclass
class Round(Generic[T]):
    """What asking some parts found: each part's answer or its failure."""

    answers: dict[str, T] = dataclasses.field(default_factory=dict)
    failures: dict[str, PartFailed] = dataclasses.field(default_factory=dict)

    def in_order(self, names: Iterable[str]) -> list[T]:
        """The answers of the parts `names` that answered, in that order."""
        return [self.answers[name] for name in names if name in self.answers]

    def why(self) -> str:
        """The failures, for the owner."""
        return "; ".join(str(failure) for failure in self.failures.values())

    def next_step(self) -> str:
        """What the owner does after a forget that did not happen."""
        if any(failure.gone for failure in self.failures.values()):
            return "start it (bxctl up), then forget the text again"
        return "forget the text again once that is put right"


class ForgetCoordinator:
    """The owner's forgets: previews, decisions, and the ledgers that outlive a crash.

    `load` (blocking, at start) reads the ledgers left by an earlier run; `finish_in`
    gives the nursery where they, and every forget, are carried to the end.
    """

    def __init__(
        self,
        directory: Path,
        audit: Audit,
        approvals: PendingApprovals,
        parts: Sequence[Part],
        *,
        wait_s: float = PART_WAIT_S,
        tell_every_s: float = TELL_EVERY_S,
    ) -> None:
        self.ledgers = proto.StructFiles(directory, ForgetLedger, ".ledger.json")
        self.audit = audit
        self.approvals = approvals
        self.parts = {part.name: part for part in parts}
        self.wait_s = wait_s
        self.tell_every_s = tell_every_s
        self._nursery: trio.Nursery | None = None
        self._shutdown = trio.Event()
        self._left: list[ForgetLedger] = []
        self._unfinished: dict[str, trio.Event] = {}

    def load(self) -> None:
        """Read the ledgers an earlier run left; blocking, at start."""
        for plan in self.ledgers.ids():
            try:
                ledger = self.ledgers.read(plan)
            except ValueError as exc:
                log.error("forget ledger %s is damaged and was left as it is: %s", plan, exc)
                continue
            if ledger is not None:
                self._left.append(ledger)
                self._unfinished[plan] = trio.Event()
                doing = "finishing" if ledger.state == "committed" else "aborting"
                log.info("forget %s was left %s by the last run; %s it", plan, ledger.state, doing)

    def finish_in(self, nursery: trio.Nursery, shutdown: trio.Event) -> None:
        """Carry the ledgers `load` found, and every forget from now on, in `nursery`.

        A part still to finish at `shutdown` is left to the next start (its ledger says
        so), rather than hold the drain up with retries.
        """
        self._nursery, self._shutdown = nursery, shutdown
        for ledger in self._left:
            nursery.start_soon(self._finish, ledger, None, True)
        self._left = []

    async def wait_finished(self, plan: str) -> None:
        """Return once forget `plan` is finished everywhere (at once if it is not in flight)."""
        event = self._unfinished.get(plan)
        if event is not None:
            await event.wait()

    async def preview(self, text: str, tell: Tell = _told_nobody) -> ForgetPreviewed:
        """What a forget of `text` would change, from every part; writes nothing.

        Raises:
            ServiceError: the text cannot be forgotten as given, or a part did not answer.
        """
        text = proto.forget_text(text)
        ask = ForgetLook(text=text)
        looked = await self._round(
            list(self.parts), "preview", tell, True, lambda p: p.ask(ask, ForgetLooked)
        )
        if looked.failures:
            why = f"{looked.why()}; nothing was changed; {looked.next_step()}"
            raise ServiceError("forget-preview-failed", why, runbook="forget")
        answers = looked.in_order(self.parts)
        return ForgetPreviewed(
            holdings=[h for a in answers for h in a.holdings],
            entries=[e for a in answers for e in a.entries],
            near=[n for a in answers for n in a.near][:MAX_NEAR],
        )

    async def forget(
        self, text: str, surface: Surface, session: str | None, tell: Tell = _told_nobody
    ) -> Forgotten:
        """Forget `text` everywhere; answer once every part was asked to apply.

        The work runs in the `finish_in` nursery, so an owner who hangs up, or a deadline
        on this request, cannot leave it half done in this run.

        Raises:
            ServiceError: the text cannot be forgotten as given, or nothing was forgotten
                (a part did not prepare; the message says which and why).
        """
        text = proto.forget_text(text)
        if self._nursery is None:
            raise RuntimeError("ForgetCoordinator.finish_in was not called before a forget")
        send, receive = trio.open_memory_channel[Forgotten | ServiceError](1)

        async def carry() -> None:
            try:
                outcome: Forgotten | ServiceError = await self._carry(text, surface, session, tell)
            except ServiceError as exc:
                outcome = exc
            except Exception:
                log.exception("a forget failed inside brokerd")
                outcome = ServiceError(
                    "forget-failed", "the forget failed inside brokerd; its log says why"
                )
            send.send_nowait(outcome)  # a buffer of one: never blocks, even if nobody waits

        self._nursery.start_soon(carry)
        with receive:
            outcome = await receive.receive()
        if isinstance(outcome, ServiceError):
            raise outcome
        return outcome

    async def _carry(
        self, text: str, surface: Surface, session: str | None, tell: Tell
    ) -> Forgotten:
        plan = proto.new_plan_id()
        ledger = ForgetLedger(plan=plan, state="preparing", parts=list(self.parts))
        await self._write_or_refuse(ledger)
        self._unfinished[plan] = trio.Event()
        ask = ForgetPrepare(plan=plan, text=text)
        prepared = await self._round(
            ledger.parts, "prepare", tell, True, lambda p: p.ask(ask, ForgetPrepared)
        )
        if prepared.failures:
            for name, failure in prepared.failures.items():
                log.warning("forget %s: %s did not prepare (%s)", plan, name, failure.code)
            self._start_finishing(ledger, None)  # every part is told to abort
            why = f"nothing was forgotten: {prepared.why()}; {prepared.next_step()}"
            raise ServiceError("forget-not-done", why, runbook="forget")
        counts: dict[str, int] = {}
        for holding in (h for a in prepared.in_order(ledger.parts) for h in a.holdings):
            counts[holding.store] = counts.get(holding.store, 0) + holding.count
        digest = self.audit.forget_digest(text)
        record = ForgetRecord(counts=counts, digest=digest, surface=surface, session=session)
        committed = msgspec.structs.replace(ledger, state="committed", record=record)
        try:
            await self._write_or_refuse(committed)  # the commit point: the forget is decided
        except ServiceError:
            self._start_finishing(ledger, None)
            raise
        log.info("forget %s: decided; %s", plan, _counted(counts))
        denied = self.approvals.deny_holding(
            text, OwnerDenies(surface=surface, reason=FORGOTTEN_BY_OWNER)
        )
        if denied:
            log.info("forget %s: denied pending approvals %s", plan, ", ".join(denied))
        ledger, unrecorded = await self._record(committed)
        ledger, applied = await self._apply(ledger, text, tell, wait=True)
        left = [
            PartLeft(part=n, why=str(applied.failures[n]), holdings=prepared.answers[n].holdings)
            for n in ledger.unfinished
        ]
        if unrecorded is not None:
            left.append(
                PartLeft(part=AUDIT_PART, why=f"its own record of the forget: {unrecorded}")
            )
        forgotten = Forgotten(
            plan=plan,
            holdings=[h for a in applied.in_order(ledger.parts) for h in a.holdings],
            left=left,
            lost=[PartLeft(part=n, why=str(applied.failures[n])) for n in ledger.lost],
            conflicts=[
                f"{n}: {conflict}"
                for n in ledger.parts
                for conflict in (applied.answers[n].conflicts if n in applied.answers else [])
            ],
            denied=denied,
        )
        if ledger.finished:
            await self._done(ledger)
        else:
            self._start_finishing(ledger, text)
        return forgotten

    async def _round(
        self,
        names: list[str],
        step: Step,
        tell: Tell,
        wait: bool,
        ask: Callable[[Part], Awaitable[T]],
    ) -> Round[T]:
        """Ask the parts `names` side by side; with `wait`, one that is gone is asked again.

        For at most `wait_s`; meanwhile the owner is told how it goes every `tell_every_s`.
        """
        found: Round[T] = Round()
        gone: set[str] = set()
        started = trio.current_time()
        until = started + self.wait_s if wait else -math.inf

        async def one(part: Part) -> None:
            backoff = proto.Backoff(RETRY_FIRST_S, RETRY_LONGEST_S)
            while True:
                try:
                    found.answers[part.name] = await ask(part)
                except PartFailed as exc:
                    left = until - trio.current_time()
                    if exc.gone and left > 0:
                        if part.name not in gone:
                            log.info("forget: %s is not running; waiting for it", part.name)
                        gone.add(part.name)
                        await trio.sleep(min(backoff.next(), left))
                        continue
                    if exc.gone and part.name in gone:
                        exc = PartFailed(
                            part.name,
                            exc.code,
                            f"{exc} (waited {format_duration(self.wait_s)} for it)",
                        )
                    found.failures[part.name] = exc
                except Exception:
                    # A bug must not end the task that carries a decided forget to its end.
                    log.exception("forget: %s failed inside brokerd", part.name)
                    why = f"{part.name} failed inside brokerd; its log says why"
                    found.failures[part.name] = PartFailed(part.name, "internal", why)
                gone.discard(part.name)
                return

        async def progress() -> None:
            while True:
                await trio.sleep(self.tell_every_s)
                working = [n for n in names if n not in found.answers and n not in found.failures]
                await tell(
                    ForgetProgress(
                        step=step,
                        working=[n for n in working if n not in gone],
                        gone=sorted(gone),
                        waited_s=int(trio.current_time() - started),
                        bound_s=int(self.wait_s) if wait else 0,
                    )
                )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(progress)
            async with trio.open_nursery() as asking:
                for name in names:
                    asking.start_soon(one, self.parts[name])
            nursery.cancel_scope.cancel()
        return found

    async def _record(self, ledger: ForgetLedger) -> tuple[ForgetLedger, str | None]:
        """Append the forget's audit record if it is still to be; the ledger, and why not."""
        if isinstance(ledger.record, msgspec.UnsetType):
            return ledger, None
        r = ledger.record
        try:
            await self.audit.append_forget(
                plan=ledger.plan,
                counts=r.counts,
                digest=r.digest,
                surface=r.surface,
                session=r.session,
            )
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            log.warning("forget %s: its audit record could not be written (%s)", ledger.plan, why)
            return ledger, f"the audit log could not be written ({why})"
        ledger = msgspec.structs.replace(ledger, record=msgspec.UNSET)
        await self._keep(ledger)
        return ledger, None

    async def _apply(
        self,
        ledger: ForgetLedger,
        text: str | None,
        tell: Tell = _told_nobody,
        *,
        wait: bool = False,
    ) -> tuple[ForgetLedger, Round[ForgetApplied]]:
        """Apply every unfinished part once, in order; the ledger with those done.

        One after another, in the parts' order (memoryd, loopd, the audit): once memoryd
        has taken the entries out of the memory files, no session opened from then on
        starts with the text in its baseline, so loopd's plan, made after, sees every
        session that could hold it. With `wait` (the owner waits), a part that is not
        running is waited for. With `text`, a part plans again: copies made since go too.
        """
        request = ForgetApply(plan=ledger.plan, text=text)
        applied: Round[ForgetApplied] = Round()
        for name in ledger.unfinished:
            one = await self._round(
                [name], "apply", tell, wait, lambda p: p.ask(request, ForgetApplied)
            )
            applied.answers.update(one.answers)
            applied.failures.update(one.failures)
            wait = wait and not one.failures  # the owner waits for one part at most
        done, lost = list(ledger.done), list(ledger.lost)
        for name, answer in applied.answers.items():
            done.append(name)
            how = "had applied it before" if answer.again else "applied"
            conflicts = f", {len(answer.conflicts)} conflicts" if answer.conflicts else ""
            counted = _counted({h.store: h.count for h in answer.holdings})
            log.info("forget %s: %s %s: %s%s", ledger.plan, name, how, counted, conflicts)
        for name, failure in applied.failures.items():
            if failure.code == "forget-unknown":
                log.error(
                    "forget %s: %s no longer has its plan; what it holds of the text stays "
                    "there until the owner forgets it again (runbook: forget)",
                    ledger.plan,
                    name,
                )
                lost.append(name)
            else:
                log.warning(
                    "forget %s: %s did not apply (%s); asked again", ledger.plan, name, failure.code
                )
        ledger = msgspec.structs.replace(ledger, done=done, lost=lost)
        await self._keep(ledger)
        return ledger, applied

    async def _abort(self, ledger: ForgetLedger) -> ForgetLedger:
        """Tell every unfinished part to drop its plan; the ledger with those done."""
        request = ForgetAbort(plan=ledger.plan)
        aborted = await self._round(
            ledger.unfinished, "prepare", _told_nobody, False, lambda p: p.ask(request, Ok)
        )
        lost = [n for n, f in aborted.failures.items() if f.code == "forget-decided"]
        for name in lost:  # it cannot be: said, and given up
            log.error(
                "forget %s: %s would not abort: %s", ledger.plan, name, aborted.failures[name]
            )
        ledger = msgspec.structs.replace(
            ledger, done=[*ledger.done, *aborted.answers], lost=[*ledger.lost, *lost]
        )
        await self._keep(ledger)
        return ledger

    def _start_finishing(self, ledger: ForgetLedger, text: str | None) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._finish, ledger, text, ledger.state == "preparing")

    async def _finish(self, ledger: ForgetLedger, text: str | None, now: bool) -> None:
        """Carry a ledger to its end, trying again with a backoff (the first time at once if `now`).

        With the text while this run has it (kept in memory, never written), without it
        after a restart: each part then finishes the plan it keeps.
        """
        backoff = proto.Backoff(RETRY_FIRST_S, RETRY_LONGEST_S)
        while True:
            if now:
                if ledger.state == "preparing":
                    ledger = await self._abort(ledger)
                else:
                    ledger, _ = await self._record(ledger)
                    if ledger.unfinished:
                        ledger, _ = await self._apply(ledger, text)
                if ledger.finished:
                    await self._done(ledger)
                    return
            now = True
            with trio.move_on_after(backoff.next()):
                await self._shutdown.wait()
            if self._shutdown.is_set():
                left = ", ".join(ledger.unfinished) or "its audit record"
                log.info("forget %s: %s left to finish at the next start", ledger.plan, left)
                return

    async def _done(self, ledger: ForgetLedger) -> None:
        try:
            await trio.to_thread.run_sync(self.ledgers.remove, ledger.plan)
        except OSError as exc:
            log.warning("forget %s: its ledger could not be removed: %s", ledger.plan, exc)
        if ledger.state == "preparing":
            log.info("forget %s: aborted everywhere", ledger.plan)
        elif ledger.lost:
            log.error(
                "forget %s: finished, but not in %s (its plan was lost); forget the text "
                "again (runbook: forget)",
                ledger.plan,
                ", ".join(ledger.lost),
            )
        else:
            log.info("forget %s: finished everywhere", ledger.plan)
        event = self._unfinished.pop(ledger.plan, None)
        if event is not None:
            event.set()

    async def _write_or_refuse(self, ledger: ForgetLedger) -> None:
        try:
            await trio.to_thread.run_sync(self.ledgers.write, ledger.plan, ledger)
        except OSError as exc:
            where = self.ledgers.directory
            why = f"nothing was forgotten: brokerd cannot write {where}: {exc.strerror or exc}"
            raise ServiceError("audit-unwritable", why) from None

    async def _keep(self, ledger: ForgetLedger) -> None:
        """Write a ledger's progress; a failure only means a part is asked once more."""
        try:
            await trio.to_thread.run_sync(self.ledgers.write, ledger.plan, ledger)
        except OSError as exc:
            log.warning("forget %s: its ledger could not be updated: %s", ledger.plan, exc)


def _counted(counts: dict[str, int]) -> str:
    """`journal 2, sessions 3` for the log: stores and counts only."""
    return ", ".join(f"{store} {count}" for store, count in counts.items()) or "nothing"
