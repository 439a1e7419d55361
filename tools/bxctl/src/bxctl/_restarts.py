"""When `bxctl up` starts a role again, and when it gives up: a rule with no clock and no I/O.

The supervisor (`_up.py`) keeps how each of a role's runs ended, oldest first, and asks
`RestartPolicy.next_step` what to do after the latest. The rule keeps these:

- Every end counts. A role that died after it said READY=1, and a start that failed
  before it did (it died, or was killed for staying silent), are ends alike: a role that
  cannot start is given up on as surely as one that keeps crashing. (A failed start that
  was waited on as a death of the run before it restarted forever: issue 30.)
- An exit `proto.NEEDS_OWNER_EXIT` (78) is never restarted, wherever it happens: the
  role stopped for something only the owner can fix (a refused token, a bad config).
- A run that lasted `quick_death_s` or more was healthy: its end starts a new streak,
  with the first pause again.
- `limit` ends in a row, each a failed start or a death within `quick_death_s` of
  starting, are a crash loop (systemd's start limit: 5 in 10 s): given up on. Before
  that the pause is `proto.Backoff`'s, doubling from `first_pause_s` up to
  `longest_pause_s`, without jitter: one supervisor restarts one role, so there is no
  crowd to spread, and the "again in N s" it prints is the pause it waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TypeAlias, assert_never

import proto

__all__ = [
    "FIRST_PAUSE_S",
    "LONGEST_PAUSE_S",
    "QUICK_DEATH_S",
    "RESTART_LIMIT",
    "Died",
    "End",
    "FailedStart",
    "GiveUp",
    "Restart",
    "RestartPolicy",
    "Step",
]

RESTART_LIMIT = 5
QUICK_DEATH_S = 10.0
FIRST_PAUSE_S = 1.0
LONGEST_PAUSE_S = 30.0


@dataclass(frozen=True, kw_only=True)
class Died:
    """The role said it was ready, ran for `ran_s`, then ended with `exit_code`."""

    ran_s: float
    exit_code: int
    report: str
    """What bxctl says of it: `loopd exited with code 3 (its last error line)`."""


@dataclass(frozen=True, kw_only=True)
class FailedStart:
    """The role ended before it said it was ready, or was killed for staying silent."""

    exit_code: int
    """Its exit code; negative for a signal (SIGKILL when bxctl stopped waiting)."""
    report: str
    """What bxctl says of it: `loopd did not report ready within 60 s`."""


End: TypeAlias = Died | FailedStart


@dataclass(frozen=True, kw_only=True)
class Restart:
    """Start the role again after `pause_s`."""

    pause_s: float


@dataclass(frozen=True, kw_only=True)
class GiveUp:
    """Do not start the role again (until the next `bxctl up`)."""

    why: str
    """A clause for after the end's report: `it died 5 times in a row …`."""


Step: TypeAlias = Restart | GiveUp


@dataclass(frozen=True, kw_only=True)
class RestartPolicy:
    """How many quick ends make a crash loop, what is quick, and the pauses between."""

    limit: int = RESTART_LIMIT
    quick_death_s: float = QUICK_DEATH_S
    first_pause_s: float = FIRST_PAUSE_S
    longest_pause_s: float = LONGEST_PAUSE_S

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"need a limit of at least 1, got {self.limit}")
        proto.Backoff(self.first_pause_s, self.longest_pause_s)  # refuses bad pauses

    def next_step(self, ends: Sequence[End]) -> Step:
        """What to do after the last of `ends`, a role's ends so far (oldest first).

        Only the last `limit` ends matter: a caller may keep no more.
        """
        if not ends:
            raise ValueError("no end to act on: a role is restarted only after it ends")
        if ends[-1].exit_code == proto.NEEDS_OWNER_EXIT:
            return GiveUp(
                why="it waits for you to fix that, and is not started again until the next "
                "`bxctl up`"
            )
        streak = self.streak(ends)
        if streak >= self.limit:
            return GiveUp(
                why=f"it died {streak} times in a row within {self.quick_death_s:g} s of "
                "starting (or before it was ready), so it is not started again"
            )
        backoff = proto.Backoff(self.first_pause_s, self.longest_pause_s, jitter=False)
        for _ in range(streak - 1):
            backoff.next()
        return Restart(pause_s=backoff.next())

    def streak(self, ends: Sequence[End]) -> int:
        """How many of the last `ends` in a row were quick (at most `limit`)."""
        count = 0
        for end in islice(reversed(ends), self.limit):
            match end:
                case FailedStart():
                    count += 1
                case Died(ran_s=ran_s) if ran_s < self.quick_death_s:
                    count += 1
                case Died():
                    break  # a healthy run: the streak starts after it
                case _:
                    assert_never(end)
        return count
