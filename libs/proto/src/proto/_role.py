"""The skeleton every role runs in: signals, readiness, drain, logging, the home.

```
trio.run(main)
└─ root nursery
   ├─ watch_signals   started first: the 1st SIGTERM/SIGINT drains, the 2nd cancels
   ├─ watch_supervisor under `bxctl up`: drains when bxctl is gone (its pipe closes)
   └─ work nursery    the role's sockets and background tasks, started by `start`
```
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable

import trio

from ._home import DEFAULT_DRAIN_S
from ._render import for_terminal

__all__ = [
    "STILL_READING",
    "SUPERVISOR_FD_ENV",
    "LogFormatter",
    "Role",
    "StartRole",
    "run_role",
    "sd_notify",
    "setup_logging",
    "supervisor_fd",
    "watch_signals",
    "watch_supervisor",
]

STILL_READING = "still reading: "
"""In a role's READY status: what follows is work it is still doing that the owner will
notice (memoryd's index being built), which `bxctl up` shows under its banner."""

log = logging.getLogger("proto.role")

SUPERVISOR_FD_ENV = "BOXMAKER_SUPERVISOR_FD"
"""The read end of a pipe whose write end only `bxctl up` holds: EOF means it is gone."""

StartRole = Callable[[trio.Nursery, trio.Event], Awaitable[str]]
"""Starts a role's servers and tasks in the nursery (each stopping once the event is
set) and returns a one-line status for systemd."""


@dataclasses.dataclass(frozen=True)
class Role:
    """A role ready to run: its start function and its drain deadline (from its config)."""

    start: StartRole
    drain_s: float = DEFAULT_DRAIN_S


class LogFormatter(logging.Formatter):
    """`ROLE: LEVEL logger: message`, the message rendered for a terminal on one line.

    A log line quotes what it is about (a call id, a tool name, a model server's error),
    and the owner reads it in a terminal or journald: a newline or an escape sequence in
    a quoted value must not start a forged line or drive the terminal. A traceback keeps
    its lines, each indented and rendered, so none can pass for a record of its own.
    """

    def __init__(self, role: str) -> None:
        super().__init__(f"{role}: %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The record's line, then its traceback and stack (if any), indented."""
        record.message = for_terminal(record.getMessage(), one_line=True)
        line = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        more = [record.exc_text or "", self.formatStack(record.stack_info or "")]
        return "\n".join(
            [line]
            + [
                "  " + for_terminal(part, one_line=True)
                for text in more
                for part in text.split("\n")
                if text
            ]
        )


def setup_logging(role: str, *, level: int = logging.INFO) -> None:
    """Log to stderr (journald under systemd), one line per record; call once, in main()."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogFormatter(role))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # A line per HTTP request (loopd's model calls, the bridge's Mattermost calls) would
    # bury what matters; each role logs what it does with them itself.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def sd_notify(*fields: str) -> bool:
    """Send one datagram to systemd's `$NOTIFY_SOCKET`; False when not under systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address[0] == "@":
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall("\n".join(fields).encode())
    except OSError as exc:
        log.warning("cannot notify systemd at %s: %s", address, exc)
        return False
    return True


async def watch_signals(
    shutdown: trio.Event,
    force: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Set `shutdown` on the first SIGTERM or SIGINT; cancel `force` on the second."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            name = signal.Signals(signum).name
            if not shutdown.is_set():
                log.info("received %s; draining", name)
                shutdown.set()
            else:
                log.warning("second %s; cancelling in-flight work", name)
                force.cancel()


async def watch_supervisor(fd: int, shutdown: trio.Event) -> None:
    """Set `shutdown` once the `bxctl up` that started this role is gone.

    A role under `bxctl up` runs in a session of its own (Ctrl-C reaches bxctl only,
    which stops each role once), so when bxctl is killed no signal reaches the role:
    it would run on, orphaned, holding the home's sockets, and the next `bxctl up`
    would refuse to start. bxctl holds the only write end of the pipe: the kernel
    closes it when bxctl dies, however it dies, and the read end sees EOF.
    """
    os.set_blocking(fd, False)
    try:
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                if not os.read(fd, 64):
                    break
            except BlockingIOError:
                continue
    finally:
        os.close(fd)
    if not shutdown.is_set():
        log.warning("the bxctl up that started this role is gone; draining")
        shutdown.set()


def supervisor_fd() -> int | None:
    """The pipe `bxctl up` passed (and the variable removed), or None."""
    given = os.environ.pop(SUPERVISOR_FD_ENV, None)
    if given is None:
        return None
    try:
        fd = int(given)
        os.fstat(fd)
    except (ValueError, OSError):
        log.warning("ignoring %s=%s: not an open file descriptor", SUPERVISOR_FD_ENV, given)
        return None
    return fd


async def run_role(
    start: StartRole,
    *,
    drain_s: float = DEFAULT_DRAIN_S,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a role until a signal: start it, report READY=1, drain on shutdown.

    `start` runs inside the work nursery; when it returns, the role is ready. On the first
    SIGTERM or SIGINT the role's servers stop accepting and its in-flight work goes on
    for at most `drain_s`, then the work nursery is cancelled: this is the one place the
    drain deadline is set (as hypercorn sets one graceful deadline on its server
    nursery). A second signal cancels at once.
    """
    shutdown = trio.Event()
    async with trio.open_nursery() as root:
        await root.start(watch_signals, shutdown, root.cancel_scope)
        if (fd := supervisor_fd()) is not None:
            root.start_soon(watch_supervisor, fd, shutdown)
        async with trio.open_nursery() as work:
            status = await start(work, shutdown)
            sd_notify("READY=1", f"STATUS={status}")
            log.info("ready: %s", status)
            task_status.started()
            await shutdown.wait()
            sd_notify("STOPPING=1")
            work.cancel_scope.deadline = trio.current_time() + drain_s
        root.cancel_scope.cancel()
