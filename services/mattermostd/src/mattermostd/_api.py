"""Mattermost's REST API v4, the part the bridge uses, under trio with httpx.

Every request carries the bot's token as `Authorization: Bearer`. What the server says
is sorted into what the bridge does next:

* 429: wait as long as `Retry-After` (or `X-Ratelimit-Reset`) says, then send it again;
  while `X-Ratelimit-Remaining` is 0, the next request waits for the reset first.
* 401: the token is refused (revoked, expired, mistyped): `TokenRefused`, which stops
  the bridge until the owner fixes it; trying again would only be refused again.
* 403: the bot may not do this (not a member of the channel, say): `NotAllowed`, also
  a stop for the owner.
* a refused connection, a timeout, a 5xx: `ServerTrouble`; the caller tries again later.
* any other 4xx: `Rejected` (a post too long, a post gone), for the caller to handle.

The shapes are Mattermost's (`api/v4/source/posts.yaml`, `users.yaml`, `channels.yaml`,
`reactions.yaml` in mattermost/mattermost); fields the bridge does not read are ignored.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import TypeVar

import httpx
import msgspec
import trio

import proto

from ._shapes import (
    ApiError,
    Channel,
    NotAllowed,
    Post,
    PostList,
    Reaction,
    Rejected,
    ServerTrouble,
    TokenRefused,
    User,
)

__all__ = [
    "Api",
    "ApiError",
    "Channel",
    "NotAllowed",
    "Post",
    "PostList",
    "Reaction",
    "Rejected",
    "ServerTrouble",
    "TokenRefused",
    "User",
]

log = logging.getLogger("mattermostd.api")

T = TypeVar("T")

LONGEST_RATE_WAIT_S = 120.0
"""The longest a 429 makes the bridge wait before trying again (a server's odd header)."""
DEFAULT_RATE_WAIT_S = 1.0


def _seconds(headers: Mapping[str, str], now: float) -> float:
    """How long a 429 asks to wait: `Retry-After`, else `X-Ratelimit-Reset`."""
    for name in ("retry-after", "x-ratelimit-reset"):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        if value > 1e9:  # an epoch time, not a number of seconds
            value -= now
        return min(max(value, 0.0), LONGEST_RATE_WAIT_S)
    return DEFAULT_RATE_WAIT_S


def _server_message(response: httpx.Response) -> str:
    """The `message` of Mattermost's AppError body, if it has one, on one line."""
    try:
        body = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        return response.reason_phrase or str(response.status_code)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return proto.for_terminal(body["message"], one_line=True)[:300]
    return response.reason_phrase or str(response.status_code)


class Api:
    """One Mattermost server, as the bot."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=f"{self.url}/api/v4",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            transport=transport,
        )
        self._resume_at = 0.0
        """While the server says no requests are left, when the next one may go."""
        self.rate_limited = 0
        """How many 429s the bridge has waited out (its log and tests read it)."""
        self._offset_s = 0.0
        """The server's clock minus ours, from the `Date` header of its last answer."""

    def server_now_ms(self) -> int:
        """The server's time now (ms since 1970), as its last answer's `Date` put it.

        `Date` has whole seconds, cut down, so this is at most a second behind the
        server's clock and never ahead of it: a place in a channel taken from it never
        skips a post made after it was taken.
        """
        return int((time.time() + self._offset_s) * 1000)

    def _note_server_time(self, response: httpx.Response) -> None:
        raw = response.headers.get("date")
        if not raw:
            return
        try:
            self._offset_s = parsedate_to_datetime(raw).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: object = None,
        params: Mapping[str, str | int] | None = None,
    ) -> httpx.Response:
        while True:
            wait = self._resume_at - trio.current_time()
            if wait > 0:
                await trio.sleep(wait)
            try:
                response = await self._http.request(method, path, json=json, params=params)
            except httpx.TransportError as exc:
                raise ServerTrouble(
                    f"{method} {path}: {type(exc).__name__}: {exc or 'no answer'}"
                ) from exc
            self._note_server_time(response)
            remaining = response.headers.get("x-ratelimit-remaining")
            if response.status_code == 429 or remaining == "0":
                pause = _seconds(response.headers, time.time())
                self._resume_at = trio.current_time() + pause
            if response.status_code == 429:
                self.rate_limited += 1
                log.warning("rate limited on %s %s; waiting %.1f s", method, path, pause)
                continue
            if response.status_code == 401:
                raise TokenRefused(
                    f"Mattermost at {self.url} refused the bot's token "
                    f"({_server_message(response)}); make a new token and put it in the "
                    "token file (runbook: mattermost-token-refused)"
                )
            if response.status_code == 403:
                raise NotAllowed(
                    f"Mattermost at {self.url} does not let the bot {method} {path} "
                    f"({_server_message(response)}); check the bot's permissions and channel "
                    "membership (runbook: mattermost-not-allowed)"
                )
            if response.status_code >= 500:
                raise ServerTrouble(
                    f"{method} {path}: {response.status_code} {_server_message(response)}"
                )
            if response.status_code >= 400:
                raise Rejected(
                    response.status_code,
                    f"{method} {path}: {response.status_code} {_server_message(response)}",
                )
            return response

    async def _json(
        self,
        kind: type[T],
        method: str,
        path: str,
        *,
        json: object = None,
        params: Mapping[str, str | int] | None = None,
    ) -> T:
        response = await self._request(method, path, json=json, params=params)
        try:
            return msgspec.json.decode(response.content, type=kind)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ServerTrouble(
                f"{method} {path}: an answer the bridge cannot read: {exc}"
            ) from exc

    async def me(self) -> User:
        """The bot's own user (GET /users/me)."""
        return await self._json(User, "GET", "/users/me")

    async def user_by_username(self, username: str) -> User:
        """A user by name (GET /users/username/{username})."""
        return await self._json(User, "GET", f"/users/username/{_segment(username)}")

    async def direct_channel(self, one: str, other: str) -> Channel:
        """The direct channel of two users, created if need be (POST /channels/direct)."""
        return await self._json(Channel, "POST", "/channels/direct", json=[one, other])

    async def create_post(
        self,
        *,
        channel_id: str,
        message: str,
        root_id: str,
        pending_post_id: str,
        props: Mapping[str, object] | None = None,
    ) -> Post:
        """Create a post (POST /posts); a retried `pending_post_id` returns the same post."""
        body: dict[str, object] = {
            "channel_id": channel_id,
            "message": message,
            "root_id": root_id,
            "pending_post_id": pending_post_id,
        }
        if props:
            body["props"] = dict(props)
        return await self._json(Post, "POST", "/posts", json=body)

    async def patch_post(
        self, post_id: str, message: str, *, props: Mapping[str, object] | None = None
    ) -> Post:
        """Change a post's message, and its props if given (PUT /posts/{id}/patch).

        Given props replace the post's props whole, as Mattermost's patch does.
        """
        body: dict[str, object] = {"message": message}
        if props is not None:
            body["props"] = dict(props)
        return await self._json(Post, "PUT", f"/posts/{_segment(post_id)}/patch", json=body)

    async def post(self, post_id: str) -> Post:
        """One post (GET /posts/{id})."""
        return await self._json(Post, "GET", f"/posts/{_segment(post_id)}")

    async def posts_since(self, channel_id: str, since_ms: int) -> PostList:
        """The channel's posts created, edited or deleted since a time (ms since 1970).

        Deleted posts and the copies edits leave behind come too, and a post whose
        thread got a reply or a reaction: the caller sorts them out.
        """
        return await self._json(
            PostList,
            "GET",
            f"/channels/{_segment(channel_id)}/posts",
            params={"since": since_ms},
        )

    async def channel_page(self, channel_id: str, page: int, per_page: int) -> PostList:
        """One page of the channel's live posts, newest first (`?page=&per_page=`).

        Page 0 is the newest `per_page` posts; a page with no posts in `order` is past the
        oldest. The roots of the posts' threads may come too (in `posts`, not in `order`).
        """
        return await self._json(
            PostList,
            "GET",
            f"/channels/{_segment(channel_id)}/posts",
            params={"page": page, "per_page": per_page},
        )

    async def thread(self, post_id: str) -> PostList:
        """A post's whole thread (GET /posts/{id}/thread)."""
        return await self._json(PostList, "GET", f"/posts/{_segment(post_id)}/thread")

    async def reactions(self, post_id: str) -> list[Reaction]:
        """A post's reactions (GET /posts/{id}/reactions); `null` is an empty list."""
        response = await self._request("GET", f"/posts/{_segment(post_id)}/reactions")
        try:
            found = msgspec.json.decode(response.content, type=list[Reaction] | None)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ServerTrouble(
                f"reactions of {post_id}: an answer the bridge cannot read"
            ) from exc
        return found or []


def _segment(value: str) -> str:
    """`value` as one path segment: an id from a post or the owner never adds a path."""
    if not value or any(
        not (char.isascii() and (char.isalnum() or char in "._-")) for char in value
    ):
        raise Rejected(
            400, f"not a Mattermost id or name: {proto.for_terminal(value, one_line=True)!r}"
        )
    return value
