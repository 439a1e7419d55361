"""Serving one Unix socket: one request per connection, every failure an `error` reply.

`serve_unix` claims the path carefully (a non-socket file or a live socket is refused,
only a stale socket is removed), binds with the directory at 0700 and the socket at
0600 (0660 in a directory the installer gave to a peer's group), and checks each peer's
uid (SO_PEERCRED) against the allowed ones before reading a byte; then
`serve_stream` answers the connection's one request. Whatever the handler does, the
server keeps serving. On shutdown it stops accepting, lets in-flight requests finish (until
`grace_s`, or the enclosing scope's deadline: `run_role` sets the role's one drain
deadline), and unlinks only the socket it created.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket as stdlib_socket
import stat
import struct
from functools import partial
from pathlib import Path

import trio

from ._codec import MAX_FRAME
from ._connection import Handler, Peer, Request, serve_stream
from ._durable import given_to_group
from ._sockets import MAX_SOCKET_PATH_BYTES, Socket

__all__ = ["SocketPathError", "claim_socket_path", "serve_unix", "socket_answers", "socket_mode"]

log = logging.getLogger("proto.server")

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class SocketPathError(Exception):
    """A socket path that cannot be claimed: too long, not a socket, or in use."""


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
    try:
        live = socket_answers(path)
    except OSError as exc:
        raise SocketPathError(f"cannot probe {path}: {exc.strerror}") from exc
    if not live:
        path.unlink(missing_ok=True)  # nobody listening: a stale file from a crash
        return
    raise SocketPathError(f"{path} is served by a live process; is another instance running?")


def socket_answers(path: Path) -> bool:
    """Whether a process accepts connections on the Unix socket `path` (blocking, ≤ 0.5 s).

    A missing file or a refused connection is False; any other `OSError` is raised.
    """
    with stdlib_socket.socket(stdlib_socket.AF_UNIX, stdlib_socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(os.fspath(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
    return True


def _make_private_dir(directory: Path) -> int:
    """Create the socket's directory, and each missing folder above it, at 0700.

    A home's `run/` is one of those. An existing directory is never chmodded: it may be
    shared (a socket configured straight into /tmp must not make /tmp private), or made
    by the installer for a peer that runs as another user (group access,
    docs/install.md). The peer's uid is checked, so a looser directory is logged, not
    fatal. Returns the directory's mode.
    """
    missing = []
    folder = directory
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    st = directory.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise SocketPathError(f"{directory} is not a directory")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o007:
        log.warning("socket directory %s is mode %o: open to every user", directory, mode)
    return mode


def socket_mode(directory_mode: int) -> int:
    """0600; 0660 where the installer gave the directory to a peer's group, and only it."""
    return 0o660 if given_to_group(directory_mode) else 0o600


async def serve_unix(
    spec: Socket[Request],
    path: Path,
    handler: Handler[Request],
    *,
    shutdown: trio.Event,
    read_timeout_s: float = 10.0,
    grace_s: float = math.inf,
    max_frame_bytes: int = MAX_FRAME,
    peers: frozenset[int] = frozenset(),
    task_status: trio.TaskStatus[Path] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `spec`'s kinds on `path` until `shutdown` is set, then drain.

    A connection is served only when its peer runs as this process's user, as root, or as
    one of `peers` (uids); any other is closed before a byte is read, and logged.

    Supports `nursery.start`: it reports the path once the socket accepts connections.
    """
    # Start-up only: a few blocking calls on the local file system, before any request.
    directory_mode = _make_private_dir(path.parent)
    claim_socket_path(path)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    try:
        await sock.bind(os.fspath(path))
        os.chmod(path, socket_mode(directory_mode))  # the directory is the outer fence
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
        allowed=frozenset({os.geteuid(), 0}) | peers,
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
    spec: Socket[Request],
    handler: Handler[Request],
    stream: trio.SocketStream,
    *,
    read_timeout_s: float,
    max_frame_bytes: int,
    allowed: frozenset[int],
) -> None:
    async with stream:
        pid, uid = _peer_credentials(stream)
        if uid not in allowed:
            log.warning("%s: refused a connection from uid %d (pid %d)", spec.name, uid, pid)
            return
        await serve_stream(
            spec,
            handler,
            stream,
            peer=Peer(pid=pid, uid=uid),
            read_timeout_s=read_timeout_s,
            max_frame_bytes=max_frame_bytes,
        )
