"""Pending approvals: decided, timed out, raced, abandoned by loopd, withdrawn."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import proto
from brokerd._approvals import (
    UNTRUSTED_SESSION,
    AlreadyDecided,
    Disconnected,
    OwnerApproves,
    OwnerDenies,
    PendingApprovals,
    Settled,
    ShutDown,
    TimedOut,
    UnknownApproval,
    describe,
    format_duration,
    page,
    why_not_run,
)
from proto import Class, Label, PendingApproval, Surface

HERE = Surface(via="bxctl", uid=1000)
YES = OwnerApproves(surface=HERE)
NO = OwnerDenies(surface=HERE)

CAP_S = 5


def pending(approvals: PendingApprovals, taint: Label | None = None) -> PendingApproval:
    return PendingApproval(
        id=approvals.new_id(),
        session="chat-abcdefghijklmnop",
        call_id="call_1",
        tool="memory",
        arguments="{}",
        taint=taint or Label(),
        time="2026-09-24T20:14:03Z",
    )


async def never() -> None:
    await trio.sleep_forever()


async def nothing() -> None:
    pass


async def wait_in_background(
    nursery: trio.Nursery,
    approvals: PendingApprovals,
    approval: PendingApproval,
    peer_gone: Callable[[], Awaitable[None]] = never,
) -> list[Settled]:
    outcomes: list[Settled] = []

    async def waiter() -> None:
        outcomes.append(
            await approvals.wait_settled(approval, announce=nothing, peer_gone=peer_gone)
        )

    nursery.start_soon(waiter)
    await trio.testing.wait_all_tasks_blocked()
    return outcomes


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(900, "15 min"), (60, "1 min"), (3600, "60 min"), (90, "90 s"), (0.5, "0.5 s")],
)
def test_durations(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


def test_ids_are_short_and_distinct() -> None:
    approvals = PendingApprovals(900)
    ids = {approvals.new_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 9 and i.startswith("ap-") for i in ids)


def test_the_log_line_shows_an_untrusted_session() -> None:
    approvals = PendingApprovals(900)
    shown = describe(pending(approvals, Label(class_=Class.private, untrusted=True)))
    assert shown.endswith(f"(taint private · untrusted); {UNTRUSTED_SESSION}")
    assert UNTRUSTED_SESSION == "this session has seen untrusted content"
    assert UNTRUSTED_SESSION not in describe(pending(approvals))


async def test_the_owner_approves(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    approvals = PendingApprovals(900)
    first, second = pending(approvals), pending(approvals)
    outcomes = await wait_in_background(nursery, approvals, first)
    await wait_in_background(nursery, approvals, second)
    assert approvals.pending() == [first, second]
    fine = OwnerApproves(surface=HERE, note="fine")
    approvals.settle_by_owner(first.id, fine)
    await trio.testing.wait_all_tasks_blocked()
    assert outcomes == [fine]
    assert approvals.pending() == [second]
    with pytest.raises(AlreadyDecided, match="already settled: the owner approved it"):
        approvals.settle_by_owner(first.id, NO)


async def test_the_owner_denies(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    approvals = PendingApprovals(900)
    approval = pending(approvals)
    outcomes = await wait_in_background(nursery, approvals, approval)
    not_now = OwnerDenies(surface=HERE, reason="not now")
    approvals.settle_by_owner(approval.id, not_now)
    await trio.testing.wait_all_tasks_blocked()
    assert outcomes == [not_now]
    assert why_not_run(not_now) == "the owner denied this call: not now"
    assert why_not_run(NO) == "the owner denied this call"
    with pytest.raises(AlreadyDecided, match="already settled: the owner denied it"):
        approvals.settle_by_owner(approval.id, YES)


async def test_an_unknown_id_is_an_error() -> None:
    with pytest.raises(UnknownApproval, match="no pending approval 'ap-nothing'"):
        PendingApprovals(900).settle_by_owner("ap-nothing", YES)


async def test_an_unknown_id_of_any_length_is_repeated_short() -> None:
    with pytest.raises(UnknownApproval) as error:
        PendingApprovals(900).settle_by_owner("x" * 100_000, YES)
    assert str(error.value) == f"no pending approval {'x' * 64!r}… (100,000 characters)"


async def test_the_timeout_denies(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    approvals = PendingApprovals(900)
    approval = pending(approvals)
    outcomes = await wait_in_background(nursery, approvals, approval)
    await trio.sleep(899)
    assert approvals.pending() == [approval]
    await trio.sleep(2)
    assert outcomes == [TimedOut(900)]
    assert why_not_run(TimedOut(900)) == "approval timed out after 15 min"
    assert approvals.pending() == []
    with pytest.raises(AlreadyDecided, match="already settled: it timed out"):
        approvals.settle_by_owner(approval.id, YES)


@pytest.mark.parametrize("offset", [-1e-9, 0.0, 1e-9])
def test_a_decision_racing_the_timeout_has_one_outcome(offset: float) -> None:
    # The owner decides just before, exactly at, or just after the deadline. Whichever
    # settles first wins, and the owner is told the truth: "ok" only if it counted.
    answered: list[str] = []
    outcomes: list[Settled] = []

    async def main() -> None:
        approvals = PendingApprovals(900)
        approval = pending(approvals)

        async def waiter() -> None:
            outcomes.append(
                await approvals.wait_settled(approval, announce=nothing, peer_gone=never)
            )

        async def owner() -> None:
            await trio.sleep_until(trio.current_time() + 900 + offset)
            try:
                approvals.settle_by_owner(approval.id, YES)
            except AlreadyDecided:
                answered.append("already decided")
            else:
                answered.append("ok")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            nursery.start_soon(owner)
        assert approvals.pending() == []

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(outcomes) == 1
    assert (answered, outcomes[0]) in ((["ok"], YES), (["already decided"], TimedOut(900)))
    if offset < 0:
        assert outcomes[0] == YES
    if offset > 0:
        assert answered == ["already decided"]


async def test_loopd_disconnecting_removes_the_approval(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    approvals = PendingApprovals(900)
    approval = pending(approvals)
    gone = trio.Event()
    outcomes = await wait_in_background(nursery, approvals, approval, peer_gone=gone.wait)
    assert approvals.pending() == [approval]
    gone.set()
    await trio.testing.wait_all_tasks_blocked()
    assert approvals.pending() == []
    assert outcomes == [Disconnected()]
    assert why_not_run(Disconnected()) == "loopd disconnected while the approval was pending"
    with pytest.raises(AlreadyDecided, match="its loopd disconnected"):
        approvals.settle_by_owner(approval.id, YES)


async def test_shutdown_withdraws_every_approval(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    approvals = PendingApprovals(900)
    waits = [await wait_in_background(nursery, approvals, pending(approvals)) for _ in range(3)]
    approvals.withdraw_all()
    await trio.testing.wait_all_tasks_blocked()
    assert approvals.pending() == []
    assert [o[0] for o in waits] == [ShutDown()] * 3
    late = await approvals.wait_settled(pending(approvals), announce=nothing, peer_gone=never)
    assert late == ShutDown()
    assert why_not_run(late) == (
        "the owner did not decide before boxmaker stopped; the call did not run"
    )


async def test_a_cancelled_wait_leaves_nothing_pending(
    autojump_clock: trio.testing.MockClock,
) -> None:
    approvals = PendingApprovals(900)
    approval = pending(approvals)
    with trio.move_on_after(10):
        await approvals.wait_settled(approval, announce=nothing, peer_gone=never)
    assert approvals.pending() == []


async def test_the_approval_is_listed_before_it_is_announced() -> None:
    approvals = PendingApprovals(900)
    approval = pending(approvals)
    listed: list[list[PendingApproval]] = []

    async def announce() -> None:
        listed.append(approvals.pending())
        raise proto.PeerGone  # loopd left before it heard of the approval

    with trio.fail_after(CAP_S):
        outcome = await approvals.wait_settled(approval, announce=announce, peer_gone=never)
    assert listed == [[approval]]
    assert outcome == Disconnected()
    assert approvals.pending() == []


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 700_000), max_size=6), st.integers(1, 4))
def test_a_page_of_approvals_fits_a_frame_and_names_the_rest(sizes: list[int], step: int) -> None:
    approvals = [
        PendingApproval(
            id=f"ap-{i:06d}",
            session="chat-abcdefghijklmnop",
            call_id="call_1",
            tool="memory",
            arguments='\u200b"' * (size // step),
            taint=Label(),
            time="2026-09-24T20:14:03Z",
        )
        for i, size in enumerate(sizes)
    ]
    rest = approvals
    while rest:
        shown, more = page(rest)
        assert shown  # at least one, always
        assert [a.id for a in shown] + more == [a.id for a in rest]  # oldest first, none lost
        if len(shown) > 1:
            frame = proto.encode_frame(proto.Approvals(pending=shown, more=more))
            assert len(frame) <= proto.MAX_FRAME
        rest = [a for a in rest if a.id in more]
    assert page([]) == ([], [])


FORGET = "Zébra-7731"
_spelled = st.sampled_from([FORGET, FORGET.lower(), FORGET.upper(), "zébra 7731", "7731"])
_plain = st.characters(blacklist_characters='{}[]"\\')  # text that is not itself JSON
_argument = st.one_of(
    st.text(_plain, max_size=12),
    st.tuples(st.text(_plain, max_size=6), _spelled, st.text(_plain, max_size=6)).map("".join),
)


@given(st.lists(st.tuples(_argument, st.booleans()), min_size=1, max_size=5))
async def test_a_forget_denies_exactly_the_approvals_whose_arguments_hold_it(
    calls: list[tuple[str, bool]],
) -> None:
    approvals = PendingApprovals(timeout_s=900)
    listed: list[PendingApproval] = []
    for value, nested in calls:
        # a string that is itself JSON (the model's nested arguments) is judged decoded,
        # not by its escapes (`\u00e9`)
        inner = json.dumps({"q": value}) if nested else value
        listed.append(
            msgspec.structs.replace(
                pending(approvals), arguments=json.dumps({"path": inner}, ensure_ascii=False)
            )
        )
    settled: dict[str, object] = {}
    async with trio.open_nursery() as nursery:
        for approval in listed:

            async def waiter(approval: PendingApproval = approval) -> None:
                settled[approval.id] = await approvals.wait_settled(
                    approval, announce=nothing, peer_gone=never
                )

            nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        denied = approvals.deny_holding(FORGET, NO)
        approvals.withdraw_all()
    holding = [
        approval.id
        for approval, (value, _) in zip(listed, calls, strict=True)
        if FORGET.lower() in value.lower()
    ]
    assert sorted(denied) == sorted(holding)
    assert {id_ for id_, how in settled.items() if how == NO} == set(holding)
