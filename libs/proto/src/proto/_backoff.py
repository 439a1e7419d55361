"""The one backoff: pauses that double from a first one to a longest one, with jitter.

Used wherever boxmaker tries something again (the bridge reconnecting to Mattermost, a
REST call, a turn whose loopd is away; `bxctl up` restarting a role). The pause is
chosen here and waited by the caller (`await trio.sleep(backoff.next())`), so this
module needs no event loop and a test drives it with plain calls.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """Pauses of `first_s`, then twice as long each time, up to `longest_s`.

    With `jitter`, each pause is drawn from its upper half (`[p/2, p]`), so that many
    clients kept out by one failure do not all come back at once. `reset` after a
    success (or a run that lasted a good while) starts again from `first_s`.
    """

    def __init__(
        self,
        first_s: float = 1.0,
        longest_s: float = 60.0,
        *,
        jitter: bool = True,
        uniform: Callable[[float, float], float] = random.uniform,
    ) -> None:
        if not 0 < first_s <= longest_s:
            raise ValueError(f"need 0 < first_s <= longest_s, got {first_s} and {longest_s}")
        self.first_s = first_s
        self.longest_s = longest_s
        self.jitter = jitter
        self._uniform = uniform
        self._pause = first_s

    @property
    def pause_s(self) -> float:
        """The pause the next `next()` is drawn from (before jitter)."""
        return self._pause

    def next(self) -> float:
        """The pause to wait now; the one after it is twice as long (up to `longest_s`)."""
        pause = self._pause
        self._pause = min(pause * 2, self.longest_s)
        return self._uniform(pause / 2, pause) if self.jitter else pause

    def reset(self) -> None:
        """Start again from `first_s`."""
        self._pause = self.first_s
