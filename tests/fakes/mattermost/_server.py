"""The handle a test holds: start the fake, shape its world, break it, read what happened."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from ._front import Front
from ._mentions import Mentions, find_mentions
from ._model import Post
from ._ratelimit import RateLimiter
from ._routes import Api, Recorded
from ._store import Store, WsEvent
from ._websocket import Hub


@dataclass(frozen=True)
class FakeUser:
    """A user of the fake and the token it authenticates with."""

    id: str
    username: str
    token: str
    is_bot: bool

    @property
    def headers(self) -> dict[str, str]:
        """The `Authorization` header for this user's token."""
        return {"Authorization": f"Bearer {self.token}"}


class FakeMattermost:
    """A running fake Mattermost server (see `serve_fake_mattermost`)."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._changed = trio.lowlevel.ParkingLot()
        self.store = Store(publish=self._publish)
        self.hub = Hub(self.store, changed=self._notify)
        self.limiter = RateLimiter()
        self.api = Api(self.store, self.hub, self.limiter, answered=self._notify)
        self._watchers: list[Callable[[], object]] = []
        self._front: Front | None = None
        self._shutdown = trio.Event()

    def _notify(self) -> None:
        self._changed.unpark_all()
        for watcher in self._watchers:
            watcher()

    def _publish(self, event: WsEvent) -> None:
        self.hub.publish(event)
        self._notify()

    def watch(self, changed: Callable[[], object]) -> None:
        """Call `changed` at each change a test could wait for: a request answered, an event
        published, a WebSocket opened or closed, an upgrade refused or reset."""
        self._watchers.append(changed)

    @property
    def front(self) -> Front:
        """The public port's relay."""
        assert self._front is not None, "the fake is not started"
        return self._front

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`, the server's base URL."""
        return f"http://127.0.0.1:{self.front.port}"

    @property
    def ws_url(self) -> str:
        """The WebSocket URL."""
        return f"ws://127.0.0.1:{self.front.port}/api/v4/websocket"

    @property
    def requests(self) -> list[Recorded]:
        """Every request answered, in order: method, path, status (101 for a WebSocket)."""
        return self.api.requests

    async def _start(self) -> None:
        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.graceful_timeout = 1.0
        config.accesslog = None
        config.errorlog = logging.getLogger("fakes.mattermost.hypercorn")
        app = cast(Any, self.api)
        binds = await self._nursery.start(
            partial(serve, app, config, shutdown_trigger=self._shutdown.wait)
        )
        backend_port = int(binds[0].rsplit(":", 1)[1])
        self._front = Front(self._nursery, backend_port, changed=self._notify)
        await self._front.open()

    async def _stop(self) -> None:
        if self._front is not None:
            await self._front.close()
        self._shutdown.set()

    @property
    def pending_post_ttl_s(self) -> float:
        """How long a `pending_post_id` is remembered (the server's cache keeps it 30 s)."""
        return self.store.pending_ttl_s

    @pending_post_ttl_s.setter
    def pending_post_ttl_s(self, value: float) -> None:
        self.store.pending_ttl_s = value

    # the world

    def create_user(self, username: str, *, bot: bool = False, admin: bool = False) -> FakeUser:
        """A user (or a bot account) with a fresh token; `admin`: a system admin."""
        user = self.store.add_user(username, bot=bot, admin=admin)
        return FakeUser(user.id, user.username, self.store.issue_token(user.id), bot)

    def issue_token(self, user: FakeUser) -> str:
        """Another token for the user."""
        return self.store.issue_token(user.id)

    def revoke_token(self, token: str) -> None:
        """Revoke a token: requests with it get 401, its WebSockets get no more events."""
        self.store.tokens.pop(token, None)

    def direct_channel(self, a: FakeUser, b: FakeUser) -> str:
        """The id of the DM channel of two users (made if needed)."""
        return self.store.direct_channel(a.id, b.id).id

    def create_channel(self, name: str, *members: FakeUser, private: bool = False) -> str:
        """The id of a new open (or private) channel with these members."""
        return self.store.add_channel(name, {m.id for m in members}, private=private).id

    def post(
        self,
        user: FakeUser,
        channel_id: str,
        message: str,
        *,
        root_id: str = "",
        pending_post_id: str = "",
        props: dict[str, Any] | None = None,
        create_at: int | None = None,
    ) -> dict[str, Any]:
        """Post as the user, by the same path as POST /api/v4/posts (events included).

        `create_at` is kept only for a system admin, as Mattermost does.
        """
        body: dict[str, Any] = {"channel_id": channel_id, "message": message, "root_id": root_id}
        if pending_post_id:
            body["pending_post_id"] = pending_post_id
        if props is not None:
            body["props"] = props
        if create_at is not None:
            body["create_at"] = create_at
        return self.store.create_post(user.id, body, set_online=True)

    def plugin_command_response(
        self, user: FakeUser, channel_id: str, text: str, *, root_id: str = ""
    ) -> dict[str, Any]:
        """What a plugin's slash command answering `in_channel` posts for the user who ran it.

        Mattermost executes a plugin's command as a built-in one (app/command.go,
        HandleCommandResponsePost): the response becomes a post *by that user*, with none of
        `from_webhook`, `from_plugin` or `override_username` unless the plugin asked for
        them, so nothing on it tells it from the user's own typing.
        """
        return self.post(user, channel_id, text, root_id=root_id)

    def view(self, post_id: str) -> str:
        """The post as the owner sees it in the web app, as text: the message, then each
        message attachment drawn as a framed card (a coloured bar, its title, text, fields
        and footer), which no message text can produce."""
        post = self.store.posts[post_id]
        lines = [post.message] if post.message else []
        attachments = post.props.get("attachments")
        for card in attachments if isinstance(attachments, list) else []:
            if not isinstance(card, dict):
                continue
            lines.append(f"┏━━ card {card.get('color', '')} ━━")
            for key in ("pretext", "title", "text"):
                if card.get(key):
                    lines += [f"┃ {line}" for line in str(card[key]).split("\n")]
            for field in card.get("fields") or []:
                lines.append(f"┃ {field.get('title', '')}: {field.get('value', '')}")
            if card.get("footer"):
                lines.append(f"┃ — {card['footer']}")
            lines.append("┗━━")
        return "\n".join(lines)

    def edit(self, user: FakeUser, post_id: str, message: str) -> dict[str, Any]:
        """Edit as the user, as PUT /api/v4/posts/{id}/patch does."""
        return self.store.patch_post(user.id, post_id, {"message": message})

    def delete(self, user: FakeUser, post_id: str) -> None:
        """Delete as the user, as DELETE /api/v4/posts/{id} does."""
        self.store.delete_post(user.id, post_id)

    def react(self, user: FakeUser, post_id: str, emoji_name: str) -> dict[str, Any]:
        """React as the user, as POST /api/v4/reactions does."""
        body = {"user_id": user.id, "post_id": post_id, "emoji_name": emoji_name}
        return self.store.save_reaction(user.id, body)

    def typing(self, user: FakeUser, channel_id: str, parent_id: str = "") -> None:
        """Show the user typing."""
        self.store.typing(user.id, channel_id, parent_id)

    # reading what happened

    def channel_posts(self, channel_id: str) -> list[Post]:
        """Every stored post of the channel, oldest first: deleted ones and edit copies too."""
        return sorted(
            (p for p in self.store.posts.values() if p.channel_id == channel_id),
            key=lambda p: (p.create_at, p.update_at),
        )

    def live_posts(self, channel_id: str) -> list[Post]:
        """The posts a reader sees in the channel now, oldest first."""
        return [p for p in self.channel_posts(channel_id) if not p.delete_at]

    def creates(self, pending_post_id: str) -> int:
        """How many posts were made with this `pending_post_id` (a retry must not add one)."""
        return len(self.store.created.get(pending_post_id, []))

    def create_requests(self, pending_post_id: str) -> int:
        """How many create requests carried this `pending_post_id`."""
        return self.store.create_requests[pending_post_id]

    def mentions(self, post: Post | dict[str, Any] | str) -> Mentions:
        """Whom Mattermost would notify for this post, with every user of the fake as a keyword."""
        if isinstance(post, str):
            message, props = post, None
        elif isinstance(post, Post):
            message, props = post.message, post.props
        else:
            message, props = post["message"], post.get("props")
        names = [u.username for u in self.store.users.values()]
        return find_mentions(message, names, props=props)

    def websockets(self, user: FakeUser | None = None) -> int:
        """How many authenticated WebSockets are open (for one user, or all)."""
        return sum(1 for c in self.hub.connections if user is None or c.user_id == user.id)

    async def wait_for_websockets(self, count: int, user: FakeUser | None = None) -> None:
        """Wait until exactly `count` authenticated WebSockets are open (no deadline of its own)."""
        await self._wait(lambda: self.websockets(user) == count)

    async def _wait(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self._changed.park()

    # breaking it

    def rate_limit(self, per_sec: float | None, *, burst: int = 0) -> None:
        """Turn the rate limiter on (requests a second per token, with a burst) or off (None)."""
        self.limiter.per_sec = per_sec
        self.limiter.max_burst = burst

    def storm(self, requests: int) -> None:
        """Answer 429 to the next `requests` requests, whatever the rate limit."""
        self.limiter.storm = requests

    def drop_websockets(self) -> int:
        """Cut every WebSocket connection mid-stream, with no close frame; how many were cut."""
        return self.front.cut(websockets_only=True)

    def drop_connections(self) -> int:
        """Cut every connection, HTTP keep-alive ones too."""
        return self.front.cut(websockets_only=False)

    def refuse_upgrades(self, status: int | None) -> None:
        """Answer each WebSocket upgrade with HTTP `status` (None: accept them again)."""
        self.hub.refuse_status = status

    @property
    def upgrades_refused(self) -> int:
        """How many upgrades were answered with `refuse_upgrades`' status."""
        return self.hub.upgrades_refused

    def reset_upgrades(self, on: bool) -> None:
        """Reset each WebSocket upgrade mid-handshake (a TCP RST after the request)."""
        self.front.reset_upgrades = on

    @property
    def upgrades_reset(self) -> int:
        """How many upgrades were reset."""
        return self.front.upgrades_reset

    async def wait_for_refused_upgrades(self, count: int) -> None:
        """Return once `count` upgrades have been refused."""
        await self._wait(lambda: self.hub.upgrades_refused >= count)

    def lose_answer(self, method: str, path: str, *, containing: bytes = b"") -> None:
        """The next such request (whose body holds `containing`) is done, then answered
        500: its client cannot know it was."""
        self.api.lose_answers.append((method, path, containing))

    async def go_down(self) -> None:
        """Take the server down: connections are cut and new ones refused."""
        await self.front.close()

    async def come_up(self) -> None:
        """Bring the server back on the same port, with its state."""
        await self.front.open()


@asynccontextmanager
async def serve_fake_mattermost() -> AsyncIterator[FakeMattermost]:
    """Run a fake Mattermost on 127.0.0.1 for the body of the `async with`."""
    async with trio.open_nursery() as nursery:
        fake = FakeMattermost(nursery)
        await fake._start()
        try:
            yield fake
        finally:
            await fake._stop()
