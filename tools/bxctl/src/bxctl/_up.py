"""`bxctl up`: memoryd, brokerd and loopd as child processes, for a one-machine install.

Each role is started with its config from `{home}/config/`, in dependency order, and
must report READY=1 on its own notify socket (the systemd protocol) before the next
starts. Their logs are streamed here, prefixed by role. Ctrl-C or SIGTERM stops them
all (loopd first); if one dies, bxctl says which and why and stops the others.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import trio

import proto

from ._chat import model_hint
from ._common import CommandError, Sockets, inline
from ._embedded import (
    embedded_configured,
    find_gguf,
    free_port,
    server_command,
    worth_showing,
)
from ._init import init_home

__all__ = ["ROLES", "up"]

ROLES = ("memoryd", "brokerd", "loopd")
READY_DEADLINE_S = 60.0
MODEL_READY_DEADLINE_S = 180.0
STOP_DEADLINE_S = 15.0


@dataclass
class _Child:
    role: str
    process: trio.Process
    notify: trio.socket.SocketType | None
    show: Callable[[str], bool] = lambda line: True
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=5))
    exited: trio.Event = field(default_factory=trio.Event)


async def _pump_logs(child: _Child) -> None:
    stream = child.process.stderr
    assert stream is not None
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace")
            child.tail.append(line)
            if child.show(line):
                # A role's log line quotes outside text; the model server's is outside text.
                print(f"{child.role:>7} | {inline(line)}", file=sys.stderr, flush=True)
    if buffer:
        child.tail.append(buffer.decode(errors="replace"))


async def _watch_exit(child: _Child) -> None:
    await child.process.wait()
    child.exited.set()


async def _wait_ready(child: _Child, notify: trio.socket.SocketType) -> None:
    async with trio.open_nursery() as race:

        async def died() -> None:
            await child.exited.wait()
            race.cancel_scope.cancel()

        race.start_soon(died)
        with trio.fail_after(READY_DEADLINE_S):
            while True:
                data = await notify.recv(4096)
                if b"READY=1" in data.split(b"\n"):
                    race.cancel_scope.cancel()
                    return


async def _spawn(
    nursery: trio.Nursery,
    name: str,
    command: list[str],
    env: dict[str, str],
    notify: trio.socket.SocketType | None = None,
) -> _Child:
    process = await trio.lowlevel.open_process(
        command,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # Ctrl-C reaches bxctl only; bxctl stops each child once
    )
    print(f"bxctl: started {name} (pid {process.pid})", file=sys.stderr, flush=True)
    child = _Child(name, process, notify)
    nursery.start_soon(_pump_logs, child)
    nursery.start_soon(_watch_exit, child)
    return child


def _died_while_starting(child: _Child) -> CommandError:
    last = child.tail[-1] if child.tail else "no output"
    return CommandError(
        f"{child.role} exited with code {child.process.returncode} while starting: {last}"
    )


async def _start(
    nursery: trio.Nursery, role: str, home: Path, notify_dir: Path, extra_env: dict[str, str]
) -> _Child:
    config = home / "config" / f"{role}.toml"
    notify_path = notify_dir / f"{role}.notify"
    notify = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_DGRAM)
    await notify.bind(os.fspath(notify_path))
    env = {**os.environ, "NOTIFY_SOCKET": os.fspath(notify_path), **extra_env}
    # the notify socket stays open: the role says STOPPING=1 on it later
    child = await _spawn(
        nursery,
        role,
        [sys.executable, "-m", role, "serve", "--config", os.fspath(config)],
        env,
        notify,
    )
    try:
        await _wait_ready(child, notify)
    except trio.TooSlowError:
        raise CommandError(f"{role} did not report ready within {READY_DEADLINE_S:g} s") from None
    if child.exited.is_set():
        raise _died_while_starting(child)
    return child


async def _start_model(nursery: trio.Nursery) -> tuple[_Child, str]:
    gguf = find_gguf()
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    child = await _spawn(nursery, "model", server_command(gguf, port), dict(os.environ))
    child.show = worth_showing
    print(f"bxctl: loading the embedded demo model ({gguf.name}) …", file=sys.stderr, flush=True)
    async with httpx.AsyncClient(timeout=2.0) as http:
        with trio.move_on_after(MODEL_READY_DEADLINE_S) as waited:
            while not child.exited.is_set():
                try:
                    if (await http.get(f"{url}/models")).status_code == 200:
                        return child, url
                except httpx.HTTPError:
                    pass
                await trio.sleep(0.2)
    if waited.cancelled_caught:
        raise CommandError(
            f"the embedded model did not answer within {MODEL_READY_DEADLINE_S:g} s at {url}"
        )
    raise _died_while_starting(child)


async def _stop(children: list[_Child]) -> None:
    with trio.CancelScope(shield=True):
        for child in reversed(children):
            if child.exited.is_set():
                continue
            child.process.send_signal(signal.SIGTERM)
            with trio.move_on_after(STOP_DEADLINE_S):
                await child.exited.wait()
            if not child.exited.is_set():
                print(
                    f"bxctl: {child.role} did not stop in {STOP_DEADLINE_S:g} s; killing it",
                    file=sys.stderr,
                )
                child.process.kill()
                await child.exited.wait()
        for child in children:
            if child.notify is not None:
                child.notify.close()


def _banner(home: Path) -> str:
    sockets = Sockets(home)
    rows = [
        f"boxmaker is up (home {home})",
        *(f"  {spec.name:>13}: {sockets.path(spec)}" for spec in proto.SOCKETS),
        "chat with it:   bxctl chat" + ("" if _default_home(home) else f" --home {home}"),
        "stop it:        Ctrl-C",
    ]
    return "\n".join(rows)


def _default_home(home: Path) -> bool:
    return home == proto.resolve_home(None)


async def up(home: Path, *, on_ready: trio.Event | None = None) -> int:
    """Start the three roles and supervise them until a signal or a death."""
    if not (home / "config" / "memoryd.toml").exists():
        created = init_home(home)
        print(
            f"bxctl: created a new home in {home} ({len(created)} files and folders)",
            file=sys.stderr,
        )
    notify_dir = Path(tempfile.mkdtemp(prefix="bxup", dir="/tmp"))
    children: list[_Child] = []
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                try:
                    loopd_env: dict[str, str] = {}
                    if embedded_configured(home):
                        model, url = await _start_model(nursery)
                        children.append(model)
                        loopd_env[proto.EMBEDDED_URL_ENV] = url
                    for role in ROLES:
                        extra = loopd_env if role == "loopd" else {}
                        children.append(await _start(nursery, role, home, notify_dir, extra))
                except CommandError:
                    await _stop(children)
                    nursery.cancel_scope.cancel()
                    raise
                print(_banner(home), file=sys.stderr, flush=True)
                hint = await model_hint(home)
                if hint:
                    print(f"bxctl: note: {inline(hint)}", file=sys.stderr, flush=True)
                if on_ready is not None:
                    on_ready.set()
                code = await _supervise(children, signals)
                await _stop(children)
                nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(notify_dir, ignore_errors=True)
    return code


async def _supervise(children: list[_Child], signals: AsyncIterator[int]) -> int:
    outcome: list[int] = []
    async with trio.open_nursery() as watch:

        async def on_signal() -> None:
            async for signum in signals:
                print(f"\nbxctl: {signal.Signals(signum).name}; stopping boxmaker", file=sys.stderr)
                outcome.append(0)
                watch.cancel_scope.cancel()
                return

        async def on_death(child: _Child) -> None:
            await child.exited.wait()
            last = inline(child.tail[-1]) if child.tail else "no output"
            print(
                f"bxctl: {child.role} exited with code {child.process.returncode} "
                f"({last}); stopping the others",
                file=sys.stderr,
            )
            outcome.append(1)
            watch.cancel_scope.cancel()

        watch.start_soon(on_signal)
        for child in children:
            watch.start_soon(on_death, child)
    return outcome[0] if outcome else 1
