"""`bxctl up`: memoryd, brokerd, loopd (and mattermostd) as child processes, on one machine.

Each role is started with its config from `{home}/config/`, in dependency order, and
must report READY=1 on its own notify socket (the systemd protocol) before the next
starts. Their logs are streamed here, prefixed by role. Ctrl-C or SIGTERM stops them
all (loopd first), each given its drain deadline and a margin before it is killed.

A role that dies is started again, as systemd's `Restart=on-failure` does in the units:
after a pause that doubles from one second while it keeps dying soon after it starts.
A role that dies `RESTART_LIMIT` times in a row within `QUICK_DEATH_S` of starting is
in a crash loop (systemd's start limit: 5 in 10 s); bxctl then says which role, with its
own last error, and stops the others. An open `bxctl chat` reaches the new loopd on its
next message.

mattermostd, the Mattermost bridge, runs when `config/mattermost.toml` exists, and is the
one role boxmaker can do without: if it cannot start, keeps dying, or stops for the
owner (`proto.NEEDS_OWNER_EXIT`: a refused token, a bad config), bxctl says why and the
others go on; it is not started again until `bxctl up` is.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
import trio

import proto

from ._chat import model_hint
from ._common import CommandError, Sockets, bxctl, given_home, inline
from ._embedded import (
    context_tokens,
    embedded_configured,
    find_gguf,
    free_port,
    server_command,
    worth_showing,
)
from ._init import init_home

__all__ = ["ROLES", "up"]

ROLES = ("memoryd", "brokerd", "loopd")
BRIDGE = "mattermostd"
CONFIG_FILES = {BRIDGE: "mattermost.toml"}
"""A role's config file in `{home}/config/`, where it is not `ROLE.toml`."""
READY_DEADLINE_S = 60.0
MODEL_READY_DEADLINE_S = 180.0
STOP_MARGIN_S = 15.0
"""How much longer than a role's drain deadline bxctl waits before it kills the role."""
RESTART_LIMIT = 5
QUICK_DEATH_S = 10.0
FIRST_PAUSE_S = 1.0
LONGEST_PAUSE_S = 30.0
"""A dying role is started again after `FIRST_PAUSE_S`, then twice as long each time."""


@dataclass
class _Child:
    role: str
    process: trio.Process
    notify: trio.socket.SocketType | None
    show: Callable[[str], bool] = lambda line: True
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=50))
    exited: trio.Event = field(default_factory=trio.Event)
    stop_deadline_s: float = proto.DEFAULT_DRAIN_S + STOP_MARGIN_S

    def why(self) -> str:
        """Why it ended: the signal that killed it, else its last error line, else its end."""
        code = self.process.returncode
        if code is not None and code < 0:
            # An error line before a signal is one the role survived, not why it ended.
            return f"killed by {signal.Signals(-code).name}"
        for line in reversed(self.tail):
            if ": ERROR " in line or ": CRITICAL " in line or "Traceback" in line:
                return line
        if code == 0:
            return "it stopped as asked to, by someone else than bxctl"
        return self.tail[-1] if self.tail else "no output"


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
    """Until the child says READY=1, or dies (no deadline of its own: the caller's)."""
    async with trio.open_nursery() as race:

        async def died() -> None:
            await child.exited.wait()
            race.cancel_scope.cancel()

        race.start_soon(died)
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
    lifeline = env.get(proto.SUPERVISOR_FD_ENV)
    process = await trio.lowlevel.open_process(
        command,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # Ctrl-C reaches bxctl only; bxctl stops each child once
        pass_fds=(int(lifeline),) if lifeline is not None else (),
    )
    print(f"bxctl: started {name} (pid {process.pid})", file=sys.stderr, flush=True)
    child = _Child(name, process, notify)
    nursery.start_soon(_pump_logs, child)
    nursery.start_soon(_watch_exit, child)
    return child


def _died_while_starting(child: _Child) -> CommandError:
    return CommandError(
        f"{child.role} exited with code {child.process.returncode} while starting: {child.why()}"
    )


def _stop_deadline(home: Path, role: str) -> float:
    """A role's drain deadline (from its config) and bxctl's margin."""
    kinds: dict[
        str,
        type[
            proto.MemorydConfig | proto.BrokerdConfig | proto.LoopdConfig | proto.MattermostConfig
        ],
    ] = {
        "memoryd": proto.MemorydConfig,
        "brokerd": proto.BrokerdConfig,
        "loopd": proto.LoopdConfig,
        BRIDGE: proto.MattermostConfig,
    }
    try:
        config = proto.read_config(_config_path(home, role), kinds[role])
    except proto.ConfigError:
        return proto.DEFAULT_DRAIN_S + STOP_MARGIN_S  # the role itself says what is wrong
    return config.sockets.drain_s + STOP_MARGIN_S


def _config_path(home: Path, role: str) -> Path:
    return home / "config" / CONFIG_FILES.get(role, f"{role}.toml")


def bridge_configured(home: Path) -> bool:
    """Whether the home has a Mattermost bridge to run."""
    return _config_path(home, BRIDGE).is_file()


async def _start(
    nursery: trio.Nursery, role: str, home: Path, notify_dir: Path, extra_env: dict[str, str]
) -> _Child:
    config = _config_path(home, role)
    notify_path = notify_dir / f"{role}.notify"
    notify_path.unlink(missing_ok=True)  # a role started again: its old socket's file
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
    child.stop_deadline_s = _stop_deadline(home, role)
    with trio.move_on_after(READY_DEADLINE_S) as waited:
        await _wait_ready(child, notify)
    died = child.exited.is_set()
    if not died and not waited.cancelled_caught:
        return child
    # A failed start leaves nothing behind: a supervisor that tries again and again
    # would otherwise keep a notify socket (and a process to reap) per attempt.
    if not died:
        child.process.kill()  # SIGKILL: it exits, and `_watch_exit` reaps it
        with trio.CancelScope(shield=True):
            await child.exited.wait()
    notify.close()
    if died:
        raise _died_while_starting(child)
    raise CommandError(f"{role} did not report ready within {READY_DEADLINE_S:g} s")


async def _start_model(
    nursery: trio.Nursery, home: Path, extra_env: dict[str, str], *, port: int | None = None
) -> tuple[_Child, str]:
    gguf = find_gguf()
    port = port or free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = server_command(gguf, port, context_tokens(home))
    child = await _spawn(nursery, "model", command, {**os.environ, **extra_env})
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
            with trio.move_on_after(child.stop_deadline_s):
                await child.exited.wait()
            if not child.exited.is_set():
                print(
                    f"bxctl: {child.role} did not stop in {child.stop_deadline_s:g} s; killing it",
                    file=sys.stderr,
                )
                child.process.kill()
                await child.exited.wait()
        for child in children:
            if child.notify is not None:
                child.notify.close()


def _chat_command(home: Path) -> str:
    """`bxctl chat`, with `--home` unless the home is the default one.

    The `--home` given on the command line is exported as $BOXMAKER_HOME for the roles,
    so the home bxctl resolves is never "not the default" by itself; another terminal
    has neither.
    """
    if given_home() is not None:
        return bxctl("chat")
    if home == proto.DEFAULT_HOME.expanduser():
        return "bxctl chat"
    return f"bxctl chat --home {home}"


def _banner(home: Path) -> str:
    sockets = Sockets(home)
    rows = [
        f"boxmaker is up (home {home})",
        *(f"  {spec.name:>13}: {sockets.path(spec)}" for spec in proto.SOCKETS),
        f"chat with it:   {_chat_command(home)}",
        *(["or in Mattermost: post to the bot"] if bridge_configured(home) else []),
        "stop it:        Ctrl-C",
    ]
    return "\n".join(rows)


def _served(home: Path) -> Path | None:
    """A socket of the home that a live process answers on, if any (blocking, brief)."""
    for spec in proto.SOCKETS:
        path = Sockets(home).path(spec)
        with contextlib.suppress(OSError):
            if proto.socket_answers(path):
                return path
    return None


async def up(home: Path, *, on_ready: trio.Event | None = None) -> int:
    """Start the three roles and supervise them until a signal, or one keeps dying."""
    served = _served(home)
    if served is not None:
        raise CommandError(
            f"boxmaker is already running on {home} ({served} answers): another `bxctl up`, "
            f"or roles started another way. Use it (`{_chat_command(home)}`), or stop it "
            "first (Ctrl-C in its terminal)"
        )
    if not (home / "config" / "memoryd.toml").exists():
        created = init_home(home)
        print(
            f"bxctl: created a new home in {home} ({len(created)} files and folders)",
            file=sys.stderr,
        )
    notify_dir = Path(tempfile.mkdtemp(prefix="bxup", dir="/tmp"))
    children: list[_Child] = []
    # Each role watches the read end; bxctl alone holds the write end (not inherited), so
    # a bxctl killed (SIGKILL, a closed terminal) stops its roles instead of orphaning them.
    lifeline, lifeline_write = os.pipe()
    lifeline_env = {proto.SUPERVISOR_FD_ENV: str(lifeline)}
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                try:
                    loopd_env: dict[str, str] = {}
                    starters: list[Callable[[], Awaitable[_Child]]] = []
                    if embedded_configured(home):
                        model, url = await _start_model(nursery, home, lifeline_env)
                        children.append(model)
                        loopd_env[proto.EMBEDDED_URL_ENV] = url
                        starters.append(partial(_restart_model, nursery, home, lifeline_env, url))
                    for role in ROLES:
                        extra = {**lifeline_env, **(loopd_env if role == "loopd" else {})}
                        start = partial(_start, nursery, role, home, notify_dir, extra)
                        children.append(await start())
                        starters.append(start)
                    if bridge_configured(home):
                        start = partial(_start, nursery, BRIDGE, home, notify_dir, lifeline_env)
                        try:
                            children.append(await start())
                            starters.append(start)
                        except CommandError as exc:
                            print(
                                f"bxctl: the Mattermost bridge did not start ({inline(str(exc))}); "
                                "boxmaker runs without it (docs/runbook.md, mattermost-*)",
                                file=sys.stderr,
                                flush=True,
                            )
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
                code = await _supervise(children, starters, signals)
                await _stop(children)
                nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(notify_dir, ignore_errors=True)
        os.close(lifeline)
        os.close(lifeline_write)
    return code


async def _restart_model(
    nursery: trio.Nursery, home: Path, extra_env: dict[str, str], url: str
) -> _Child:
    """The embedded model again, on the port loopd already knows."""
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    child, _ = await _start_model(nursery, home, extra_env, port=port)
    return child


async def _supervise(
    children: list[_Child],
    starters: list[Callable[[], Awaitable[_Child]]],
    signals: AsyncIterator[int],
) -> int:
    """Restart whichever child dies; 0 on a signal, 1 once one keeps dying."""
    outcome: list[int] = []
    async with trio.open_nursery() as watch:

        async def on_signal() -> None:
            async for signum in signals:
                print(f"\nbxctl: {signal.Signals(signum).name}; stopping boxmaker", file=sys.stderr)
                outcome.append(0)
                watch.cancel_scope.cancel()
                return

        async def keep(slot: int) -> None:
            quick_deaths = 0
            # No jitter: one bxctl restarts one role, and "again in N s" must be exact.
            backoff = proto.Backoff(FIRST_PAUSE_S, LONGEST_PAUSE_S, jitter=False)
            started = trio.current_time()
            while True:
                child = children[slot]
                await child.exited.wait()
                if trio.current_time() - started < QUICK_DEATH_S:
                    quick_deaths += 1
                else:
                    quick_deaths = 1  # it ran a good while
                    backoff.reset()
                said = (
                    f"bxctl: {child.role} exited with code {child.process.returncode} "
                    f"({inline(child.why())})"
                )
                if child.process.returncode == proto.NEEDS_OWNER_EXIT:
                    print(
                        f"{said}; it waits for you to fix that, and is not started again "
                        "until the next `bxctl up`"
                        + ("" if child.role == BRIDGE else "; boxmaker stops"),
                        file=sys.stderr,
                        flush=True,
                    )
                    if child.role == BRIDGE:
                        return
                    outcome.append(1)
                    watch.cancel_scope.cancel()
                    return
                if quick_deaths >= RESTART_LIMIT and child.role == BRIDGE:
                    print(
                        f"{said}; it died {quick_deaths} times in a row within "
                        f"{QUICK_DEATH_S:g} s of starting, so it is not started again; the "
                        "rest of boxmaker goes on",
                        file=sys.stderr,
                        flush=True,
                    )
                    return
                if quick_deaths >= RESTART_LIMIT:
                    print(
                        f"{said}; it died {quick_deaths} times in a row within "
                        f"{QUICK_DEATH_S:g} s of starting, so boxmaker stops (its log above "
                        "says why; docs/runbook.md has the entry it names)",
                        file=sys.stderr,
                    )
                    outcome.append(1)
                    watch.cancel_scope.cancel()
                    return
                pause = backoff.next()
                print(f"{said}; starting it again in {pause:g} s", file=sys.stderr, flush=True)
                if child.notify is not None:
                    child.notify.close()
                await trio.sleep(pause)
                try:
                    children[slot] = await starters[slot]()
                except CommandError as exc:
                    print(f"bxctl: {inline(str(exc))}", file=sys.stderr, flush=True)
                    # the failed start counts as a death; wait on the dead child again
                    continue
                started = trio.current_time()
                print(f"bxctl: {child.role} is back", file=sys.stderr, flush=True)

        watch.start_soon(on_signal)
        for slot in range(len(children)):
            watch.start_soon(keep, slot)
    return outcome[0] if outcome else 1
