"""proto.Backoff: pauses that double from first_s to longest_s, jittered into [p/2, p]."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import proto

_firsts = st.floats(min_value=1e-3, max_value=1e3)
_factors = st.floats(min_value=1.0, max_value=1e4)


def _expected(first_s: float, longest_s: float, n: int) -> list[float]:
    return [min(first_s * 2**i, longest_s) for i in range(n)]


def test_pauses_double_then_stay_at_the_longest() -> None:
    backoff = proto.Backoff(1.0, 60.0, jitter=False)
    assert [backoff.next() for _ in range(9)] == [1, 2, 4, 8, 16, 32, 60, 60, 60]


@given(first_s=_firsts, factor=_factors, n=st.integers(1, 40))
def test_without_jitter_the_pauses_are_exact(first_s: float, factor: float, n: int) -> None:
    longest_s = first_s * factor
    backoff = proto.Backoff(first_s, longest_s, jitter=False)
    pauses = [backoff.next() for _ in range(n)]
    assert pauses == _expected(first_s, longest_s, n)
    assert backoff.pause_s == min(first_s * 2**n, longest_s)


@given(first_s=_firsts, factor=_factors, n=st.integers(1, 40), seed=st.integers(0, 2**32))
def test_with_jitter_each_pause_is_in_the_upper_half(
    first_s: float, factor: float, n: int, seed: int
) -> None:
    longest_s = first_s * factor
    backoff = proto.Backoff(first_s, longest_s, uniform=random.Random(seed).uniform)
    for p in _expected(first_s, longest_s, n):
        assert p / 2 <= backoff.next() <= p


def test_jitter_draws_from_the_upper_half_of_each_pause() -> None:
    asked: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        asked.append((low, high))
        return low

    backoff = proto.Backoff(1.0, 4.0, uniform=uniform)
    assert [backoff.next() for _ in range(4)] == [0.5, 1.0, 2.0, 2.0]
    assert asked == [(0.5, 1.0), (1.0, 2.0), (2.0, 4.0), (2.0, 4.0)]


def test_jitter_is_on_by_default_and_spreads_the_pauses() -> None:
    backoff = proto.Backoff(8.0, 8.0)
    pauses = {backoff.next() for _ in range(50)}
    assert all(4.0 <= p <= 8.0 for p in pauses)
    assert len(pauses) > 1  # drawn, not fixed


@given(first_s=_firsts, factor=_factors, before=st.integers(0, 20), n=st.integers(1, 20))
def test_reset_starts_again_from_first(first_s: float, factor: float, before: int, n: int) -> None:
    longest_s = first_s * factor
    backoff = proto.Backoff(first_s, longest_s, jitter=False)
    for _ in range(before):
        backoff.next()
    backoff.reset()
    assert backoff.pause_s == first_s
    assert [backoff.next() for _ in range(n)] == _expected(first_s, longest_s, n)


@pytest.mark.parametrize(
    ("first_s", "longest_s"),
    [
        (0.0, 1.0),
        (-1.0, 1.0),
        (2.0, 1.0),
        (math.nan, 1.0),
        (1.0, math.nan),
        (-2.0, -1.0),
    ],
)
def test_bad_arguments_are_refused(first_s: float, longest_s: float) -> None:
    with pytest.raises(ValueError, match="need 0 < first_s <= longest_s"):
        proto.Backoff(first_s, longest_s)
