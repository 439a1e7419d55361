"""What the bridge sends to Mattermost: posts made once, edits, tried until taken.

Mattermost may be down, slow or rate limiting for a while; the bridge's posts wait and
are tried again (`proto.Backoff`), except when the token is refused (`TokenRefused`, a
stop for the owner) or the server refused that very request (`Rejected`, the caller's
to handle).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import trio

import proto

from ._api import Api, Post, ServerTrouble
from ._ledger import now_ms

__all__ = ["FIRST_PAUSE_S", "LONGEST_PAUSE_S", "Outage", "Outbound"]

log = logging.getLogger("mattermostd")

T = TypeVar("T")

FIRST_PAUSE_S = 1.0
LONGEST_PAUSE_S = 60.0


class Outbound:
    """The bridge's writes to one Mattermost server, as its bot."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.bot_id = ""
        """Set once the bridge knows who it is (`/users/me`)."""

    async def retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt` until Mattermost takes it; a refused token still stops the bridge."""
        backoff = proto.Backoff(FIRST_PAUSE_S, LONGEST_PAUSE_S)
        while True:
            try:
                return await attempt()
            except ServerTrouble as exc:
                wait = backoff.next()
                log.warning("Mattermost: %s; trying again in %.0f s", exc, wait)
                await trio.sleep(wait)

    async def own_posts(self, root: str) -> list[Post]:
        """The bridge's live posts in the thread of `root`, oldest first."""
        thread = await self.api.thread(root)
        return [p for p in thread.oldest_first() if p.user_id == self.bot_id and not p.delete_at]

    async def post(
        self,
        channel: str,
        root: str,
        message: str,
        *,
        props: Mapping[str, object] | None = None,
        same: Callable[[Post], bool] | None = None,
    ) -> Post:
        """Create a post in a thread, trying until Mattermost takes it, and only once.

        A create whose answer was lost (the connection cut after the server made it) is
        found again, not made twice: a retry sends the same `pending_post_id` (Mattermost
        returns the post it made for it within 30 s), and after a failure the thread is
        first searched for the post (`same` says which is it: by default, the same message
        and props). A second approval post would leave the owner's reaction on the first
        unheard.
        """
        pending = f"{self.bot_id}:{now_ms()}:{random.randrange(1 << 30)}"
        wanted = (props or {}).items()

        def alike(post: Post) -> bool:
            return post.message == message and all(post.props.get(k) == v for k, v in wanted)

        found = same or alike
        attempts = 0

        async def attempt() -> Post:
            nonlocal attempts
            attempts += 1
            if attempts > 1 and root:  # the last attempt failed: it may have been made
                for post in await self.own_posts(root):
                    if found(post):
                        return post
            return await self.api.create_post(
                channel_id=channel,
                message=message,
                root_id=root,
                pending_post_id=pending,
                props=props,
            )

        return await self.retrying(attempt)

    async def edit(
        self, post_id: str, message: str, *, props: Mapping[str, object] | None = None
    ) -> None:
        """Change a post's message (and props), trying until Mattermost takes it."""
        await self.retrying(lambda: self.api.patch_post(post_id, message, props=props))


class Outage:
    """Says a failure to connect once, not at every try, and how long it lasted."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.attempts = 0
        self.since = 0.0
        self.wait_s = 0.0
        self._said = ""

    def failed(self, problem: str, wait_s: float) -> None:
        if not self.attempts:
            self.since = trio.current_time()
        self.attempts += 1
        self.wait_s = wait_s
        if problem != self._said:
            self._said = problem
            log.warning(
                "Mattermost at %s: %s; trying again in %.0f s, and then with growing pauses "
                "(runbook: mattermost-unreachable)",
                self.url,
                problem,
                wait_s,
            )
        else:
            log.debug("Mattermost at %s: %s again; next try in %.0f s", self.url, problem, wait_s)

    def over(self) -> str:
        """The end of the outage, for the connected line ("" when there was none)."""
        if not self.attempts:
            return ""
        lasted = trio.current_time() - self.since
        said = f" (after {self.attempts} failed attempts over {lasted:.0f} s)"
        self.attempts, self._said = 0, ""
        return said
