"""The owner's forget, carried through memoryd, loopd and brokerd's own audit (issue 31).

Each role forgets in its own store; brokerd only coordinates, as a two-phase commit whose
coordinator never keeps the text. A forget writes a ledger (`audit/.forget/<plan>.ledger.json`),
denies the pending approvals that hold the text, asks every part to prepare its plan, and
only when all have prepared marks the ledger `committed`: that is the decision. From then
on every part is applied until it answers, across restarts, without the text (each role
keeps a plan that does not hold it). A ledger found `preparing` at start is a forget that
was never decided: every part is told to abort, and the ledger goes.

Invariants:
- No file brokerd writes and no line it logs holds the text: the ledger holds the plan
  id, the state, the parts and which are done, and, until it is appended, what the
  forget's audit record says (counts and a keyed digest).
- Before the ledger says `committed`, nothing changed in any store; after it, the forget
  finishes without the owner asking again.
- The text reaches a part only over its broker socket (memoryd, loopd) or in memory (the
  audit), never through a tool call of the model: only the owner's socket takes `forget`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, Protocol, TypeVar, assert_never

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
    Forgotten,
    Holding,
    Message,
    Ok,
    ServiceError,
    Surface,
)

from ._approvals import OwnerDenies, PendingApprovals, format_duration
from ._audit import Audit

__all__ = [
    "AUDIT_PART",
    "FORGOTTEN_BY_OWNER",
    "MAX_NEAR",
    "AuditPart",
    "Forgets",
    "Ledger",
    "Part",
    "PartFailed",
    "RolePart",
]

log = logging.getLogger("brokerd.forget")

FORGOTTEN_BY_OWNER = "forgotten by the owner"
"""The reason of a pending approval a forget denies because its arguments hold the text."""

MAX_NEAR = 10
"""How many near matches a preview offers."""

AUDIT_PART = "brokerd"
"""The name of brokerd's own part (its audit log) in a ledger and in `pending`."""

RETRY_FIRST_S = 0.5
RETRY_LONGEST_S = 10.0
"""How a decided forget tries a part again that did not answer (`proto.Backoff`): a role
`bxctl up` restarts is back within seconds, and the owner waits on the answer."""

PREPARE_WAIT_S = 60.0
"""How long a forget waits for a part that went away while preparing to come back."""

_GONE = frozenset({"unreachable", "broken"})
"""The failures of a part that died or is restarting (as opposed to one that said no)."""

M = TypeVar("M", bound=Message)


class PartFailed(Exception):
    """A part did not do what it was asked; the message says why, for the owner.

    The message may quote a role's own error, so it is the owner's to read, not the
    log's: the log gets `code` and the part's name.
    """

    def __init__(self, part: str, code: str, message: str) -> None:
        super().__init__(message)
        self.part = part
        self.code = code


class Part(Protocol):
    """One store's side of a forget: a role over its broker socket, or brokerd's audit."""

    @property
    def name(self) -> str:
        """The part's name in a ledger and in a reply's `pending`."""
        ...

    async def look(self, text: str) -> ForgetLooked:
        """What of this part's stores holds `text`; writes nothing."""
        ...

    async def prepare(self, plan: str, text: str) -> ForgetPrepared:
        """Write this part's plan; change nothing else."""
        ...

    async def apply(self, plan: str, text: str | None) -> ForgetApplied:
        """Apply the plan (re-planned with `text` when given), verify, delete it."""
        ...

    async def abort(self, plan: str) -> None:
        """Delete the plan if it is not committed."""
        ...


class RolePart:
    """memoryd or loopd: the four forget requests over its broker socket.

    Raises `PartFailed` for every way a call fails, worded for the owner.
    """

    def __init__(self, name: str, socket: Path, *, call_timeout_s: float) -> None:
        self._name = name
        self.socket = socket
        self.call_timeout_s = call_timeout_s

    @property
    def name(self) -> str:
        """`memoryd` or `loopd`."""
        return self._name

    async def look(self, text: str) -> ForgetLooked:
        """Ask for the role's holdings."""
        return await self._call(ForgetLook(text=text), ForgetLooked)

    async def prepare(self, plan: str, text: str) -> ForgetPrepared:
        """Ask the role to write its plan."""
        return await self._call(ForgetPrepare(plan=plan, text=text), ForgetPrepared)

    async def apply(self, plan: str, text: str | None) -> ForgetApplied:
        """Ask the role to apply its plan."""
        request = ForgetApply(plan=plan) if text is None else ForgetApply(plan=plan, text=text)
        return await self._call(request, ForgetApplied)

    async def abort(self, plan: str) -> None:
        """Ask the role to drop its uncommitted plan."""
        await self._call(ForgetAbort(plan=plan), Ok)

    async def _call(self, request: Message, expect: type[M]) -> M:
        name = self._name
        try:
            return await proto.call(self.socket, request, expect, deadline_s=self.call_timeout_s)
        except proto.Unreachable:
            raise PartFailed(
                name, "unreachable", f"{name} is not running: start it (bxctl up), then ask again"
            ) from None
        except proto.CallTimedOut:
            waited = format_duration(self.call_timeout_s)
            raise PartFailed(name, "timeout", f"{name} did not answer within {waited}") from None
        except proto.RemoteError as exc:
            raise PartFailed(
                name, exc.error.code, f"{name} could not do it: {exc.error.message}"
            ) from None
        except proto.CallBroken:
            raise PartFailed(
                name, "broken", f"{name} went away in the middle of it (it stopped or died)"
            ) from None
        except proto.CallFailed as exc:
            raise PartFailed(name, exc.code, f"{name} gave no usable answer: {exc}") from None


def _holdings(counts: dict[str, int], unit: str) -> list[Holding]:
    return [Holding(store=store, count=count, unit=unit) for store, count in counts.items()]


@contextmanager
def _audit_failing(done: str) -> Iterator[None]:
    """Turn an OSError of the audit's files into the part's failure."""
    try:
        yield
    except OSError as exc:
        raise PartFailed(
            AUDIT_PART,
            "audit-unwritable",
            f"brokerd's audit log could not be {done}: {exc.strerror or exc}",
        ) from None


class AuditPart:
    """brokerd's own store, the audit log, as a part like the roles'.

    Raises `PartFailed` when the audit directory cannot be read or written.
    """

    def __init__(self, audit: Audit) -> None:
        self.audit = audit

    @property
    def name(self) -> str:
        """`brokerd`."""
        return AUDIT_PART

    async def look(self, text: str) -> ForgetLooked:
        """Count the records holding `text`."""
        with _audit_failing("read"):
            count = await trio.to_thread.run_sync(self.audit.forget_look, text)
        return ForgetLooked(holdings=[Holding(store="audit", count=count, unit="records")])

    async def prepare(self, plan: str, text: str) -> ForgetPrepared:
        """Write the audit's plan."""
        with _audit_failing("prepared"):
            written = await trio.to_thread.run_sync(self.audit.forget_prepare, plan, text)
        return ForgetPrepared(plan=plan, holdings=_holdings(written.counts, "records"))

    async def apply(self, plan: str, text: str | None) -> ForgetApplied:
        """Redact the records and check the chain."""
        with _audit_failing("redacted"):
            return await self.audit.forget_apply(plan, text)
        raise AssertionError("unreachable: _failing raised")  # pragma: no cover

    async def abort(self, plan: str) -> None:
        """Drop the audit's uncommitted plan."""
        with _audit_failing("cleaned up"):
            await trio.to_thread.run_sync(self.audit.forget_abort, plan)


# -- the ledger ------------------------------------------------------------------------


class ForgetRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the forget's own audit record says: counts and a keyed digest, never the text."""

    counts: dict[str, int]
    digest: str
    surface: Surface
    session: str | None = None


class Ledger(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """brokerd's note of one forget in flight: never the text.

    `preparing` until every part has prepared; `committed` from the decision on. `done`
    names the parts that finished their side: applied once committed, aborted before.
    `record` is the forget's audit record until it is appended (then left out).
    """

    plan: proto.PlanId
    state: Literal["preparing", "committed"]
    parts: list[str]
    done: list[str] = msgspec.field(default_factory=list)
    record: ForgetRecord | msgspec.UnsetType = msgspec.UNSET

    @property
    def unfinished(self) -> list[str]:
        """The parts still to finish, in the ledger's order."""
        return [part for part in self.parts if part not in self.done]

    def finished(self, part: str) -> Ledger:
        """This ledger with `part` done."""
        return msgspec.structs.replace(self, done=[*self.done, part])


_LEDGER_SUFFIX = ".ledger.json"
_ledger_decoder = msgspec.json.Decoder(Ledger)


def _ledger_path(directory: Path, plan: str) -> Path:
    return directory / f"{plan}{_LEDGER_SUFFIX}"


def _write_ledger(directory: Path, ledger: Ledger) -> None:
    directory.mkdir(mode=0o700, exist_ok=True)
    proto.write_atomically(_ledger_path(directory, ledger.plan), msgspec.json.encode(ledger))


def _remove_ledger(directory: Path, plan: str) -> None:
    try:
        _ledger_path(directory, plan).unlink()
    except FileNotFoundError:
        return
    proto.fsync_dir(directory)


def _read_ledgers(directory: Path) -> list[Ledger]:
    """The ledgers in `directory`, oldest first; a damaged one is logged and left."""
    if not directory.is_dir():
        return []
    paths = sorted(directory.glob(f"fg-*{_LEDGER_SUFFIX}"), key=lambda p: p.stat().st_mtime_ns)
    ledgers: list[Ledger] = []
    for path in paths:
        try:
            ledgers.append(_ledger_decoder.decode(path.read_bytes()))
        except msgspec.DecodeError as exc:
            log.warning("forget ledger %s is damaged and was left as it is: %s", path, exc)
    return ledgers


# -- the forget ------------------------------------------------------------------------


@dataclasses.dataclass
class _Round:
    """What one round of asking every part found: answers by part, failures by part."""

    answers: dict[str, object] = dataclasses.field(default_factory=dict)
    failures: dict[str, PartFailed] = dataclasses.field(default_factory=dict)

    def why(self) -> str:
        return "; ".join(str(failure) for failure in self.failures.values())


def _counted(counts: dict[str, int]) -> str:
    """`journal 2, sessions 3` for the log: stores and counts only."""
    return ", ".join(f"{store} {count}" for store, count in counts.items()) or "nothing"


class Forgets:
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
        backoff: Callable[[], proto.Backoff] = lambda: proto.Backoff(
            RETRY_FIRST_S, RETRY_LONGEST_S
        ),
    ) -> None:
        self.directory = directory
        self.audit = audit
        self.approvals = approvals
        self.parts = {part.name: part for part in parts}
        self._backoff = backoff
        self._nursery: trio.Nursery | None = None
        self._shutdown = trio.Event()
        self._left: list[Ledger] = []
        self._unfinished: dict[str, trio.Event] = {}

    def load(self) -> None:
        """Read the ledgers an earlier run left; blocking, at start."""
        self._left = _read_ledgers(self.directory)
        for ledger in self._left:
            self._unfinished[ledger.plan] = trio.Event()
            log.info(
                "forget %s was left %s by the last run; %s",
                ledger.plan,
                ledger.state,
                "finishing it" if ledger.state == "committed" else "aborting it",
            )

    def finish_in(self, nursery: trio.Nursery, shutdown: trio.Event) -> None:
        """Carry the ledgers `load` found, and every forget from now on, in `nursery`.

        A part still to finish at `shutdown` is left to the next start (its ledger says
        so), rather than hold the drain up with retries.
        """
        self._nursery = nursery
        self._shutdown = shutdown
        for ledger in self._left:
            nursery.start_soon(self._finish, ledger)
        self._left = []

    async def wait_finished(self, plan: str) -> None:
        """Return once forget `plan` is finished everywhere (at once if it is not in flight)."""
        event = self._unfinished.get(plan)
        if event is not None:
            await event.wait()

    # -- preview ---------------------------------------------------------------------

    async def preview(self, text: str) -> ForgetPreviewed:
        """What a forget of `text` would change, from every part; writes nothing.

        Raises:
            ServiceError: the text cannot be forgotten as given, or a part did not answer.
        """
        text = _check(text)
        looked = await self._round(lambda part: part.look(text))
        if looked.failures:
            raise ServiceError("forget-preview-failed", looked.why(), runbook="forget")
        holdings: list[Holding] = []
        entries: list[proto.ForgetEntry] = []
        near: list[str] = []
        for name in self.parts:
            answer = looked.answers[name]
            assert isinstance(answer, ForgetLooked)
            holdings += answer.holdings
            entries += answer.entries
            near += answer.near
        return ForgetPreviewed(holdings=holdings, entries=entries, near=near[:MAX_NEAR])

    # -- forget ----------------------------------------------------------------------

    async def forget(self, text: str, surface: Surface, session: str | None) -> Forgotten:
        """Forget `text` everywhere; answer once every part was asked to apply once.

        The work runs in the `finish_in` nursery, so an owner who hangs up, or a deadline
        on this request, cannot leave it half done in this run.

        Raises:
            ServiceError: the text cannot be forgotten as given, or nothing was forgotten
                (a part failed to prepare; the message says which and why).
        """
        text = _check(text)
        nursery = self._nursery
        if nursery is None:
            raise RuntimeError("Forgets.finish_in was not called before a forget")
        outcome: list[Forgotten | ServiceError] = []
        over = trio.Event()

        async def carry() -> None:
            try:
                outcome.append(await self._carry(text, surface, session))
            except ServiceError as exc:
                outcome.append(exc)
            except Exception:
                log.exception("a forget failed inside brokerd")
                outcome.append(
                    ServiceError(
                        "forget-failed", "the forget failed inside brokerd; its log says why"
                    )
                )
            finally:
                over.set()

        nursery.start_soon(carry)
        await over.wait()
        match outcome:
            case [Forgotten() as forgotten]:
                return forgotten
            case [ServiceError() as error]:
                raise error
            case _:
                raise AssertionError(f"a forget ended with {outcome!r}")

    async def _carry(self, text: str, surface: Surface, session: str | None) -> Forgotten:
        plan = proto.new_plan_id()
        ledger = Ledger(plan=plan, state="preparing", parts=list(self.parts))
        try:
            await self._write(ledger)
        except OSError as exc:
            raise ServiceError(
                "audit-unwritable",
                f"nothing was forgotten: brokerd cannot write {self.directory}: "
                f"{exc.strerror or exc}",
            ) from None
        self._unfinished[plan] = trio.Event()
        denied = self.approvals.deny_holding(
            text, OwnerDenies(surface=surface, reason=FORGOTTEN_BY_OWNER)
        )
        if denied:
            log.info("forget %s: denied pending approvals %s", plan, ", ".join(denied))
        prepared = await self._prepare(plan, text)
        if prepared.failures:
            for name, failure in prepared.failures.items():
                log.warning("forget %s: %s did not prepare (%s)", plan, name, failure.code)
            await self._abort(ledger)
            raise ServiceError(
                "forget-not-done", f"nothing was forgotten: {prepared.why()}", runbook="forget"
            )
        counts: dict[str, int] = {}
        for name in self.parts:
            answer = prepared.answers[name]
            assert isinstance(answer, ForgetPrepared)
            for holding in answer.holdings:
                counts[holding.store] = counts.get(holding.store, 0) + holding.count
        record = ForgetRecord(
            counts=counts, digest=self.audit.forget_digest(text), surface=surface, session=session
        )
        committed = msgspec.structs.replace(ledger, state="committed", record=record)
        try:
            await self._write(committed)  # the commit point: from here the forget is decided
        except OSError as exc:
            log.warning("forget %s: the ledger could not be committed; aborting it", plan)
            await self._abort(ledger)
            raise ServiceError(
                "audit-unwritable",
                f"nothing was forgotten: brokerd cannot write {self.directory}: "
                f"{exc.strerror or exc}",
            ) from None
        log.info("forget %s: decided; %s", plan, _counted(counts))
        ledger = await self._record(committed)
        ledger, applied = await self._apply_round(ledger, text)
        holdings: list[Holding] = []
        conflicts: list[str] = []
        for name in self.parts:
            answer = applied.answers.get(name) or prepared.answers[name]
            assert isinstance(answer, ForgetApplied | ForgetPrepared)
            holdings += answer.holdings
            if isinstance(answer, ForgetApplied):
                conflicts += [f"{name}: {conflict}" for conflict in answer.conflicts]
        pending = ledger.unfinished
        if not isinstance(ledger.record, msgspec.UnsetType) and AUDIT_PART not in pending:
            pending.append(AUDIT_PART)  # its own record of the forget is still to be written
        if pending:
            nursery = self._nursery
            assert nursery is not None
            nursery.start_soon(self._finish, ledger)
        else:
            await self._done(ledger)
        return Forgotten(plan=plan, holdings=holdings, pending=pending, conflicts=conflicts)

    async def _prepare(self, plan: str, text: str) -> _Round:
        """Every part's plan; a part that went away (died, restarting) is asked again.

        A role `bxctl up` or systemd restarts is back within seconds, and the owner is
        still waiting with the text in hand: a forget cut off by a death before its commit
        point is carried on once the role is back, not dropped. A part that answered with
        an error, or is still gone after `PREPARE_WAIT_S`, fails the forget: nothing changed.
        """
        prepared = await self._round(lambda part: part.prepare(plan, text))
        backoff = self._backoff()
        with trio.move_on_after(PREPARE_WAIT_S):
            while prepared.failures and all(
                failure.code in _GONE for failure in prepared.failures.values()
            ):
                log.info(
                    "forget %s: %s went away while preparing; asking again",
                    plan,
                    ", ".join(prepared.failures),
                )
                await trio.sleep(backoff.next())
                again = await self._round(
                    lambda part: part.prepare(plan, text), names=list(prepared.failures)
                )
                prepared.answers.update(again.answers)
                prepared.failures = again.failures
        return prepared

    async def _round(
        self, ask: Callable[[Part], Awaitable[object]], names: Iterable[str] | None = None
    ) -> _Round:
        """Ask every part (or those `names`) side by side; each answer or failure, by part."""
        found = _Round()

        async def one(part: Part) -> None:
            try:
                found.answers[part.name] = await ask(part)
            except PartFailed as exc:
                found.failures[part.name] = exc
            except Exception:
                # A bug must not end the task that carries a decided forget to its end.
                log.exception("forget: %s failed inside brokerd", part.name)
                found.failures[part.name] = PartFailed(
                    part.name, "internal", f"{part.name} failed inside brokerd; its log says why"
                )

        async with trio.open_nursery() as nursery:
            for name in self.parts if names is None else names:
                nursery.start_soon(one, self.parts[name])
        return found

    async def _record(self, ledger: Ledger) -> Ledger:
        """Append the forget's audit record if it is still to be; the ledger after."""
        if isinstance(ledger.record, msgspec.UnsetType):
            return ledger
        record = ledger.record
        try:
            await self.audit.append_forget(
                plan=ledger.plan,
                counts=record.counts,
                digest=record.digest,
                surface=record.surface,
                session=record.session,
            )
        except OSError as exc:
            log.warning(
                "forget %s: its audit record could not be written (%s); trying again",
                ledger.plan,
                exc.strerror or type(exc).__name__,
            )
            return ledger
        recorded = msgspec.structs.replace(ledger, record=msgspec.UNSET)
        await self._keep(recorded)
        return recorded

    async def _apply_round(self, ledger: Ledger, text: str | None) -> tuple[Ledger, _Round]:
        """Apply every unfinished part once, in order; the ledger with those done.

        One after another, in the parts' order (memoryd, loopd, the audit): once memoryd
        has taken the entries out of the memory files, no session opened from then on
        starts with the text in its baseline, so loopd's re-plan, which comes after, sees
        every session that could hold it.
        """
        plan = ledger.plan
        applied = _Round()
        for name in ledger.unfinished:
            one = await self._round(lambda part: part.apply(plan, text), [name])
            applied.answers.update(one.answers)
            applied.failures.update(one.failures)
        for name in ledger.unfinished:
            answer = applied.answers.get(name)
            if isinstance(answer, ForgetApplied):
                ledger = ledger.finished(name)
                log.info(
                    "forget %s: %s applied: %s%s",
                    ledger.plan,
                    name,
                    _counted({h.store: h.count for h in answer.holdings}),
                    f", {len(answer.conflicts)} conflicts" if answer.conflicts else "",
                )
            elif (failure := applied.failures.get(name)) is not None:
                log.warning(
                    "forget %s: %s did not apply (%s); it will be asked again",
                    ledger.plan,
                    name,
                    failure.code,
                )
        await self._keep(ledger)
        return ledger, applied

    async def _abort(self, ledger: Ledger) -> None:
        """Tell every part to drop its plan; the ledger goes once all did, else later."""
        ledger = await self._abort_round(ledger)
        if ledger.unfinished:
            nursery = self._nursery
            assert nursery is not None
            nursery.start_soon(self._finish, ledger)
        else:
            await self._done(ledger)

    async def _abort_round(self, ledger: Ledger) -> Ledger:
        plan = ledger.plan
        aborted = await self._round(lambda part: part.abort(plan), ledger.unfinished)
        for name in ledger.unfinished:
            if name in aborted.answers:
                ledger = ledger.finished(name)
        if ledger.unfinished:
            await self._keep(ledger)
        return ledger

    async def _finish(self, ledger: Ledger) -> None:
        """Carry a ledger to its end without the text, trying again with a backoff."""
        backoff = self._backoff()
        while True:
            match ledger.state:
                case "committed":
                    ledger = await self._record(ledger)
                    if ledger.unfinished:
                        ledger, _ = await self._apply_round(ledger, None)
                case "preparing":
                    ledger = await self._abort_round(ledger)
                case _:
                    assert_never(ledger.state)
            if not ledger.unfinished and isinstance(ledger.record, msgspec.UnsetType):
                await self._done(ledger)
                return
            with trio.move_on_after(backoff.next()):
                await self._shutdown.wait()
            if self._shutdown.is_set():
                log.info(
                    "forget %s: %s left to finish at the next start",
                    ledger.plan,
                    ", ".join(ledger.unfinished) or "its audit record",
                )
                return

    async def _done(self, ledger: Ledger) -> None:
        try:
            await trio.to_thread.run_sync(_remove_ledger, self.directory, ledger.plan)
        except OSError as exc:
            log.warning("forget %s: its ledger could not be removed: %s", ledger.plan, exc)
        what = "finished everywhere" if ledger.state == "committed" else "aborted everywhere"
        log.info("forget %s: %s", ledger.plan, what)
        event = self._unfinished.pop(ledger.plan, None)
        if event is not None:
            event.set()

    async def _write(self, ledger: Ledger) -> None:
        await trio.to_thread.run_sync(_write_ledger, self.directory, ledger)

    async def _keep(self, ledger: Ledger) -> None:
        """Write a ledger's progress; a failure only means a part is asked once more."""
        try:
            await self._write(ledger)
        except OSError as exc:
            log.warning("forget %s: its ledger could not be updated: %s", ledger.plan, exc)


def _check(text: str) -> str:
    """The text every part is asked about: stripped, as `forget_problem` judged it."""
    problem = proto.forget_problem(text)
    if problem is not None:
        raise ServiceError("bad-forget", problem, runbook="forget")
    return text.strip()
