"""One store's part of a forget, written once: memoryd, loopd and brokerd's audit drive it.

brokerd coordinates a forget as a two-phase commit (prepare everywhere, then decide) and
never keeps the text on disk. Each part answers four requests on its own store, and
`decide`, a pure function, says what each request does to the part's plan, by the plan's
state on disk and nothing else (never its age, never a clock):

| request    | none         | prepared      | committed     | ended: applied | ended: aborted |
|------------|--------------|---------------|---------------|----------------|----------------|
| prepare(t) | plan         | plan again    | as it is      | refused        | refused        |
| apply(t)   | plan, apply  | replan, apply | replan, apply | as it ended    | refused        |
| apply()    | **refused**  | apply         | apply         | as it ended    | refused        |
| abort      | end: aborted | end: aborted  | refused       | refused        | as it ended    |

"apply" is: apply, verify, then end (a line in `ended.jsonl`, the plan file removed).
So a prepared plan waits for brokerd's word however long that takes; only brokerd's abort
ends it, and an abort that comes before its prepare still bars that prepare. A part that
finished says so again when asked again, and one asked to finish a plan it never heard
of (its plan lost) says that, never "done". At start (`recover`) a part finishes its
committed plans, without the text, before it serves anything that could read them.

`ForgetPart` is the driver: it reads the state, runs `decide`'s steps through the role's
`ForgetStore` (which knows its own files: plan, apply, verify), and answers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec
import trio

from ._connection import ServiceError
from ._forget import forget_problem
from ._forget_plan import Ended, ForgetFiles, ForgetPlan, is_plan_id
from ._messages import (
    ForgetAbort,
    ForgetApplied,
    ForgetApply,
    ForgetLook,
    ForgetLooked,
    ForgetPrepare,
    ForgetPrepared,
    Holding,
    Message,
    Ok,
)

__all__ = [
    "PLAN_DIR",
    "ForgetPart",
    "ForgetStore",
    "Keep",
    "PartState",
    "Refuse",
    "Step",
    "decide",
    "forget_text",
]

log = logging.getLogger("proto.forget")

PLAN_DIR = ".forget"
"""Each part's directory of plans, inside the store it owns."""

S = TypeVar("S")


def forget_text(text: str) -> str:
    """The text to forget, stripped; every role's one check of it.

    Raises:
        ServiceError: `bad-forget`, with the sentence that says why it cannot be.
    """
    problem = forget_problem(text)
    if problem is not None:
        raise ServiceError("bad-forget", problem, runbook="forget")
    return text.strip()


class Refuse(msgspec.Struct, frozen=True):
    """Answer with an error; change nothing."""

    code: str
    message: str


Step = (
    Literal["plan: prepared", "plan: committed", "commit", "apply", "end: applied"]
    | Literal["end: aborted", "answer"]
    | Refuse
)
"""`plan: <stage>`: plan from the text and the store as it is, written at that stage;
`commit`: the stored plan written committed; `apply`: apply it, then verify it; `end`:
the line that says how it ended, the plan file removed; `answer`: what the plan (or its
end) says."""
PartState = ForgetPlan[Any] | Ended | None
"""What a part has of a plan: the plan (prepared or committed), how it ended, or nothing."""
PartRequest = ForgetPrepare | ForgetApply | ForgetAbort


def decide(request: PartRequest, state: PartState, *, part: str) -> tuple[Step, ...]:
    """What `request` does, given the part's `state` of its plan (the table above)."""
    plan = request.plan
    aborted = Refuse("forget-aborted", f"forget {plan} was aborted in {part}; it cannot go on")
    match request, state:
        case ForgetPrepare(), None | ForgetPlan(stage="prepared"):
            return ("plan: prepared", "answer")
        case ForgetPrepare(), ForgetPlan(stage="committed"):
            return ("answer",)
        case ForgetPrepare(), Ended(end="applied"):
            return (Refuse("forget-ended", f"forget {plan} has ended in {part} already"),)
        case ForgetPrepare() | ForgetApply(), Ended(end="aborted"):
            return (aborted,)
        case ForgetApply(text=str()), None | ForgetPlan():
            return ("plan: committed", "apply", "end: applied", "answer")
        case ForgetApply(text=None), ForgetPlan(stage="prepared"):
            return ("commit", "apply", "end: applied", "answer")
        case ForgetApply(text=None), ForgetPlan(stage="committed"):
            return ("apply", "end: applied", "answer")
        case ForgetApply(text=None), None:
            unknown = (
                f"{part} has no plan for forget {plan}: it never prepared it, or its plan was "
                "lost; what it holds of the text stays until you forget the text again"
            )
            return (Refuse("forget-unknown", unknown),)
        case ForgetApply(), Ended(end="applied"):
            return ("answer",)
        case ForgetAbort(), None | ForgetPlan(stage="prepared"):
            return ("end: aborted", "answer")
        case ForgetAbort(), ForgetPlan(stage="committed") | Ended(end="applied"):
            decided = f"forget {plan} is decided in {part}: it only finishes"
            return (Refuse("forget-decided", decided),)
        case ForgetAbort(), Ended(end="aborted"):
            return ("answer",)
    raise AssertionError(f"no step for {request!r} in {state!r}")  # pragma: no cover


Keep = Callable[[ForgetPlan[S]], Awaitable[None]]
"""Write a plan the store refined while applying it (before it changes what it adds)."""


class ForgetStore(Protocol[S]):
    """A role's stores as one part of a forget: what it holds, and how a text is taken out.

    Every method may raise `ServiceError` (a refusal for brokerd: the plan stays as it
    is) or `OSError` (a file that cannot be read or written: the same).
    """

    name: str
    """The part's name (`memoryd`, `loopd`, `brokerd`): in answers and refusals."""
    steps: type[S]
    """The type of the plan's `steps` (`NoSteps` for a store of file edits alone)."""
    root: Path
    """What the plan's file paths are relative to; its `.forget/` holds the plans."""

    def held(self) -> AbstractAsyncContextManager[None]:
        """Hold the store for one request: nothing else writes what the plan covers."""
        ...

    async def look(self, text: str) -> ForgetLooked:
        """What of the store holds `text`: writes nothing."""
        ...

    async def plan(self, plan: str, text: str, stored: ForgetPlan[S] | None) -> ForgetPlan[S]:
        """The plan that takes `text` out of the store as it is now (`stored`: the last one)."""
        ...

    async def apply(self, plan: ForgetPlan[S], text: str | None, keep: Keep[S]) -> list[str]:
        """Apply a committed plan, idempotently; the conflicts (places left as they were)."""
        ...

    async def verify(self, plan: ForgetPlan[S], text: str | None) -> list[str]:
        """Where the store is not as the plan says, or (given `text`) still holds it."""
        ...

    def holdings(self, counts: dict[str, int], plan: ForgetPlan[S] | None) -> list[Holding]:
        """A plan's counts as the owner reads them (`plan`, where it is still at hand)."""
        ...


class ForgetPart(Generic[S]):
    """A role's part of every forget: the four requests, and the recovery at start."""

    def __init__(self, store: ForgetStore[S]) -> None:
        self.store = store
        self.files = ForgetFiles(store.root / PLAN_DIR, store.steps)
        self._lock = trio.Lock()

    async def handle(self, request: ForgetLook | PartRequest) -> Message:
        """Answer one of brokerd's forget requests.

        Raises:
            ServiceError: refused (the table), a bad text or id, or a store that failed.
        """
        if isinstance(request, ForgetLook):
            return await self.store.look(forget_text(request.text))
        if not is_plan_id(request.plan):
            raise ServiceError("bad-forget", f"not a forget id: {request.plan!r}")
        given = request.text if isinstance(request, ForgetPrepare | ForgetApply) else None
        text = None if given is None else forget_text(given)
        async with self._lock, self.store.held():
            try:
                return await self._run(request, await self._state(request.plan), text)
            except OSError as exc:
                log.warning("forget %s in %s: %s", request.plan, self.store.name, exc)
                why = f"{self.store.name} could not do its part: {exc.strerror or exc}"
                raise ServiceError("forget-failed", why, runbook="forget") from None

    def committed(self) -> list[ForgetPlan[S]]:
        """The committed plans that have not ended (blocking): what `recover` finishes.

        The file of a plan that ended is removed (a crash came between the two); a damaged
        plan is logged and left for the owner.
        """
        found = []
        for plan in self.files.plans.ids():
            if self.files.ended(plan) is not None:
                self.files.plans.remove(plan)
                continue
            try:
                stored = _read(self.files, plan)
            except ValueError as exc:
                log.error("forget plan %s is damaged, left as it is: %s", plan, exc)
                continue
            if stored is not None and stored.stage == "committed":
                found.append(stored)
        return found

    async def recover(self) -> list[str]:
        """Finish every committed plan, without the text; the ids finished. At start.

        A prepared plan is left for brokerd's word. A plan that failed is logged and left:
        brokerd asks again.
        """
        finished: list[str] = []
        async with self._lock, self.store.held():
            for plan in await trio.to_thread.run_sync(self.committed):
                try:
                    await self._run(ForgetApply(plan=plan.plan), plan, None)
                except (ServiceError, OSError) as exc:
                    log.warning(
                        "forget %s could not finish in %s: %s", plan.plan, self.store.name, exc
                    )
                    continue
                log.info("finished forget %s in %s at start", plan.plan, self.store.name)
                finished.append(plan.plan)
        return finished

    async def _state(self, plan: str) -> PartState:
        def read() -> PartState:
            ended = self.files.ended(plan)
            if ended is not None:
                self.files.plans.remove(plan)  # a crash between the end and the removal
                return ended
            return _read(self.files, plan)

        try:
            return await trio.to_thread.run_sync(read)
        except ValueError as exc:  # a damaged plan: left for the owner to look at
            raise ServiceError("forget-damaged", str(exc), runbook="forget") from None

    async def _run(self, request: PartRequest, state: PartState, text: str | None) -> Message:
        store, files = self.store, self.files
        plan = state if isinstance(state, ForgetPlan) else None
        ended = state if isinstance(state, Ended) else None
        conflicts: list[str] = []

        async def write(written: ForgetPlan[S]) -> None:
            await trio.to_thread.run_sync(files.plans.write, written.plan, written)

        for step in decide(request, state, part=store.name):
            if isinstance(step, Refuse):
                raise ServiceError(step.code, step.message, runbook="forget")
            if step.startswith("plan: ") or step == "commit":
                if step != "commit":
                    assert text is not None
                    plan = await store.plan(request.plan, text, plan)
                assert plan is not None
                stage = "prepared" if step == "plan: prepared" else "committed"
                plan = msgspec.structs.replace(plan, stage=stage)
                await write(plan)
            elif step == "apply":
                assert plan is not None
                conflicts += await store.apply(plan, text, write)
                plan = await trio.to_thread.run_sync(_read, files, request.plan) or plan
                conflicts += await store.verify(plan, text)
            elif step.startswith("end: "):
                end: Literal["applied", "aborted"] = (
                    "applied" if step == "end: applied" else "aborted"
                )
                counts = plan.counts if plan is not None else {}
                ended = await trio.to_thread.run_sync(files.end, request.plan, end, counts)
        counts = plan.counts if plan is not None else ended.counts if ended is not None else {}
        holdings = store.holdings(counts, plan)
        match request:
            case ForgetPrepare():
                return ForgetPrepared(plan=request.plan, holdings=holdings)
            case ForgetApply():
                for conflict in conflicts:
                    log.warning("forget %s in %s: %s", request.plan, store.name, conflict)
                again = plan is None  # it had ended before this request
                return ForgetApplied(
                    plan=request.plan, holdings=holdings, conflicts=conflicts, again=again
                )
            case _:
                return Ok()


def _read(files: ForgetFiles[S], plan: str) -> ForgetPlan[S] | None:
    """A part's plan, as it is on disk (one written before `stage` read as its stage)."""
    stored = files.plans.read(plan)
    if stored is not None and stored.committed:
        return msgspec.structs.replace(stored, stage="committed", committed=False)
    return stored
