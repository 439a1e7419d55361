"""`bxctl up`: memoryd, brokerd, loopd (and mattermostd) as child processes, on one machine.

Each role is started with its config from `{home}/config/`, all side by side, and each
must report READY=1 on its own notify socket (the systemd protocol) before boxmaker is
up. Nothing orders them: no role calls another before a request needs it (loopd reaches
memoryd and brokerd at a turn, brokerd reaches memoryd and loopd at a call or a forget,
and each of those waits on or retries its peer), so waiting for one before starting the
next only added their start times. The embedded model's server alone comes first: loopd
is told its URL. Their logs are streamed here, prefixed by role. Ctrl-C or SIGTERM stops them
all (loopd first), each given its drain deadline and a margin before it is killed.

A role that dies is started again, as systemd's `Restart=on-failure` does in the units:
after a pause that doubles from one second while it keeps dying soon after it starts, or
failing to start. `_restarts.py` has the rule: 5 such ends in a row are a crash loop
(systemd's start limit: 5 in 10 s), and an exit `proto.NEEDS_OWNER_EXIT` waits for the
owner; either way bxctl says which role, with its own last error, and stops the others.
An open `bxctl chat` reaches the new loopd on its next message.

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
from typing import TypeAlias, assert_never

import httpx
import trio

import proto

from ._chat import model_hint
from ._common import CommandError, Sockets, bxctl, given_home, inline, program
from ._embedded import (
    context_tokens,
    embedded_configured,
    find_gguf,
    free_port,
    server_command,
    worth_showing,
)
from ._init import init_home
from ._model_install import ensure_model
from ._restarts import Died, End, FailedStart, GiveUp, Restart, RestartPolicy

__all__ = ["ROLES", "up"]

ROLES = ("memoryd", "brokerd", "loopd")
BRIDGE = "mattermostd"
CONFIG_FILES = {BRIDGE: "mattermost.toml"}
"""A role's config file in `{home}/config/`, where it is not `ROLE.toml`."""
READY_DEADLINE_S = 60.0
MODEL_READY_DEADLINE_S = 180.0
STOP_MARGIN_S = 15.0
"""How much longer than a role's drain deadline bxctl waits before it kills the role."""
_POLICY = RestartPolicy()


@dataclass
class _Child:
    role: str
    process: trio.Process
    notify: trio.socket.SocketType | None
    show: Callable[[str], bool] = lambda line: True
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=50))
    exited: trio.Event = field(default_factory=trio.Event)
    stop_deadline_s: float = proto.DEFAULT_DRAIN_S + STOP_MARGIN_S
    status: str = ""
    """What it said with READY=1 (`STATUS=`)."""

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
            lines = (await notify.recv(4096)).split(b"\n")
            if b"READY=1" in lines:
                for line in lines:
                    if line.startswith(b"STATUS="):
                        child.status = line.removeprefix(b"STATUS=").decode(errors="replace")
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


_Starter: TypeAlias = Callable[[], Awaitable[_Child | FailedStart]]
"""Starts a role (again): the child once it is ready, or how its start failed."""


async def _abandon(child: _Child, silent: str) -> FailedStart:
    """`child`'s start failed: say how, and leave nothing behind.

    A supervisor that tries again and again would otherwise keep a notify socket, and a
    process to reap (or one still running), per attempt. `silent` is what to say of a
    child still running: it never said it was ready.
    """
    if child.exited.is_set():
        report = f"{child.role} exited with code {child.process.returncode} while starting: "
        report += inline(child.why())
    else:
        report = silent
        child.process.kill()  # SIGKILL: it exits, and `_watch_exit` reaps it
        with trio.CancelScope(shield=True):
            await child.exited.wait()
    if child.notify is not None:
        child.notify.close()
    code = child.process.returncode
    assert code is not None  # `exited` is set once it is reaped
    return FailedStart(exit_code=code, report=report)


async def _start_side_by_side(starters: list[_Starter]) -> list[_Child | FailedStart]:
    """Run every starter at once; each one's outcome, in the order given, once all are known.

    A failed start does not cut the others short: each is then either ready (the caller
    stops it) or has left nothing behind (`_abandon`).
    """
    outcomes: list[_Child | FailedStart | None] = [None] * len(starters)

    async def run(slot: int) -> None:
        outcomes[slot] = await starters[slot]()

    async with trio.open_nursery() as starting:
        for slot in range(len(starters)):
            starting.start_soon(run, slot)
    return [outcome for outcome in outcomes if outcome is not None]


def _ready(started: _Child | FailedStart) -> _Child:
    """The child of a first start; a failed one stops `bxctl up` (it says why)."""
    match started:
        case _Child():
            return started
        case FailedStart(report=report):
            raise CommandError(report)
        case _:
            assert_never(started)


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
) -> _Child | FailedStart:
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
    with trio.move_on_after(READY_DEADLINE_S):
        await _wait_ready(child, notify)
        if not child.exited.is_set():
            return child
    return await _abandon(child, f"{role} did not report ready within {READY_DEADLINE_S:g} s")


def _model_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


async def _start_model(
    nursery: trio.Nursery, home: Path, gguf: Path, port: int, extra_env: dict[str, str]
) -> _Child | FailedStart:
    """The embedded model's server on `port` (the one loopd is told), once it answers."""
    url = _model_url(port)
    command = server_command(gguf, port, context_tokens(home))
    child = await _spawn(nursery, "model", command, {**os.environ, **extra_env})
    child.show = worth_showing
    print(f"bxctl: loading the embedded demo model ({gguf.name}) …", file=sys.stderr, flush=True)
    async with httpx.AsyncClient(timeout=2.0) as http:
        with trio.move_on_after(MODEL_READY_DEADLINE_S):
            while not child.exited.is_set():
                try:
                    if (await http.get(f"{url}/models")).status_code == 200:
                        return child
                except httpx.HTTPError:
                    pass
                await trio.sleep(0.2)
    return await _abandon(
        child, f"the embedded model did not answer within {MODEL_READY_DEADLINE_S:g} s at {url}"
    )


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
        return f"{program()} chat"
    return f"{program()} chat --home {home}"


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


def _still_reading(child: _Child) -> str:
    """What `child` said it was still reading when it was ready (`proto.STILL_READING`)."""
    _, marker, still = child.status.partition(proto.STILL_READING)
    return inline(still) if marker else ""


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
    if embedded_configured(home):
        await ensure_model()  # the first time: installed here, its build shown
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
                    starters: list[_Starter] = []
                    if embedded_configured(home):
                        # the port is loopd's to know: a model started again keeps it
                        port = free_port()
                        start = partial(
                            _start_model, nursery, home, find_gguf(), port, lifeline_env
                        )
                        children.append(_ready(await start()))
                        starters.append(start)
                        loopd_env[proto.EMBEDDED_URL_ENV] = _model_url(port)
                    roles: list[_Starter] = [
                        partial(
                            _start,
                            nursery,
                            role,
                            home,
                            notify_dir,
                            {**lifeline_env, **(loopd_env if role == "loopd" else {})},
                        )
                        for role in ROLES
                    ]
                    started = await _start_side_by_side(roles)
                    children.extend(c for c in started if isinstance(c, _Child))
                    for one in started:
                        _ready(one)  # the first failed start stops `bxctl up`, in ROLES order
                    starters.extend(roles)
                    if bridge_configured(home):
                        start = partial(_start, nursery, BRIDGE, home, notify_dir, lifeline_env)
                        match await start():
                            case _Child() as bridge:
                                children.append(bridge)
                                starters.append(start)
                            case FailedStart(report=report):
                                print(
                                    f"bxctl: the Mattermost bridge did not start ({report}); "
                                    "boxmaker runs without it (docs/runbook.md, mattermost-*)",
                                    file=sys.stderr,
                                    flush=True,
                                )
                except CommandError:
                    await _stop(children)
                    nursery.cancel_scope.cancel()
                    raise
                print(_banner(home), file=sys.stderr, flush=True)
                for child in children:
                    still = _still_reading(child)
                    if still:
                        print(f"{child.role} is still reading: {still}", file=sys.stderr)
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


async def _supervise(
    children: list[_Child],
    starters: list[_Starter],
    signals: AsyncIterator[int],
    policy: RestartPolicy = _POLICY,
) -> int:
    """Keep each child running (`children[slot]` is its latest); 0 on a signal, 1 on giving up.

    Giving up on the bridge, the one role boxmaker can do without, lets the others go on.
    """
    ended: list[int] = []  # the exit code of `bxctl up`, once it is known

    async with trio.open_nursery() as watch:

        def stop(code: int) -> None:
            ended.append(code)
            watch.cancel_scope.cancel()

        async def on_signal() -> None:
            async for signum in signals:
                print(f"\nbxctl: {signal.Signals(signum).name}; stopping boxmaker", file=sys.stderr)
                stop(0)
                return

        async def keep(slot: int) -> None:
            await _keep(children, slot, starters[slot], policy)
            if not _can_do_without(children[slot].role):
                stop(1)

        watch.start_soon(on_signal)
        for slot in range(len(children)):
            watch.start_soon(keep, slot)
    return ended[0] if ended else 1


async def _keep(children: list[_Child], slot: int, start: _Starter, policy: RestartPolicy) -> None:
    """Start `children[slot]` again each time it ends, until `policy` gives up on it."""
    role = children[slot].role
    ends: deque[End] = deque(maxlen=policy.limit)  # all the policy reads
    end: End = await _run(children[slot])
    while True:
        ends.append(end)
        step = policy.next_step(ends)
        match step:
            case Restart(pause_s=pause_s):
                _say(f"{end.report}; starting it again in {pause_s:g} s")
            case GiveUp(why=why) if _can_do_without(role):
                _say(f"{end.report}; {why}; the rest of boxmaker goes on")
                return
            case GiveUp(why=why):
                _say(
                    f"{end.report}; {why}; boxmaker stops (its log above says why; "
                    "docs/runbook.md has the entry it names)"
                )
                return
            case _:
                assert_never(step)
        await trio.sleep(pause_s)
        started = await start()
        match started:
            case _Child():
                children[slot] = started
                _say(f"{role} is back")
                end = await _run(started)
            case FailedStart():
                end = started
            case _:
                assert_never(started)


async def _run(child: _Child) -> Died:
    """Until `child`, ready now, ends: how long it ran, and how it ended."""
    started = trio.current_time()
    await child.exited.wait()
    if child.notify is not None:
        child.notify.close()
    code = child.process.returncode
    assert code is not None  # `exited` is set once it is reaped
    return Died(
        ran_s=trio.current_time() - started,
        exit_code=code,
        report=f"{child.role} exited with code {code} ({inline(child.why())})",
    )


def _can_do_without(role: str) -> bool:
    """Whether boxmaker goes on without `role`: the bridge only (`bxctl chat` still works)."""
    return role == BRIDGE


def _say(line: str) -> None:
    print(f"bxctl: {line}", file=sys.stderr, flush=True)
