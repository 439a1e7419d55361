"""The fake's public port: a TCP relay in front of hypercorn that a test can cut or close.

ASGI gives an application no way to drop a connection without a WebSocket close frame, but a
restarting Mattermost does exactly that: its hub closes each connection's socket
(`app/platform/web_hub.go` Stop → WebConn.Close → gorilla's Conn.Close, no close frame). So
clients connect here, and each connection is relayed to hypercorn on a private port. Cutting a
relay closes both sockets at once; closing the listener makes new connections fail with
"connection refused", as a stopped server's port does.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

_SNIFF_LIMIT = 8192


@dataclass(eq=False)
class _Relay:
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    websocket: bool = False
    first_line: bytes = b""
    sniffed: bool = False


class Front:
    """The listener on the public port and the relays it made."""

    def __init__(
        self, nursery: trio.Nursery, backend_port: int, changed: Callable[[], None] = lambda: None
    ) -> None:
        self._nursery = nursery
        self._backend_port = backend_port
        self._changed = changed
        self._accepting: trio.CancelScope | None = None
        self._relays: set[_Relay] = set()
        self.port = 0
        self.reset_upgrades = False
        """Reset each WebSocket upgrade mid-handshake (a proxy or network dropping it)."""
        self.upgrades_reset = 0

    @property
    def up(self) -> bool:
        """Whether the port accepts connections."""
        return self._accepting is not None

    async def open(self) -> None:
        """Listen on the public port (the same one again after `close`)."""
        if self._accepting is not None:
            return
        listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
        listener = listeners[0]
        self.port = listener.socket.getsockname()[1]
        self._accepting = await self._nursery.start(self._accept, listener)

    async def close(self) -> None:
        """Stop listening and cut every connection: the server is down."""
        if self._accepting is not None:
            self._accepting.cancel()
            self._accepting = None
        self.cut(websockets_only=False)
        await trio.lowlevel.checkpoint()

    def cut(self, *, websockets_only: bool) -> int:
        """Close connections (WebSocket ones only, or all) without a word; how many were cut."""
        cut = [r for r in self._relays if r.websocket or not websockets_only]
        for relay in cut:
            relay.scope.cancel()
        return len(cut)

    async def _accept(
        self,
        listener: trio.SocketListener,
        task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with trio.CancelScope() as scope:
            async with listener:
                task_status.started(scope)
                while True:
                    stream = await listener.accept()
                    self._nursery.start_soon(self._relay, stream)

    async def _relay(self, client: trio.SocketStream) -> None:
        relay = _Relay()
        self._relays.add(relay)
        try:
            with relay.scope:
                async with client:
                    try:
                        backend = await trio.open_tcp_stream("127.0.0.1", self._backend_port)
                    except OSError:
                        return
                    async with backend, trio.open_nursery() as nursery:
                        nursery.start_soon(self._pump, client, backend, relay, True)
                        nursery.start_soon(self._pump, backend, client, relay, False)
        finally:
            self._relays.discard(relay)

    async def _pump(
        self, source: trio.SocketStream, sink: trio.SocketStream, relay: _Relay, sniff: bool
    ) -> None:
        try:
            while data := await source.receive_some(65536):
                if sniff and not relay.sniffed:
                    relay.first_line += data
                    if b"\r\n" in relay.first_line or len(relay.first_line) > _SNIFF_LIMIT:
                        relay.sniffed = True
                        line = relay.first_line.split(b"\r\n", 1)[0]
                        relay.websocket = line.startswith(b"GET /api/v4/websocket")
                        if relay.websocket and self.reset_upgrades:
                            # SO_LINGER 0: the close sends a RST, as a dropped connection does
                            source.socket.setsockopt(
                                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                            )
                            self.upgrades_reset += 1
                            self._changed()
                            break
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        relay.scope.cancel()
