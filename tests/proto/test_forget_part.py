"""One part of a forget: the decision table, and the driver over a real store and real files.

The part is judged by its plan's state on disk and by nothing else: no age, no clock.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lines_store import Crash, LinesStore, holding_files

import proto
from proto._forget_part import PartState, Refuse, decide

SECRET = "ZEBRA-7731"
PLAN = "fg-abcdef123456"

PREPARED: proto.ForgetPlan[proto.NoSteps] = proto.ForgetPlan(plan=PLAN, stage="prepared")
COMMITTED: proto.ForgetPlan[proto.NoSteps] = proto.ForgetPlan(plan=PLAN, stage="committed")
APPLIED = proto.Ended(plan=PLAN, end="applied", time="2026-12-07T00:00:00Z")
ABORTED = proto.Ended(plan=PLAN, end="aborted", time="2026-12-07T00:00:00Z")
STATES: list[PartState] = [None, PREPARED, COMMITTED, APPLIED, ABORTED]
REQUESTS = [
    proto.ForgetPrepare(plan=PLAN, text=SECRET),
    proto.ForgetApply(plan=PLAN, text=SECRET),
    proto.ForgetApply(plan=PLAN),
    proto.ForgetAbort(plan=PLAN),
]


@pytest.mark.parametrize(("request_", "state"), list(itertools.product(REQUESTS, STATES)))
def test_the_table_keeps_a_decided_forget_and_never_says_done_unasked(
    request_: proto.ForgetPrepare | proto.ForgetApply | proto.ForgetAbort, state: PartState
) -> None:
    steps = decide(request_, state, part="memoryd")
    assert steps[-1] == "answer" or isinstance(steps[-1], Refuse)
    if any(isinstance(s, Refuse) for s in steps):
        assert len(steps) == 1  # a refusal changes nothing
    decided = state in (COMMITTED, APPLIED)
    if decided:
        assert "end: aborted" not in steps  # only a prepared plan is ever aborted
    if "end: applied" in steps:
        assert steps.index("apply") < steps.index("end: applied")
    if isinstance(request_, proto.ForgetApply) and request_.text is None and state is None:
        (refused,) = steps
        assert isinstance(refused, Refuse)
        assert refused.code == "forget-unknown"
    if isinstance(request_, proto.ForgetPrepare) and state == ABORTED:
        assert isinstance(steps[0], Refuse)  # an abort that came first bars the prepare
    if isinstance(request_, proto.ForgetApply) and state == ABORTED:
        assert isinstance(steps[0], Refuse)
    if isinstance(request_, proto.ForgetApply) and state == APPLIED:
        assert steps == ("answer",)  # finished before: said again, nothing redone
    if state == PREPARED and isinstance(request_, proto.ForgetApply) and request_.text is None:
        assert steps[:2] == ("commit", "apply")
    with_text = isinstance(request_, proto.ForgetApply) and request_.text is not None
    if with_text and state in (None, PREPARED, COMMITTED):  # with the text: planned again, now
        assert steps[0] == "plan: committed"


@pytest.fixture
def store(tmp_path: Path) -> LinesStore:
    store = LinesStore(tmp_path / "part", "memoryd", "journal")
    store.write({"text": f"my code is {SECRET}"}, {"text": "tea"}, {"text": SECRET.lower()})
    return store


async def test_prepared_then_applied_leaves_no_copy_and_an_ended_line(store: LinesStore) -> None:
    part = proto.ForgetPart(store)
    prepared = await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    assert prepared == proto.ForgetPrepared(
        plan=PLAN, holdings=[proto.Holding(store="journal", count=2, unit="lines")]
    )
    assert part.files.plans.read(PLAN) is not None
    assert store.log.read_bytes().count(b"ZEBRA") == 1  # nothing changed yet
    applied = await part.handle(proto.ForgetApply(plan=PLAN, text=SECRET))
    assert isinstance(applied, proto.ForgetApplied)
    assert (applied.conflicts, applied.again) == ([], False)
    assert holding_files(store.root, SECRET) == []
    assert part.files.plans.ids() == []
    assert part.files.ended(PLAN) is not None
    again = await part.handle(proto.ForgetApply(plan=PLAN))
    assert isinstance(again, proto.ForgetApplied)
    assert again.again
    assert again.holdings == applied.holdings


async def test_a_prepared_plan_waits_for_the_decision_however_old(store: LinesStore) -> None:
    part = proto.ForgetPart(store)
    await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    plan_file = part.files.plans.path(PLAN)
    a_week_ago = plan_file.stat().st_mtime - 7 * 86400
    os.utime(plan_file, (a_week_ago, a_week_ago))
    assert await proto.ForgetPart(store).recover() == []  # a start: it is left for brokerd
    assert part.files.plans.read(PLAN) == proto.ForgetPlan(
        plan=PLAN,
        stage="prepared",
        edits=part.files.plans.read(PLAN).edits,  # type: ignore[union-attr]
        counts={"journal": 2},
    )
    applied = await proto.ForgetPart(store).handle(proto.ForgetApply(plan=PLAN))
    assert isinstance(applied, proto.ForgetApplied)
    assert holding_files(store.root, SECRET) == []


async def test_an_apply_without_the_text_of_a_plan_never_made_is_refused(
    store: LinesStore,
) -> None:
    part = proto.ForgetPart(store)
    with pytest.raises(proto.ServiceError) as refused:
        await part.handle(proto.ForgetApply(plan=PLAN))
    assert refused.value.code == "forget-unknown"
    assert refused.value.runbook == "forget"
    assert store.log.read_bytes().count(b"ZEBRA") == 1


async def test_an_abort_before_its_prepare_bars_it(store: LinesStore) -> None:
    part = proto.ForgetPart(store)
    assert await part.handle(proto.ForgetAbort(plan=PLAN)) == proto.Ok()
    with pytest.raises(proto.ServiceError) as refused:
        await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    assert refused.value.code == "forget-aborted"
    assert part.files.plans.ids() == []
    assert await part.handle(proto.ForgetAbort(plan=PLAN)) == proto.Ok()  # said again


async def test_a_decided_plan_cannot_be_aborted(store: LinesStore) -> None:
    part = proto.ForgetPart(store)
    await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    store.crash_after = 1
    with pytest.raises(Crash):
        await part.handle(proto.ForgetApply(plan=PLAN, text=SECRET))
    with pytest.raises(proto.ServiceError) as refused:
        await part.handle(proto.ForgetAbort(plan=PLAN))
    assert refused.value.code == "forget-decided"
    store.crash_after = None
    assert await proto.ForgetPart(store).recover() == [PLAN]  # the next start finishes it
    assert holding_files(store.root, SECRET) == []


@pytest.mark.parametrize("text", ["", " x ", "a\nb", "x" * 1001])
async def test_a_text_that_cannot_be_forgotten_is_refused_with_one_code(
    store: LinesStore, text: str
) -> None:
    part = proto.ForgetPart(store)
    for request in (
        proto.ForgetLook(text=text),
        proto.ForgetPrepare(plan=PLAN, text=text),
        proto.ForgetApply(plan=PLAN, text=text),
    ):
        with pytest.raises(proto.ServiceError) as refused:
            await part.handle(request)
        assert refused.value.code == "bad-forget"
    assert part.files.plans.ids() == []


async def test_a_bad_id_is_refused_before_any_file(store: LinesStore) -> None:
    part = proto.ForgetPart(store)
    with pytest.raises(proto.ServiceError) as refused:
        await part.handle(proto.ForgetAbort(plan="../../etc/passwd"))
    assert refused.value.code == "bad-forget"
    assert not (store.root / ".forget").exists()


async def test_a_damaged_plan_is_refused_and_left_for_the_owner(store: LinesStore) -> None:
    part = proto.ForgetPart(store)
    await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    part.files.plans.path(PLAN).write_bytes(b'{"plan": "fg-abc')
    with pytest.raises(proto.ServiceError) as refused:
        await part.handle(proto.ForgetApply(plan=PLAN))
    assert refused.value.code == "forget-damaged"
    assert part.files.plans.path(PLAN).exists()


# -- any order, any kill -----------------------------------------------------------------

OPS = st.sampled_from(["prepare", "apply-text", "apply", "abort", "kill-in-apply", "restart"])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(OPS, max_size=8))
async def test_any_order_of_requests_and_kills_keeps_the_promises(
    tmp_path_factory: pytest.TempPathFactory, ops: list[str]
) -> None:
    """Whatever brokerd asks, in any order, and wherever the role dies, a part never says
    applied while its store holds the text, never applies an aborted forget, and never
    loses a decided one: a start finishes it."""
    store = LinesStore(tmp_path_factory.mktemp("part"), "memoryd", "journal")
    store.write({"text": f"my code is {SECRET}"}, {"text": "tea"}, {"text": SECRET.lower()})
    part = proto.ForgetPart(store)
    aborted = decided = False
    refusals = {"forget-unknown", "forget-aborted", "forget-decided", "forget-ended"}
    for op in ops:
        store.crash_after = None
        try:
            match op:
                case "prepare":
                    await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
                case "apply-text" | "apply" | "kill-in-apply":
                    store.crash_after = 1 if op == "kill-in-apply" else None
                    text = None if op == "apply" else SECRET
                    answer = await part.handle(proto.ForgetApply(plan=PLAN, text=text))
                    assert isinstance(answer, proto.ForgetApplied)
                    assert not aborted
                    assert holding_files(store.root, SECRET) == []
                    decided = True
                case "abort":
                    await part.handle(proto.ForgetAbort(plan=PLAN))
                    assert not decided
                    aborted = True
                case _:
                    part = proto.ForgetPart(store)
                    await part.recover()
        except proto.ServiceError as refused:
            codes = {refused.code}  # one of the table's refusals, never another failure
            assert codes <= refusals
        except Crash:
            assert not aborted
            decided = True  # committed before it died
        assert holding_files(store.root / ".forget", SECRET) == []  # no plan holds the text
    store.crash_after = None
    if decided:
        await proto.ForgetPart(store).recover()
        assert holding_files(store.root, SECRET) == []
        assert proto.ForgetPart(store).files.plans.ids() == []
    if aborted:
        assert store.log.read_bytes().count(b"ZEBRA") == 1
        assert proto.ForgetPart(store).files.plans.ids() == []
    data = store.log.read_bytes()
    assert [msgspec.json.decode(line) for line in data.splitlines()]  # every line whole


async def test_a_plan_whose_end_is_written_goes_at_the_next_start(store: LinesStore) -> None:
    part = proto.ForgetPart(store)
    await part.handle(proto.ForgetApply(plan=PLAN, text=SECRET))
    plan = proto.ForgetPlan[proto.NoSteps](plan=PLAN, stage="committed")
    part.files.plans.write(PLAN, plan)  # killed between the end's line and the removal
    assert await proto.ForgetPart(store).recover() == []
    assert part.files.plans.ids() == []


async def test_a_plan_committed_before_stages_existed_is_finished(store: LinesStore) -> None:
    part = proto.ForgetPart(store)
    await part.handle(proto.ForgetPrepare(plan=PLAN, text=SECRET))
    path = part.files.plans.path(PLAN)
    old = msgspec.json.decode(path.read_bytes())
    old.pop("stage", None)  # a prepared plan writes none either
    path.write_bytes(msgspec.json.encode({**old, "committed": True}))  # as the last version wrote
    assert await proto.ForgetPart(store).recover() == [PLAN]
    assert holding_files(store.root, SECRET) == []
