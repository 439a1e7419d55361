"""Helpers for tests against the fake Mattermost: the world of three users, frames."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import trio
from fakes.mattermost import FakeMattermost, FakeUser, serve_fake_mattermost
from trio_websocket import WebSocketConnection, wrap_client_stream

CAP_S = 10.0


@dataclass
class World:
    """The fake, its owner, the bridge's bot, a stranger, and the owner-bot DM."""

    mm: FakeMattermost
    owner: FakeUser
    bot: FakeUser
    stranger: FakeUser
    dm: str

    def client(self, user: FakeUser | None = None) -> httpx.AsyncClient:
        """An HTTP client of the fake, as `user` (no token if None)."""
        headers = user.headers if user is not None else {}
        return httpx.AsyncClient(base_url=self.mm.url, headers=headers)

    def auth(self, user: FakeUser) -> Sequence[tuple[str, str]]:
        """The upgrade header for `user`'s WebSocket."""
        return [("Authorization", f"Bearer {user.token}")]

    @asynccontextmanager
    async def ws(
        self, user: FakeUser | None = None, headers: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[WebSocketConnection]:
        """A WebSocket to the fake, authenticated by header as `user` (none if None).

        trio-websocket's `open_websocket_url` leaves its socket open when the peer drops the
        TCP connection without a close frame (aclose returns early once the close reason is
        set), so the test owns the stream and closes it itself.
        """
        pairs = list(headers) + (list(self.auth(user)) if user is not None else [])
        extra = [(k.encode(), v.encode()) for k, v in pairs]
        stream = await trio.open_tcp_stream("127.0.0.1", self.mm.front.port)
        try:
            async with trio.open_nursery() as nursery:
                ws = await wrap_client_stream(
                    nursery, stream, "127.0.0.1", "/api/v4/websocket", extra_headers=extra
                )
                try:
                    yield ws
                finally:
                    await ws.aclose()
        finally:
            await stream.aclose()


@asynccontextmanager
async def open_world() -> AsyncIterator[World]:
    """A running fake with its owner, bot (`boxmaker`) and stranger."""
    async with serve_fake_mattermost() as mm:
        owner = mm.create_user("owner")
        bot = mm.create_user("boxmaker", bot=True)
        stranger = mm.create_user("stranger")
        yield World(mm, owner, bot, stranger, mm.direct_channel(owner, bot))


async def next_event(ws: WebSocketConnection) -> dict[str, Any]:
    """The next frame of a WebSocket, decoded."""
    frame: dict[str, Any] = msgspec.json.decode(await ws.get_message())
    return frame
