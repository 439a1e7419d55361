"""`bxctl up`'s restart rule, alone: when a role is started again, and when it is given up on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import proto
from bxctl._restarts import (
    FIRST_PAUSE_S,
    LONGEST_PAUSE_S,
    QUICK_DEATH_S,
    RESTART_LIMIT,
    Died,
    End,
    FailedStart,
    GiveUp,
    Restart,
    RestartPolicy,
)

POLICY = RestartPolicy()


@st.composite
def policies(draw: st.DrawFn) -> RestartPolicy:
    first = draw(st.floats(0.001, 60))
    return RestartPolicy(
        limit=draw(st.integers(1, 10)),
        quick_death_s=draw(st.floats(0.001, 600)),
        first_pause_s=first,
        longest_pause_s=draw(st.floats(first, 600)),
    )


exit_codes = st.integers(-64, 255).filter(lambda code: code != proto.NEEDS_OWNER_EXIT)


def quick_ends(
    policy: RestartPolicy, codes: st.SearchStrategy[int] = exit_codes
) -> st.SearchStrategy[End]:
    """A failed start (however long it took), or a death within `quick_death_s` of starting."""
    return st.one_of(
        st.builds(FailedStart, exit_code=codes, report=st.just("brokerd did not start")),
        st.builds(
            Died,
            ran_s=st.floats(0, policy.quick_death_s, exclude_max=True),
            exit_code=codes,
            report=st.just("brokerd died"),
        ),
    )


def healthy_end(
    policy: RestartPolicy, codes: st.SearchStrategy[int] = exit_codes
) -> st.SearchStrategy[End]:
    return st.builds(
        Died,
        ran_s=st.floats(policy.quick_death_s, 1e9),
        exit_code=codes,
        report=st.just("brokerd died after a good while"),
    )


def any_ends(policy: RestartPolicy) -> st.SearchStrategy[list[End]]:
    codes = st.integers(-64, 255)
    return st.lists(st.one_of(quick_ends(policy, codes), healthy_end(policy, codes)), max_size=30)


@given(st.data())
def test_quick_ends_in_a_row_are_given_up_on_at_the_limit(data: st.DataObject) -> None:
    policy = data.draw(policies())
    history = data.draw(st.one_of(st.just([]), healthy_end(policy).map(lambda end: [end])))
    streak = data.draw(st.lists(quick_ends(policy), min_size=policy.limit, max_size=policy.limit))
    steps = [policy.next_step([*history, *streak[: n + 1]]) for n in range(policy.limit)]
    assert all(isinstance(step, Restart) for step in steps[:-1])
    assert isinstance(steps[-1], GiveUp)
    assert steps[-1].why.startswith(f"it died {policy.limit} times in a row within ")


@given(st.data())
def test_whatever_came_before_limit_quick_ends_are_given_up_on(data: st.DataObject) -> None:
    # issue 30: failed starts were waited on as the run before them, forever
    policy = data.draw(policies())
    history = data.draw(any_ends(policy))
    streak = data.draw(st.lists(quick_ends(policy), min_size=policy.limit, max_size=policy.limit))
    steps = [policy.next_step([*history, *streak[: n + 1]]) for n in range(policy.limit)]
    assert any(isinstance(step, GiveUp) for step in steps)


@given(st.data())
def test_an_exit_78_is_never_restarted_wherever_it_happens(data: st.DataObject) -> None:
    policy = data.draw(policies())
    history = data.draw(any_ends(policy))
    needs_owner = st.just(proto.NEEDS_OWNER_EXIT)
    last = data.draw(st.one_of(quick_ends(policy, needs_owner), healthy_end(policy, needs_owner)))
    step = policy.next_step([*history, last])
    assert step == GiveUp(
        why="it waits for you to fix that, and is not started again until the next `bxctl up`"
    )


@given(st.data())
def test_a_pause_is_never_shorter_than_the_first_nor_longer_than_the_longest(
    data: st.DataObject,
) -> None:
    policy = data.draw(policies())
    history = data.draw(any_ends(policy).filter(bool))
    step = policy.next_step(history)
    if isinstance(step, Restart):
        assert policy.first_pause_s <= step.pause_s <= policy.longest_pause_s


@given(st.data())
def test_a_role_that_ran_a_good_while_starts_over_with_the_first_pause(
    data: st.DataObject,
) -> None:
    policy = data.draw(policies())
    history = data.draw(any_ends(policy))
    step = policy.next_step([*history, data.draw(healthy_end(policy))])
    assert step == Restart(pause_s=policy.first_pause_s)  # whatever came before


@given(st.data())
def test_the_pauses_of_a_streak_double_exactly_up_to_the_longest(data: st.DataObject) -> None:
    policy = data.draw(policies())
    history = data.draw(st.one_of(st.just([]), healthy_end(policy).map(lambda end: [end])))
    streak = data.draw(
        st.lists(quick_ends(policy), min_size=policy.limit - 1, max_size=policy.limit - 1)
    )
    backoff = proto.Backoff(policy.first_pause_s, policy.longest_pause_s, jitter=False)
    for n in range(len(streak)):
        assert policy.next_step([*history, *streak[: n + 1]]) == Restart(pause_s=backoff.next())


@given(st.data())
def test_only_the_last_ends_up_to_the_limit_matter(data: st.DataObject) -> None:
    policy = data.draw(policies())
    history = data.draw(any_ends(policy).filter(bool))
    assert policy.next_step(history) == policy.next_step(history[-policy.limit :])


def test_the_defaults_are_systemds_start_limit_and_a_second_doubling_to_half_a_minute() -> None:
    assert (RESTART_LIMIT, QUICK_DEATH_S, FIRST_PAUSE_S, LONGEST_PAUSE_S) == (5, 10, 1, 30)
    quick = FailedStart(exit_code=1, report="x")
    pauses = [POLICY.next_step([quick] * n) for n in range(1, 6)]
    assert pauses == [Restart(pause_s=p) for p in (1, 2, 4, 8)] + [
        GiveUp(
            why="it died 5 times in a row within 10 s of starting (or before it was ready), "
            "so it is not started again"
        )
    ]


def test_a_failed_start_counts_however_long_it_waited() -> None:
    # a role that never says READY is killed after READY_DEADLINE_S (60 s): still quick
    hung = FailedStart(exit_code=-9, report="brokerd did not report ready within 60 s")
    assert isinstance(POLICY.next_step([hung] * RESTART_LIMIT), GiveUp)


def test_a_policy_that_cannot_work_is_refused() -> None:
    with pytest.raises(ValueError, match="need a limit of at least 1, got 0"):
        RestartPolicy(limit=0)
    with pytest.raises(ValueError, match="need 0 < first_s <= longest_s, got 2 and 1"):
        RestartPolicy(first_pause_s=2, longest_pause_s=1)
    with pytest.raises(ValueError, match="no end to act on"):
        POLICY.next_step([])
