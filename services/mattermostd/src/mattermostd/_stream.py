"""Mattermost's WebSocket event stream (`/api/v4/websocket`), under trio-websocket.

The bridge authenticates on the upgrade request with `Authorization: Bearer TOKEN`, as
the API documents, and takes the connection as live once the server's `hello` event
arrives. Events are `{event, data, broadcast, seq}` (`server/public/model/
websocket_message.go`); in `posted` and `post_edited`, `data.post` is the post as a JSON
*string*, and in `reaction_added`, `data.reaction` is one too. The bridge sends one
action, `user_typing {channel_id, parent_id}`.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import msgspec
import trio
import trio_websocket

from ._api import Post, Reaction, ServerTrouble, TokenRefused

__all__ = ["PostEdited", "Posted", "ReactionAdded", "Stream", "StreamEvent", "open_stream"]

log = logging.getLogger("mattermostd.stream")

HELLO_DEADLINE_S = 15.0
"""How long the server may take to say `hello` after the upgrade."""
UPGRADE_DEADLINE_S = 10.0
"""The longest connecting and upgrading may take (at most `[server] timeout_s`): a
connection reset during the upgrade leaves trio-websocket waiting for an answer that
cannot come, so only this deadline ends the attempt."""
MAX_EVENT_BYTES = 4 * 1024 * 1024
CLOSE_DEADLINE_S = 0.5
"""How long closing the stream may take (a cancelled reader gets no close reply)."""


class _Broadcast(msgspec.Struct, frozen=True, kw_only=True):
    channel_id: str = ""
    user_id: str = ""


class _Raw(msgspec.Struct, frozen=True, kw_only=True):
    event: str = ""
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    broadcast: _Broadcast | None = None
    seq: int = 0
    status: str = ""
    seq_reply: int = 0


class Posted(msgspec.Struct, frozen=True, kw_only=True, tag="posted"):
    """A new post in a channel the bot is in."""

    post: Post


class PostEdited(msgspec.Struct, frozen=True, kw_only=True, tag="post_edited"):
    """A post's message was edited."""

    post: Post


class ReactionAdded(msgspec.Struct, frozen=True, kw_only=True, tag="reaction_added"):
    """A reaction was added to a post."""

    reaction: Reaction


StreamEvent = Posted | PostEdited | ReactionAdded
"""The events the bridge acts on (every other event of the stream is skipped)."""


_RAW = msgspec.json.Decoder(_Raw)
_POST = msgspec.json.Decoder(Post)
_REACTION = msgspec.json.Decoder(Reaction)


def parse_event(text: str | bytes) -> StreamEvent | None:
    """The event in one WebSocket message, or None for any other (or unreadable) one."""
    try:
        raw = _RAW.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        log.warning("an event the bridge cannot read (%d bytes); skipped", len(text))
        return None
    try:
        match raw.event, raw.data.get("post"), raw.data.get("reaction"):
            case "posted", str(post), _:
                return Posted(post=_POST.decode(post))
            case "post_edited", str(post), _:
                return PostEdited(post=_POST.decode(post))
            case "reaction_added", _, str(reaction):
                return ReactionAdded(reaction=_REACTION.decode(reaction))
    except (msgspec.DecodeError, msgspec.ValidationError):
        log.warning("a %s event whose payload the bridge cannot read; skipped", raw.event)
    return None


class Stream:
    """A live event stream: read events, send typing."""

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self._ws = ws
        self._seq = 0

    async def events(self) -> AsyncIterator[StreamEvent]:
        """The events the bridge acts on, until the connection closes (`ServerTrouble`)."""
        while True:
            try:
                message = await self._ws.get_message()
            except trio_websocket.ConnectionClosed as exc:
                raise ServerTrouble(f"the event stream closed ({exc.reason})") from None
            event = parse_event(message)
            if event is not None:
                yield event

    async def ping(self, timeout_s: float) -> None:
        """A ping answered within `timeout_s`, or `ServerTrouble` (a dead connection)."""
        with trio.move_on_after(timeout_s) as waited:
            try:
                await self._ws.ping()
            except trio_websocket.ConnectionClosed as exc:
                raise ServerTrouble(f"the event stream closed ({exc.reason})") from None
        if waited.cancelled_caught:
            raise ServerTrouble(f"the event stream did not answer a ping in {timeout_s:g} s")

    async def typing(self, channel_id: str, parent_id: str) -> None:
        """Show the bot as typing in a thread (the `user_typing` action); best effort."""
        self._seq += 1
        action = {
            "action": "user_typing",
            "seq": self._seq,
            "data": {"channel_id": channel_id, "parent_id": parent_id},
        }
        # a closed stream: the reader sees the close and reconnects
        with contextlib.suppress(trio_websocket.ConnectionClosed):
            await self._ws.send_message(msgspec.json.encode(action).decode())


@asynccontextmanager
async def open_stream(url: str, token: str, *, timeout_s: float) -> AsyncIterator[Stream]:
    """Connect, wait for `hello`, and yield the stream; closed on the way out.

    The TCP (or TLS) connection is the bridge's own, closed here whatever happened: a
    server that drops the connection without a close frame leaves no socket behind. A
    refused upgrade (401) is `TokenRefused`; anything else that keeps the stream from
    starting (another status, as a proxy answers while Mattermost restarts; a reset; no
    answer within `UPGRADE_DEADLINE_S`) is `ServerTrouble`. trio-websocket reports a
    refused upgrade from its reader task, in the nursery it was given, not to the
    caller: it is caught here, at the nursery, as a group.
    """
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    path = parts.path.rstrip("/") + "/api/v4/websocket"
    address = f"{'wss' if secure else 'ws'}://{parts.netloc}{path}"
    deadline_s = min(timeout_s, UPGRADE_DEADLINE_S)
    stream = await _connect(host, port, secure, address, deadline_s)
    try:
        try:
            async with trio.open_nursery() as nursery:
                ws = await _upgrade(nursery, stream, host, path, token, address, deadline_s)
                await _hello(ws)
                try:
                    yield Stream(ws)
                finally:
                    with trio.move_on_after(CLOSE_DEADLINE_S) as closing:
                        closing.shield = True
                        await ws.aclose()
                    nursery.cancel_scope.cancel()
        except* trio_websocket.ConnectionRejected as group:
            raise _refused(_first(group), url) from None
        except* (trio_websocket.HandshakeError, trio_websocket.ConnectionClosed) as group:
            raise ServerTrouble(f"the event stream at {address} failed: {_first(group)}") from None
    finally:
        with trio.move_on_after(CLOSE_DEADLINE_S) as closing:
            closing.shield = True
            await stream.aclose()


async def _connect(
    host: str, port: int, secure: bool, address: str, deadline_s: float
) -> trio.SocketStream | trio.SSLStream[trio.SocketStream]:
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream]
    with trio.move_on_after(deadline_s) as waited:
        try:
            if secure:
                stream = await trio.open_ssl_over_tcp_stream(
                    host, port, ssl_context=ssl.create_default_context()
                )
            else:
                stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            raise ServerTrouble(f"cannot connect to {address}: {exc}") from None
        return stream
    assert waited.cancelled_caught
    raise ServerTrouble(f"cannot connect to {address}: no answer in {deadline_s:g} s")


async def _upgrade(
    nursery: trio.Nursery,
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream],
    host: str,
    path: str,
    token: str,
    address: str,
    deadline_s: float,
) -> trio_websocket.WebSocketConnection:
    """The upgrade to a WebSocket; a refusal arrives in `nursery` (see `open_stream`)."""
    with trio.move_on_after(deadline_s) as waited:
        try:
            return await trio_websocket.wrap_client_stream(
                nursery,
                stream,
                host,
                path,
                extra_headers=[(b"Authorization", f"Bearer {token}".encode())],
                max_message_size=MAX_EVENT_BYTES,
            )
        except trio_websocket.ConnectionRejected as exc:
            raise _refused(exc, address) from None
        except (trio_websocket.HandshakeError, trio_websocket.ConnectionClosed, OSError) as exc:
            raise ServerTrouble(f"cannot open the event stream at {address}: {exc}") from None
    assert waited.cancelled_caught
    raise ServerTrouble(
        f"the event stream at {address} was not opened within {deadline_s:g} s "
        "(the connection was cut or the server did not answer the upgrade)"
    )


def _refused(exc: BaseException, url: str) -> TokenRefused | ServerTrouble:
    status = getattr(exc, "status_code", None)
    if status == 401:
        return TokenRefused(
            f"Mattermost at {url} refused the bot's token on the event stream; "
            "make a new token and put it in the token file "
            "(runbook: mattermost-token-refused)"
        )
    return ServerTrouble(f"the event stream was refused (HTTP {status})")


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    problem: BaseException = group
    while isinstance(problem, BaseExceptionGroup):
        problem = problem.exceptions[0]
    return problem


async def _hello(ws: trio_websocket.WebSocketConnection) -> None:
    with trio.move_on_after(HELLO_DEADLINE_S) as waited:
        while True:
            message = await ws.get_message()
            try:
                raw = _RAW.decode(message)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if raw.event == "hello":
                return
    if waited.cancelled_caught:
        raise ServerTrouble(
            f"the server did not say hello within {HELLO_DEADLINE_S:g} s of the event stream "
            "opening (is the token accepted?)"
        )
