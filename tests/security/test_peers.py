"""Hole 5 of issue 12, the other half: who may reach a socket, and who may read a file.

Where the roles run as their own users (docs/install.md), each socket directory is given
to the one peer's group, the server makes its socket 0660 there, and it checks the
peer's uid against `[peers]` before reading a byte. Files a role writes in a directory
given to a group are readable by that group (and by nobody else).
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
import trio

import proto
from loopd._sessions import SessionStore

CAP_S = 10
NOBODY = 65534

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")


async def _echo(request: proto.Message, conn: proto.Connection) -> proto.Message:
    return proto.Ok()


def _as_nobody_send(path: Path) -> bytes:
    """Connect as uid/gid 65534 in a child process; what the server answered."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become nobody, ask, report
        try:
            os.close(read)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(os.fspath(path))
                sock.sendall(proto.encode_frame(proto.MemoryBlock()))
                answer = b""
                while chunk := sock.recv(4096):
                    answer += chunk
            os.write(write, b"ok:" + answer)
        except OSError as exc:
            os.write(write, f"error:{exc.__class__.__name__}".encode())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 4096):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return data


async def _serve(nursery: trio.Nursery, path: Path, peers: frozenset[int]) -> trio.Event:
    shutdown = trio.Event()
    await nursery.start(
        lambda task_status: proto.serve_unix(
            proto.LOOP_MEMORY,
            path,
            _echo,
            shutdown=shutdown,
            peers=peers,
            task_status=task_status,
        )
    )
    return shutdown


@root_only
@pytest.mark.parametrize(("peers", "answered"), [(frozenset(), False), (frozenset({NOBODY}), True)])
async def test_only_a_listed_peer_is_answered(
    nursery: trio.Nursery, short_dir: Path, peers: frozenset[int], answered: bool
) -> None:
    directory = short_dir / "run" / "loop-memory"
    directory.mkdir(parents=True)
    os.chmod(short_dir, 0o755)
    os.chmod(short_dir / "run", 0o755)
    os.chown(directory, -1, NOBODY)
    os.chmod(directory, 0o2750)  # given to the peer's group, as boxmaker.tmpfiles does
    path = directory / "memory.sock"
    with trio.fail_after(CAP_S):
        shutdown = await _serve(nursery, path, peers)
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        data = await trio.to_thread.run_sync(_as_nobody_send, path)
        shutdown.set()
    if answered:
        assert data.startswith(b"ok:"), data
        assert proto.decode_body(data[3 + proto.HEADER_BYTES :]) == proto.Ok()
    else:  # closed before a byte was read or written: nothing came back
        assert data in (b"ok:", b"error:BrokenPipeError", b"error:ConnectionResetError"), data


@root_only
async def test_a_private_socket_is_not_reached_by_another_user(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    os.chmod(short_dir, 0o755)
    path = short_dir / "run" / "loop-memory" / "memory.sock"
    with trio.fail_after(CAP_S):
        shutdown = await _serve(nursery, path, frozenset({NOBODY}))
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        data = await trio.to_thread.run_sync(_as_nobody_send, path)
        shutdown.set()
    assert data == b"error:PermissionError"  # the 0700 directory is the fence


def test_unknown_peer_users_are_a_config_error() -> None:
    with pytest.raises(proto.ConfigError, match=r"\[peers\] admin: no user 'nobody-here-42'"):
        proto.peers_of(["nobody-here-42"], "admin")
    assert proto.peers_of(["0", "1234"], "loop") == frozenset({0, 1234})


def test_what_a_role_writes_in_a_directory_given_to_a_group_the_group_reads(
    short_dir: Path,
) -> None:
    sessions = short_dir / "sessions"
    sessions.mkdir(mode=0o750)
    os.chmod(sessions, 0o2750)
    baseline = proto.Baseline(
        session="chat-groupmodes01", epoch=0, created="t", model="m", system="s", tools=[]
    )
    session = SessionStore(sessions).create("chat-groupmodes01", baseline)
    session.append(proto.UserRecord(time="t", content="hi"))
    assert stat.S_IMODE(session.directory.stat().st_mode) & 0o777 == 0o750
    for name in (proto.BASELINE_FILE, proto.LOG_FILE):
        assert stat.S_IMODE((session.directory / name).stat().st_mode) == 0o640, name


def test_what_a_role_writes_in_a_private_directory_stays_private(short_dir: Path) -> None:
    audit = short_dir / "audit"
    audit.mkdir(mode=0o700)
    proto.append_line(audit / "2026-12.jsonl", b"{}")
    proto.write_atomically(audit / "head", b"x")
    for name in ("2026-12.jsonl", "head"):
        assert stat.S_IMODE((audit / name).stat().st_mode) == 0o600
    shared = short_dir / "shared"
    shared.mkdir(mode=0o750)
    os.chmod(shared, 0o750)
    proto.append_line(shared / "2026-12.jsonl", b"{}")
    assert stat.S_IMODE((shared / "2026-12.jsonl").stat().st_mode) == 0o640


def test_the_approval_key_is_shared_and_the_audit_key_never(short_dir: Path) -> None:
    keys = short_dir / "keys"
    keys.mkdir(mode=0o750)
    os.chmod(keys, 0o750)
    proto.ensure_key(keys / "approval.key", shared=True)
    proto.ensure_key(keys / "audit.key")
    assert stat.S_IMODE((keys / "approval.key").stat().st_mode) == 0o640
    assert stat.S_IMODE((keys / "audit.key").stat().st_mode) == 0o600
    os.chmod(keys / "audit.key", 0o644)
    with pytest.raises(proto.KeyUnusable, match="readable by other users"):
        proto.read_key(keys / "audit.key")
