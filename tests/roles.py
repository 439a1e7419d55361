"""Starting a role as a process, as systemd does: `python -m ROLE serve --config PATH`.

A role is ready when it says READY=1 on `$NOTIFY_SOCKET`, which it does once its
sockets accept connections. Waiting for a socket file instead is a race: the file
exists after bind() and before listen(), when a connection is refused. Every test that
runs a role process starts it here:

- `start_role` waits for READY=1 (within `READY_S`) and fails with the role's log if
  the role exits first or never gets ready; `RunningRole.stop` sends SIGTERM and
  returns how the role ended.
- `fail_to_start` launches a role the same way and expects it to exit without getting
  ready (a bad config, a second instance), returning its exit code and log.

The notify socket is a datagram socket in the abstract namespace (`@…`), so it needs no
file and no short path. stdout and stderr go to a log file the caller names (appended to,
so a restarted role's file holds every run); `log` returns what this run wrote.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

READY_S = 30.0
"""How long a role may take to say READY=1."""
STOP_S = 20.0
"""How long a role may take to exit after SIGTERM."""


@dataclass(frozen=True)
class Ended:
    """How a role process ended."""

    returncode: int
    log: str
    """Everything this run wrote to stdout and stderr."""
    notified: tuple[str, ...]
    """What else it said on `$NOTIFY_SOCKET` besides READY=1: STOPPING=1 on a clean stop."""


class RunningRole:
    """One `ROLE serve --config PATH` process and its notify socket."""

    def __init__(
        self, role: str, config: Path, *, log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.role = role
        self.log_path = log
        self.ready: str | None = None
        """The READY=1 datagram (with its STATUS=…) once the role has sent it."""
        self._said: list[str] = []
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        address = f"boxmaker-test-{os.getpid()}-{secrets.token_hex(6)}"
        self._notify.bind("\0" + address)
        self._offset = log.stat().st_size if log.exists() else 0
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", role, "serve", "--config", os.fspath(config)],
                env={**os.environ, **(env or {}), "NOTIFY_SOCKET": "@" + address},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )

    def log(self) -> str:
        """What this run has written so far."""
        with self.log_path.open("rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")

    def wait_ready(self) -> bool:
        """Wait for READY=1: True once said, False if the process exited first.

        Raises:
            TimeoutError: neither happened within `READY_S`.
        """
        deadline = time.monotonic() + READY_S
        pidfd = os.pidfd_open(self.process.pid)  # readable once the process has exited
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self._notify, selectors.EVENT_READ)
                selector.register(pidfd, selectors.EVENT_READ)
                while True:
                    for datagram in self._receive_all():
                        if "READY=1" in datagram.split("\n"):
                            self.ready = datagram
                            return True
                    if self.process.poll() is not None:
                        return False
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"{self.role} did not say READY=1 in {READY_S} s")
                    selector.select(remaining)
        finally:
            os.close(pidfd)

    def stop(self) -> Ended:
        """Send SIGTERM and wait (up to `STOP_S`) for the role to exit.

        Raises:
            AssertionError: it did not exit; it is killed, and the message holds its log.
        """
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.role} did not stop on SIGTERM within {STOP_S} s:\n{self.log()}"
            ) from None
        return self.ended()

    def kill(self) -> None:
        """Kill the process if it still runs (cleanup after a failed test); no questions."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._notify.close()

    def ended(self) -> Ended:
        """How the process ended; it must have exited."""
        returncode = self.process.poll()
        assert returncode is not None, f"{self.role} is still running"
        if self._notify.fileno() != -1:
            self._receive_all()
            self._notify.close()
        notified = tuple(d for d in self._said if d != self.ready)
        return Ended(returncode, self.log(), notified)

    def _receive_all(self) -> list[str]:
        """Every datagram waiting now, without waiting for more."""
        got: list[str] = []
        with contextlib.suppress(BlockingIOError):
            while True:
                got.append(self._notify.recv(65536, socket.MSG_DONTWAIT).decode())
        self._said.extend(got)
        return got


def start_role(
    role: str, config: Path, *, log: Path, env: dict[str, str] | None = None
) -> RunningRole:
    """Start `role` with `config` and return once it has said READY=1.

    Raises:
        AssertionError: it exited first, or did not get ready in time (then it is
            killed); the message holds its log.
    """
    running = RunningRole(role, config, log=log, env=env)
    try:
        ready = running.wait_ready()
    except TimeoutError as exc:
        running.kill()
        raise AssertionError(f"{exc}:\n{running.log()}") from None
    if not ready:
        ended = running.ended()
        raise AssertionError(f"{role} exited {ended.returncode} before READY=1:\n{ended.log}")
    return running


def fail_to_start(
    role: str, config: Path, *, log: Path, env: dict[str, str] | None = None
) -> Ended:
    """Launch `role` as `start_role` does, expecting it to exit without getting ready.

    Raises:
        AssertionError: it got ready after all (then it is stopped), or neither exited
            nor got ready in time (then it is killed).
    """
    running = RunningRole(role, config, log=log, env=env)
    try:
        ready = running.wait_ready()
    except TimeoutError as exc:
        running.kill()
        raise AssertionError(f"{exc} and did not exit:\n{running.log()}") from None
    if ready:
        ended = running.stop()
        raise AssertionError(f"{role} started, but was expected to fail:\n{ended.log}")
    return running.ended()
