"""run_role: readiness, the signal-driven drain, and systemd notification."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

import proto
from proto import LOOP_MEMORY, Connection, MemoryBlock, MemoryBlockReply, Message

CAP_S = 20


async def _reply(request: Message, conn: Connection) -> Message:
    return MemoryBlockReply(text="block")


async def test_first_sigterm_drains_and_removes_the_socket(short_dir: Path) -> None:
    path = short_dir / "m.sock"

    async def start(work: trio.Nursery, shutdown: trio.Event) -> str:
        await work.start(
            lambda task_status: proto.serve_unix(
                LOOP_MEMORY, path, _reply, shutdown=shutdown, task_status=task_status
            )
        )
        return f"serving {path}"

    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: proto.run_role(start, task_status=task_status))
            assert (await proto.call(path, MemoryBlock(), MemoryBlockReply)).text == "block"
            signal.raise_signal(signal.SIGTERM)
    assert not path.exists()


def test_resolve_home_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOXMAKER_HOME", "/tmp/from-env")
    assert proto.resolve_home("/srv/configured") == Path("/srv/configured")
    assert proto.resolve_home(None) == Path("/tmp/from-env")
    monkeypatch.delenv("BOXMAKER_HOME")
    assert proto.resolve_home(None) == Path.home() / ".boxmaker"  # a person's, not a system's


ROLE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import trio
    import proto

    path = Path(sys.argv[1])

    async def reply(request, conn):
        return proto.MemoryBlockReply(text="block")

    async def start(work, shutdown):
        await work.start(
            lambda task_status: proto.serve_unix(
                proto.LOOP_MEMORY, path, reply, shutdown=shutdown, task_status=task_status
            )
        )
        return f"serving {path}"

    proto.setup_logging("testrole")
    trio.run(proto.run_role, start)
    """
)


def test_subprocess_role_notifies_systemd_and_stops_cleanly(short_dir: Path) -> None:
    notify_path = short_dir / "notify"
    sock_path = short_dir / "role.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(os.fspath(notify_path))
        notify.settimeout(CAP_S)
        env = {**os.environ, "NOTIFY_SOCKET": os.fspath(notify_path)}
        child = subprocess.Popen(
            [sys.executable, "-c", ROLE, os.fspath(sock_path)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            ready = notify.recv(4096).decode()
            assert ready.splitlines()[0] == "READY=1"
            assert f"STATUS=serving {sock_path}" in ready
            assert sock_path.exists()
            child.send_signal(signal.SIGTERM)
            assert notify.recv(4096).decode() == "STOPPING=1"
            _, stderr = child.communicate(timeout=CAP_S)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == 0, stderr
    assert "received SIGTERM; draining" in stderr
    assert not sock_path.exists()


async def test_the_drain_deadline_is_kept_in_one_place(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Work in flight at SIGTERM: what ends within the drain ends; the rest is cancelled
    # at exactly the deadline, and the role stops then.
    finished: list[str] = []
    cancelled_at: list[float] = []

    async def start(work: trio.Nursery, shutdown: trio.Event) -> str:
        async def job(name: str, seconds: float) -> None:
            try:
                await trio.sleep(seconds)
                finished.append(name)
            except trio.Cancelled:
                cancelled_at.append(trio.current_time())
                raise

        work.start_soon(job, "short", 5)
        work.start_soon(job, "long", 100)
        return "busy"

    with trio.fail_after(1000):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: proto.run_role(start, drain_s=20, task_status=task_status)
            )
            signalled = trio.current_time()
            signal.raise_signal(signal.SIGTERM)
    assert finished == ["short"]
    assert cancelled_at == [pytest.approx(signalled + 20)]
