"""The WebSocket at /api/v4/websocket: authentication, `hello`, events, and client actions.

From `server/channels/api4/websocket.go` (connectWebSocket: the session comes from the upgrade
request's token, if it has one; an invalid token is refused with 401 before the upgrade),
`app/platform/websocket_router.go` (the `authentication_challenge` action; every other action
before authentication answers `api.web_socket_router.not_authenticated.app_error`; a bad token
in the challenge closes the connection), `app/platform/web_conn.go` (createHelloMessage:
`server_version`, `connection_id`, `server_hostname`; each event sent on a connection takes the
connection's next sequence number, from 0) and `model/websocket_message.go` (the event is
`{"event", "data", "broadcast", "seq"}`; a response is `{"status", "seq_reply", "data"|"error"}`).
Go marshals `data`, a map, with sorted keys. Events reach only connections of users who may
see them: the broadcast's user, or the members of its channel, less `omit_users`.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import msgspec
import trio

from ._model import SERVER_VERSION, new_id
from ._store import Store, WsEvent

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

log = logging.getLogger("fakes.mattermost")

QUEUE_SIZE = 1000  # a connection this far behind is dropped, as the server's full send queue is


def token_from(scope: Scope) -> str | None:
    """app/session.go ParseAuthTokenFromRequest: `Authorization: Bearer|Token`, `access_token`."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            header = value.decode("latin-1")
            if header[:7].upper() == "BEARER ":
                return str(header[7:].strip())
            if header[:6].lower() == "token ":
                return str(header[6:].strip())
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("access_token"):
        return str(query["access_token"][0])
    return None


@dataclass(eq=False)
class Connection:
    """One WebSocket: its user once authenticated, and its outgoing queue."""

    outgoing: trio.MemorySendChannel[WsEvent | dict[str, Any]]
    token: str | None = None
    user_id: str | None = None
    connection_id: str = field(default_factory=new_id)
    seq: int = 0


class Hub:
    """The connections, and who gets which event (app/platform/web_hub.go)."""

    def __init__(self, store: Store, changed: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.connections: set[Connection] = set()
        self.changed = changed
        self.refuse_status: int | None = None
        """Answer every upgrade with this HTTP status (a proxy while Mattermost restarts)."""
        self.upgrades_refused = 0
        """Called when the set of authenticated connections changes."""

    def unregister(self, conn: Connection) -> None:
        """The connection is gone."""
        if conn in self.connections:
            self.connections.discard(conn)
            self.changed()
        conn.outgoing.close()

    def publish(self, event: WsEvent) -> None:
        """Queue the event on every connection that may see it."""
        for conn in list(self.connections):
            if self._wants(conn, event):
                try:
                    conn.outgoing.send_nowait(event)
                except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                    self.unregister(conn)

    def _wants(self, conn: Connection, event: WsEvent) -> bool:
        user = conn.user_id
        if user is None or self.store.tokens.get(conn.token or "") != user:
            return False  # not authenticated, or its token was revoked since
        if event.user_id and event.user_id != user:
            return False
        if event.omit_users and event.omit_users.get(user):
            return False
        if event.channel_id:
            channel = self.store.channels.get(event.channel_id)
            return channel is not None and user in channel.members
        return True

    def register(self, conn: Connection, token: str, user_id: str) -> None:
        """Authenticated: from now on the connection gets events, starting with `hello`."""
        conn.token, conn.user_id = token, user_id
        self.connections.add(conn)
        self.changed()
        hello = {
            "connection_id": conn.connection_id,
            "server_hostname": socket.gethostname(),
            "server_version": f"{SERVER_VERSION}.0.fake.false",
        }
        conn.outgoing.send_nowait(WsEvent("hello", hello, user_id=user_id))

    def encode(self, conn: Connection, item: WsEvent | dict[str, Any]) -> str:
        """The text frame for an event (taking the next seq) or a response."""
        if isinstance(item, dict):
            return msgspec.json.encode(item).decode()
        data = dict(item.data)
        if item.event == "posted" and conn.user_id in item.mentioned:
            data["mentions"] = msgspec.json.encode([conn.user_id]).decode()
        frame = {
            "event": item.event,
            "data": dict(sorted(data.items())),
            "broadcast": {
                "omit_users": item.omit_users,
                "user_id": item.user_id,
                "channel_id": item.channel_id,
                "team_id": item.team_id,
                "connection_id": "",
                "omit_connection_id": "",
            },
            "seq": conn.seq,
        }
        conn.seq += 1
        return msgspec.json.encode(frame).decode()


def _error(seq: int, error_id: str, message: str, status: int) -> dict[str, Any]:
    return {
        "status": "FAIL",
        "seq_reply": seq,
        "error": {
            "id": error_id,
            "message": message,
            "detailed_error": "",
            "request_id": "",
            "status_code": status,
        },
    }


async def serve_websocket(hub: Hub, scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI WebSocket handler."""
    if (await receive())["type"] != "websocket.connect":
        return
    if hub.refuse_status is not None:
        hub.upgrades_refused += 1
        hub.changed()
        await _refuse(send, hub.refuse_status)
        return
    token = token_from(scope)
    if token is not None and token not in hub.store.tokens:
        body = msgspec.json.encode(
            {
                "id": "api.context.session_expired.app_error",
                "message": "Invalid or expired session, please login again.",
                "detailed_error": "",
                "request_id": new_id(),
                "status_code": 401,
            }
        )
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "websocket.accept"})
    outgoing, incoming = trio.open_memory_channel[WsEvent | dict[str, Any]](QUEUE_SIZE)
    conn = Connection(outgoing)
    if token is not None:
        hub.register(conn, token, hub.store.tokens[token])
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write, hub, conn, incoming, send, nursery.cancel_scope)
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    break
                if message.get("text") is not None and not _act(hub, conn, message["text"]):
                    await send({"type": "websocket.close", "code": 1000})
                    break
            nursery.cancel_scope.cancel()
    finally:
        hub.unregister(conn)


PROXY_PAGES = {
    429: b"<html><body><h1>429 Too Many Requests</h1></body></html>",
    502: b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
    503: b"<html><head><title>503 Service Temporarily Unavailable</title></head></html>",
}


async def _refuse(send: Send, status: int) -> None:
    """An upgrade answered as nginx in front of a restarting Mattermost answers it."""
    body = PROXY_PAGES.get(status, b"")
    headers = [(b"content-type", b"text/html"), (b"content-length", str(len(body)).encode())]
    if status in (429, 503):
        headers.append((b"retry-after", b"1"))
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


async def _write(
    hub: Hub,
    conn: Connection,
    incoming: trio.MemoryReceiveChannel[WsEvent | dict[str, Any]],
    send: Send,
    scope: trio.CancelScope,
) -> None:
    async with incoming:
        async for item in incoming:
            await send({"type": "websocket.send", "text": hub.encode(conn, item)})
    scope.cancel()  # dropped by the hub (too slow): the connection ends


def _act(hub: Hub, conn: Connection, text: str) -> bool:
    """One client action (model.WebSocketRequest); False to close the connection."""
    try:
        request = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False  # the server's readPump fails on a frame that is not JSON, and closes
    if not isinstance(request, dict):
        return False
    seq: int = request["seq"] if isinstance(request.get("seq"), int) else 0
    action = request.get("action") or ""
    data: dict[str, Any] = request["data"] if isinstance(request.get("data"), dict) else {}
    reply = conn.outgoing.send_nowait
    if not action:
        reply(_error(seq, "api.web_socket_router.no_action.app_error", "No websocket action.", 400))
    elif seq <= 0:
        reply(
            _error(
                seq,
                "api.web_socket_router.bad_seq.app_error",
                "Invalid sequence for WebSocket message.",
                400,
            )
        )
    elif action == "authentication_challenge":
        if conn.user_id is not None:
            return True
        token = data.get("token")
        if not isinstance(token, str) or token not in hub.store.tokens:
            return False
        hub.register(conn, token, hub.store.tokens[token])
        reply({"status": "OK", "seq_reply": seq})
    elif conn.user_id is None or hub.store.tokens.get(conn.token or "") != conn.user_id:
        reply(
            _error(
                seq,
                "api.web_socket_router.not_authenticated.app_error",
                "No websocket authentication.",
                401,
            )
        )
    elif action == "user_typing":
        channel_id, parent_id = data.get("channel_id"), data.get("parent_id") or ""
        if not isinstance(channel_id, str) or not isinstance(parent_id, str):
            reply(
                _error(
                    seq,
                    "api.websocket_handler.invalid_param.app_error",
                    "Invalid channel_id parameter.",
                    400,
                )
            )
        elif conn.user_id not in getattr(hub.store.channels.get(channel_id), "members", ()):
            reply(_error(seq, "api.web_socket_router.bad_action.app_error", "No permission.", 403))
        else:
            hub.store.typing(conn.user_id, channel_id, parent_id)
            reply({"status": "OK", "seq_reply": seq})
    else:
        reply(
            _error(
                seq, "api.web_socket_router.bad_action.app_error", "Unknown WebSocket action.", 500
            )
        )
    return True
