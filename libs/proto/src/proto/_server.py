"""Serving one socket: one request per connection, every failure an `error` reply.

`serve_unix` claims the path carefully (a non-socket file or a live socket is refused,
only a stale socket is removed), binds with the directory at 0700 and the socket at
0600, checks the peer's uid before reading a byte, reads one frame under a deadline,
refuses kinds the socket does not accept, and hands the request to the role's
handler. Whatever the handler does, the server keeps serving: a handler exception
becomes an `error` reply and one log line. On shutdown it stops accepting, gives
in-flight requests `grace_s` to finish, and unlinks only the socket it created.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket as stdlib_socket
import stat
import struct
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import trio

from ._codec import MAX_FRAME, FrameTooLarge, PeerClosed, ProtocolError, read_frame, write_frame
from ._messages import Error, Message
from ._sockets import MAX_SOCKET_PATH_BYTES, Socket

__all__ = ["Connection", "Handler", "ServiceError", "SocketPathError", "serve_unix"]

log = logging.getLogger("proto.server")

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


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


class SocketPathError(Exception):
    """A socket path that cannot be claimed: too long, not a socket, or in use."""


class Connection:
    """The peer of one request: who it is, and a way to send frames before the reply."""

    def __init__(self, stream: trio.SocketStream, *, peer_pid: int, peer_uid: int) -> None:
        self._stream = stream
        self.peer_pid = peer_pid
        self.peer_uid = peer_uid

    async def send(self, message: Message) -> None:
        """Send a frame ahead of the final reply (a progress event, an approval notice).

        Raises:
            trio.BrokenResourceError: the peer has gone; the handler may stop early.
        """
        await write_frame(self._stream, message)

    async def wait_peer_gone(self) -> None:
        """Return once the peer has closed its end (it may send nothing after its request)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while await self._stream.receive_some(1):
                pass


Handler = Callable[[Message, Connection], Awaitable[Message]]
"""A role's request handler: returns the reply, or raises `ServiceError`."""


def claim_socket_path(path: Path) -> None:
    """Make `path` free to bind: remove a stale socket, refuse anything else there."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise SocketPathError(
            f"socket path {str(path)!r} is {len(os.fsencode(path))} bytes; "
            f"the limit is {MAX_SOCKET_PATH_BYTES} (choose a shorter home or socket path)"
        )
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketPathError(f"{path} exists and is not a socket; refusing to replace it")
    with stdlib_socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(os.fspath(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)  # nobody listening: a stale file from a crash
            return
        except OSError as exc:
            raise SocketPathError(f"cannot probe {path}: {exc.strerror}") from exc
    raise SocketPathError(f"{path} is served by a live process; is another instance running?")


def _make_private_dir(directory: Path) -> None:
    """Create the socket's directory at 0700; an existing one is used as it is.

    An existing directory is never chmodded: it may be shared (a socket configured
    straight into /tmp must not make /tmp private). The socket itself is 0600 and the
    peer's uid is checked, so a looser directory is logged, not fatal.
    """
    try:
        directory.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        st = directory.stat()
        if not stat.S_ISDIR(st.st_mode):
            raise SocketPathError(f"{directory} is not a directory") from None
        if stat.S_IMODE(st.st_mode) & 0o077:
            log.warning(
                "socket directory %s is mode %o, not 0700", directory, stat.S_IMODE(st.st_mode)
            )


async def serve_unix(
    spec: Socket,
    path: Path,
    handler: Handler,
    *,
    shutdown: trio.Event,
    read_timeout_s: float = 10.0,
    grace_s: float = 5.0,
    max_frame_bytes: int = MAX_FRAME,
    task_status: trio.TaskStatus[Path] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `spec`'s kinds on `path` until `shutdown` is set, then drain.

    Supports `nursery.start`: it reports the path once the socket accepts connections.
    """
    # Start-up only: a few blocking calls on the local file system, before any request.
    _make_private_dir(path.parent)
    claim_socket_path(path)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    try:
        await sock.bind(os.fspath(path))
        os.chmod(path, 0o600)  # the 0700 directory is the real fence
        sock.listen(128)
        inode = path.stat().st_ino  # noqa: ASYNC240
    except BaseException:
        sock.close()
        raise
    listener = trio.SocketListener(sock)
    serve_one = partial(
        _serve_connection,
        spec,
        handler,
        read_timeout_s=read_timeout_s,
        max_frame_bytes=max_frame_bytes,
    )
    log.info("serving %s on %s", spec.name, path)
    try:
        async with trio.open_nursery() as in_flight:
            async with trio.open_nursery() as accepting:
                await accepting.start(
                    partial(trio.serve_listeners, serve_one, [listener], handler_nursery=in_flight)
                )
                task_status.started(path)
                await shutdown.wait()
                accepting.cancel_scope.cancel()
            in_flight.cancel_scope.deadline = trio.current_time() + grace_s
    finally:
        _unlink_if_ours(path, inode)


def _unlink_if_ours(path: Path, inode: int) -> None:
    # A successor may have replaced a socket we thought was ours: never delete theirs.
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_ino == inode:
            path.unlink()


def _peer_credentials(stream: trio.SocketStream) -> tuple[int, int]:
    raw = stream.socket.getsockopt(
        stdlib_socket.SOL_SOCKET, stdlib_socket.SO_PEERCRED, _PEERCRED.size
    )
    pid, uid, _gid = _PEERCRED.unpack(raw)
    return pid, uid


async def _serve_connection(
    spec: Socket,
    handler: Handler,
    stream: trio.SocketStream,
    *,
    read_timeout_s: float,
    max_frame_bytes: int,
) -> None:
    async with stream:
        pid, uid = _peer_credentials(stream)
        if uid not in (os.geteuid(), 0):
            log.warning("%s: refused a connection from uid %d (pid %d)", spec.name, uid, pid)
            return
        with trio.move_on_after(read_timeout_s) as deadline:
            try:
                request = await read_frame(stream, max_frame_bytes=max_frame_bytes)
            except PeerClosed:
                return  # a liveness probe, or a client that gave up
            except ProtocolError as exc:
                log.info("%s: %s from pid %d: %s", spec.name, exc.code, pid, exc)
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
        reply = await _handle(
            spec, handler, request, Connection(stream, peer_pid=pid, peer_uid=uid)
        )
        await _reply(stream, reply)


async def _handle(spec: Socket, handler: Handler, request: Message, conn: Connection) -> Message:
    try:
        return await handler(request, conn)
    except ServiceError as exc:
        return exc.to_frame()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return Error(code="peer-gone", message="the peer closed the connection")
    except Exception:
        kind = type(request).__struct_config__.tag
        log.exception("%s: %s failed", spec.name, kind)
        return Error(
            code="internal", message=f"{spec.server} failed to answer {kind!r}; its log says why"
        )


async def _reply(stream: trio.SocketStream, message: Message) -> None:
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
