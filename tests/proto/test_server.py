"""serve_unix and call over real Unix sockets: claiming, modes, peers, deadlines, errors."""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path

import pytest
import trio

import proto
from proto import (
    LOOP_MEMORY,
    Connection,
    Error,
    MemoryBlock,
    MemoryBlockReply,
    Message,
    Ok,
    ServiceError,
    SessionUpdated,
)

CAP_S = 10  # every test here fails instead of hanging


async def _echo_block(request: Message, conn: Connection) -> Message:
    if isinstance(request, MemoryBlock):
        return MemoryBlockReply(text=f"hello uid {conn.peer_uid}")
    if isinstance(request, SessionUpdated):
        if request.session == "chat-refused1":
            raise ServiceError("nope", "refused on purpose", runbook="memory-unavailable")
        if request.session == "chat-crashes1":
            raise RuntimeError("a handler bug")
        return Ok()
    raise AssertionError(request)


async def _start(nursery: trio.Nursery, path: Path, read_timeout_s: float = 10.0) -> trio.Event:
    shutdown = trio.Event()
    await nursery.start(
        lambda task_status: proto.serve_unix(
            LOOP_MEMORY,
            path,
            _echo_block,
            shutdown=shutdown,
            read_timeout_s=read_timeout_s,
            task_status=task_status,
        )
    )
    return shutdown


def _raw_request(path: Path, payload: bytes) -> bytes:
    """Send raw bytes with a blocking socket and return everything the server sends back."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(os.fspath(path))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _decode_reply(raw: bytes) -> Message:
    size = int.from_bytes(raw[:4], "big")
    assert len(raw) == 4 + size
    return proto.decode_body(raw[4:])


async def test_round_trip_and_modes(nursery: trio.Nursery, short_dir: Path) -> None:
    path = short_dir / "run" / "loop-memory" / "memory.sock"
    with trio.fail_after(CAP_S):
        await _start(nursery, path)
        reply = await proto.call(path, MemoryBlock(), MemoryBlockReply)
    assert reply.text == f"hello uid {os.geteuid()}"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((short_dir / "run").stat().st_mode) == 0o700, "run/ made too: private"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_ISSOCK(path.stat().st_mode)


async def test_service_error_and_handler_crash_become_error_frames(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "m.sock"
    with trio.fail_after(CAP_S):
        await _start(nursery, path)
        with pytest.raises(proto.RemoteError) as refused:
            await proto.call(path, SessionUpdated(session="chat-refused1"), Ok)
        with pytest.raises(proto.RemoteError) as crashed:
            await proto.call(path, SessionUpdated(session="chat-crashes1"), Ok)
        # and the server still serves
        assert await proto.call(path, SessionUpdated(session="chat-fine0001"), Ok) == Ok()
    assert refused.value.error == Error(
        code="nope", message="refused on purpose", runbook="memory-unavailable"
    )
    assert crashed.value.code == "internal"
    assert "a handler bug" not in crashed.value.error.message  # no internals to the peer


async def test_bad_input_gets_defined_errors_and_server_survives(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "m.sock"
    with trio.fail_after(CAP_S):
        await _start(nursery, path)
        huge = await trio.to_thread.run_sync(_raw_request, path, b"\xff\xff\xff\xff")
        garbage = await trio.to_thread.run_sync(_raw_request, path, b"\x00\x00\x00\x05hello")
        unknown = b'{"kind":"launch_missiles"}'
        unknown_kind = await trio.to_thread.run_sync(
            _raw_request, path, len(unknown).to_bytes(4, "big") + unknown
        )
        other_socket = proto.encode_frame(proto.Reindex())
        wrong = await trio.to_thread.run_sync(_raw_request, path, other_socket)
        half = await trio.to_thread.run_sync(_raw_request, path, b"\x00\x00")
        empty = await trio.to_thread.run_sync(_raw_request, path, b"")
        still = await proto.call(path, MemoryBlock(), MemoryBlockReply)
    too_large = _decode_reply(huge)
    assert isinstance(too_large, Error)
    assert too_large.code == "frame-too-large"
    for raw in (garbage, unknown_kind):
        reply = _decode_reply(raw)
        assert isinstance(reply, Error)
        assert reply.code == "bad-frame"
    wrong_reply = _decode_reply(wrong)
    assert isinstance(wrong_reply, Error)
    assert wrong_reply.code == "wrong-socket"
    assert "'reindex'" in wrong_reply.message
    half_reply = _decode_reply(half)
    assert isinstance(half_reply, Error)
    assert half_reply.code == "bad-frame"
    assert empty == b""  # a probe: closed quietly
    assert still.text.startswith("hello")


async def test_slow_client_is_cut_at_the_deadline_while_others_are_served(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "m.sock"
    with trio.fail_after(CAP_S):
        await _start(nursery, path, read_timeout_s=0.5)
        slow = await trio.open_unix_socket(os.fspath(path))
        await slow.send_all(b"\x00\x00")  # half a header, then silence
        started = trio.current_time()
        served = await proto.call(path, MemoryBlock(), MemoryBlockReply)
        assert served.text.startswith("hello")
        assert await slow.receive_some(100) == b""  # the server hung up on it
        waited = trio.current_time() - started
        await slow.aclose()
    assert 0.4 <= waited < 5


async def test_stale_socket_is_replaced_and_live_one_refused(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "m.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.fspath(path))
    stale.close()  # the file stays: a crashed server's leftover
    assert stat.S_ISSOCK(path.lstat().st_mode)
    with trio.fail_after(CAP_S):
        await _start(nursery, path)
        assert (await proto.call(path, MemoryBlock(), MemoryBlockReply)).text
        with pytest.raises(proto.SocketPathError, match="live process"):
            await proto.serve_unix(LOOP_MEMORY, path, _echo_block, shutdown=trio.Event())


async def test_non_socket_file_is_refused(short_dir: Path) -> None:
    path = short_dir / "m.sock"
    path.write_text("precious")
    with pytest.raises(proto.SocketPathError, match="not a socket"):
        await proto.serve_unix(LOOP_MEMORY, path, _echo_block, shutdown=trio.Event())
    assert path.read_text() == "precious"


async def test_overlong_path_is_refused(short_dir: Path) -> None:
    path = short_dir / ("x" * 120) / "m.sock"
    with pytest.raises(proto.SocketPathError, match="limit is 107"):
        await proto.serve_unix(LOOP_MEMORY, path, _echo_block, shutdown=trio.Event())


async def test_shutdown_drains_and_unlinks_only_our_socket(short_dir: Path) -> None:
    path = short_dir / "m.sock"
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            shutdown = await _start(nursery, path)
            shutdown.set()
    assert not path.exists()

    # A successor bound the path while we were shutting down: its socket stays.
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            shutdown = await _start(nursery, path)
            path.unlink()
            successor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            successor.bind(os.fspath(path))
            shutdown.set()
    try:
        assert stat.S_ISSOCK(path.lstat().st_mode)
    finally:
        successor.close()


async def test_unreachable_socket_is_a_clear_error(short_dir: Path) -> None:
    with pytest.raises(proto.Unreachable, match="no such socket"):
        await proto.call(short_dir / "nobody.sock", MemoryBlock(), MemoryBlockReply)


def _connect_as(uid: int, path: Path, result: Path) -> None:
    """In a forked child: drop to `uid`, connect, send a request, record what came back."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.setgid(uid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(os.fspath(path))
                frame = proto.encode_frame(MemoryBlock())
                try:
                    sock.sendall(frame)
                    got = sock.recv(65536)
                except OSError as exc:
                    got = f"oserror {exc.errno}".encode()
            result.write_bytes(got)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another uid")
async def test_peer_of_another_uid_is_closed_without_a_reply(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    path = short_dir / "run" / "m.sock"
    result = short_dir / "result"
    with trio.fail_after(CAP_S):
        await _start(nursery, path)
        # Open the fences on purpose, as a mistaken chmod would: the uid check must hold.
        os.chmod(short_dir, 0o777)
        os.chmod(path.parent, 0o777)
        os.chmod(path, 0o666)
        os.chmod(result.parent, 0o777)
        await trio.to_thread.run_sync(_connect_as, 65534, path, result)
        got = result.read_bytes()
        assert (await proto.call(path, MemoryBlock(), MemoryBlockReply)).text
    assert got in (b"",) or got.startswith(b"oserror")
    assert b"hello" not in got


def test_peercred_layout_matches_the_kernel() -> None:
    # The server reads struct ucred as three ints; check that on this platform.
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        raw = a.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
    assert (pid, uid) == (os.getpid(), os.geteuid())


async def test_an_existing_directory_keeps_its_mode(nursery: trio.Nursery, short_dir: Path) -> None:
    # A socket configured straight into a shared directory (say /tmp) must not make it
    # private: only a directory serve_unix creates gets 0700.
    os.chmod(short_dir, 0o1777)
    with trio.fail_after(CAP_S):
        await _start(nursery, short_dir / "m.sock")
    assert stat.S_IMODE(os.stat(short_dir).st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(short_dir / "m.sock").st_mode) == 0o600


@pytest.mark.parametrize(
    ("directory", "socket"),
    [
        (0o700, 0o600),
        (0o750, 0o660),
        (0o2750, 0o660),
        (0o770, 0o660),
        (0o755, 0o600),
        (0o1777, 0o600),
    ],
)
def test_a_socket_is_open_to_the_group_only_of_a_directory_given_to_a_group(
    directory: int, socket: int
) -> None:
    assert proto._server.socket_mode(directory) == socket
