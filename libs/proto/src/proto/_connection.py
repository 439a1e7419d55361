"""One request on one stream: read a frame under a deadline, answer it, never crash.

`serve_stream` is the per-connection half of a server, generic over `trio.abc.Stream`
as `trio.serve_listeners` is generic over its listeners: `serve_unix` hands it each
accepted Unix socket (after checking the peer's uid), and tests hand it one end of
`trio.testing.memory_stream_pair()`. It reads one frame under the read deadline,
refuses kinds the socket does not accept, calls the role's handler, and turns a
`ServiceError` or a handler exception into an `error` frame and one log line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from ._codec import MAX_FRAME, FrameTooLarge, PeerClosed, ProtocolError, read_frame, write_frame
from ._messages import Error, Message
from ._sockets import Socket

__all__ = ["Connection", "Handler", "Peer", "PeerGone", "ServiceError", "serve_stream"]

log = logging.getLogger("proto.server")


class ServiceError(Exception):
    """Raised by a handler to answer with an `error` frame instead of a reply."""

    def __init__(self, code: str, message: str, runbook: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.runbook = runbook

    def to_frame(self) -> Error:
        """The `error` frame this refusal is answered with."""
        return Error(code=self.code, message=self.message, runbook=self.runbook)


class PeerGone(Exception):
    """The client of a request has gone (closed its end, or stopped reading)."""


@dataclasses.dataclass(frozen=True)
class Peer:
    """The process at the other end of a connection: its pid and uid."""

    pid: int
    uid: int

    @classmethod
    def this_process(cls) -> Peer:
        """This process as its own peer (a stream that is not a socket, as in tests)."""
        return cls(pid=os.getpid(), uid=os.geteuid())


WRITE_DEADLINE_S = 10.0
"""How long a frame may take to go out: a peer that stops reading is treated as gone."""


class Connection:
    """The peer of one request: who it is, and a way to send frames before the reply."""

    def __init__(self, stream: trio.abc.Stream, *, peer_pid: int, peer_uid: int) -> None:
        self._stream = stream
        self.peer_pid = peer_pid
        self.peer_uid = peer_uid

    async def send(self, message: Message) -> None:
        """Send a frame ahead of the final reply (a progress event, an approval notice).

        Raises:
            PeerGone: the peer has gone, or stopped reading for `WRITE_DEADLINE_S`; the
                handler may stop early.
        """
        with trio.move_on_after(WRITE_DEADLINE_S) as deadline:
            try:
                await write_frame(self._stream, message)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise PeerGone("the peer closed the connection") from None
        if deadline.cancelled_caught:
            raise PeerGone(f"the peer stopped reading for {WRITE_DEADLINE_S:g} s")

    async def wait_peer_gone(self) -> None:
        """Return once the peer has closed its end (it may send nothing after its request)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while await self._stream.receive_some(1):
                pass


Request = TypeVar("Request", bound=Message)

Handler = Callable[[Request, Connection], Awaitable[Message]]
"""A role's request handler for a socket's requests: returns the reply, or raises
`ServiceError`. Typed with the socket's request union, it can be proved exhaustive."""


async def serve_stream(
    spec: Socket[Request],
    handler: Handler[Request],
    stream: trio.abc.Stream,
    *,
    peer: Peer,
    read_timeout_s: float = 10.0,
    max_frame_bytes: int = MAX_FRAME,
) -> None:
    """Serve one request of `spec`'s kinds on `stream` from `peer`, then close `stream`.

    Every failure is an `error` frame and one log line, or, for a peer that hung up
    or sent nothing within `read_timeout_s`, a quiet close: a handler exception never
    escapes.
    """
    async with stream:
        with trio.move_on_after(read_timeout_s) as deadline:
            try:
                request = await read_frame(stream, max_frame_bytes=max_frame_bytes)
            except PeerClosed:
                return  # a liveness probe, or a client that gave up
            except ProtocolError as exc:
                log.info("%s: %s from pid %d: %s", spec.name, exc.code, peer.pid, exc)
                await _reply(stream, Error(code=exc.code, message=str(exc)))
                return
            except trio.BrokenResourceError:
                return
        if deadline.cancelled_caught:
            log.info(
                "%s: closed a connection that sent no request in %.0f s", spec.name, read_timeout_s
            )
            return
        if not spec.accepts(request):
            kind = type(request).__struct_config__.tag
            await _reply(
                stream,
                Error(
                    code="wrong-socket",
                    message=f"{kind!r} is not accepted on the {spec.name} socket",
                ),
            )
            return
        conn = Connection(stream, peer_pid=peer.pid, peer_uid=peer.uid)
        await _reply(stream, await _handle(spec, handler, request, conn))


async def _handle(
    spec: Socket[Request], handler: Handler[Request], request: Request, conn: Connection
) -> Message:
    try:
        return await handler(request, conn)
    except ServiceError as exc:
        return exc.to_frame()
    except (PeerGone, trio.BrokenResourceError, trio.ClosedResourceError):
        return Error(code="peer-gone", message="the peer closed the connection")
    except Exception:
        kind = type(request).__struct_config__.tag
        log.exception("%s: %s failed", spec.name, kind)
        return Error(
            code="internal", message=f"{spec.server} failed to answer {kind!r}; its log says why"
        )


async def _reply(stream: trio.abc.SendStream, message: Message) -> None:
    with trio.move_on_after(WRITE_DEADLINE_S) as deadline:
        await _write_reply(stream, message)
    if deadline.cancelled_caught:
        log.info(
            "the peer did not read the %s reply in %g s; closed the connection",
            type(message).__struct_config__.tag,
            WRITE_DEADLINE_S,
        )


async def _write_reply(stream: trio.abc.SendStream, message: Message) -> None:
    try:
        try:
            await write_frame(stream, message)
        except FrameTooLarge as exc:
            log.error("a %s reply was too large: %s", type(message).__struct_config__.tag, exc)
            await write_frame(stream, Error(code="reply-too-large", message=str(exc)))
        except ProtocolError as exc:
            log.error(
                "a %s reply could not be encoded: %s", type(message).__struct_config__.tag, exc
            )
            await write_frame(
                stream,
                Error(
                    code="internal",
                    message="the reply could not be encoded; the role's log says why",
                ),
            )
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        log.debug("peer left before the %s reply", type(message).__struct_config__.tag)
