"""The server's rate limiter: GCRA per token, with the headers the real one sends.

From `server/channels/app/ratelimit.go`: RateLimitHandler wraps every route, so it runs before
authentication; the key is the request's token (VaryByUser) or else its address; the headers
come from throttled's RateLimitResult (`X-RateLimit-Limit` = MaxBurst + 1,
`X-RateLimit-Remaining`, `X-RateLimit-Reset` and, when refused, `Retry-After`, both in whole
seconds rounded up); a refused request gets `http.Error(w, "limit exceeded", 429)`: a plain
text body, not an AppError. A "storm" refuses the next N requests whatever the quota.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field


@dataclass
class Verdict:
    """Whether to refuse the request, and the headers to send either way."""

    limited: bool
    headers: list[tuple[bytes, bytes]]


@dataclass
class RateLimiter:
    """throttled's GCRARateLimiter with a memory store, plus a storm the test can raise."""

    per_sec: float | None = None
    max_burst: int = 0
    storm: int = 0
    _tat: dict[str, float] = field(default_factory=dict)

    def check(self, key: str) -> Verdict:
        """Count one request for `key`."""
        if self.storm > 0:
            self.storm -= 1
            limit = self.max_burst + 1 if self.per_sec else 1
            return Verdict(True, _headers(limit, 0, 1.0, 1.0))
        if not self.per_sec:
            return Verdict(False, [])
        now = time.monotonic()
        interval = 1.0 / self.per_sec
        tolerance = interval * (self.max_burst + 1)
        tat = max(self._tat.get(key, now), now)
        new_tat = tat + interval
        diff = now - (new_tat - tolerance)
        limit = self.max_burst + 1
        if diff < 0:
            return Verdict(True, _headers(limit, 0, tat - now, -diff))
        self._tat[key] = new_tat
        return Verdict(
            False, _headers(limit, math.floor(diff / interval + 1e-9), new_tat - now, None)
        )


def _headers(
    limit: int, remaining: int, reset_s: float, retry_after_s: float | None
) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"x-ratelimit-limit", str(limit).encode()),
        (b"x-ratelimit-remaining", str(remaining).encode()),
        (b"x-ratelimit-reset", str(math.ceil(reset_s)).encode()),
    ]
    if retry_after_s is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(retry_after_s))).encode()))
    return headers
