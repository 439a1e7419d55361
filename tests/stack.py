"""The whole of boxmaker as real processes in a temporary home, for end-to-end tests.

`running_stack` creates a home with `bxctl init` (pointing loopd at a scripted model
server), starts memoryd, brokerd and loopd as processes with their real configs, and
waits for each to report READY=1 on a notify socket, as systemd would. Roles can be
restarted one by one. Nothing of ours is faked: only the model is scripted.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from scripted_model import ScriptedModel, Step, serve_scripted_model

import proto
from bxctl._init import init_home

ROLES = ("memoryd", "brokerd", "loopd")
READY_S = 30.0


@dataclass
class Stack:
    """A running boxmaker: its home, its model, its processes."""

    home: Path
    scripted: ScriptedModel | None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def socket(self, spec: proto.Socket) -> Path:
        return spec.default_path(self.home)

    def start(self, role: str) -> None:
        notify_path = self.home / f".{role}.notify"
        notify_path.unlink(missing_ok=True)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
            notify.bind(os.fspath(notify_path))
            notify.settimeout(READY_S)
            log = open(self.logs.setdefault(role, self.home / f"{role}.log"), "ab")  # noqa: SIM115
            self.processes[role] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    role,
                    "serve",
                    "--config",
                    os.fspath(self.home / "config" / f"{role}.toml"),
                ],
                env={**os.environ, "NOTIFY_SOCKET": os.fspath(notify_path)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
            log.close()
            try:
                while b"READY=1" not in notify.recv(4096).split(b"\n"):
                    pass
            except TimeoutError:
                raise AssertionError(f"{role} did not start:\n{self.log(role)}") from None

    def stop(self, role: str) -> None:
        process = self.processes.pop(role)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"{role} did not stop on SIGTERM:\n{self.log(role)}") from None
        assert process.returncode == 0, f"{role} exited {process.returncode}:\n{self.log(role)}"

    def restart(self, role: str) -> None:
        self.stop(role)
        self.start(role)

    def log(self, role: str) -> str:
        path = self.logs.get(role)
        return path.read_text(errors="replace") if path and path.exists() else ""

    @property
    def model(self) -> ScriptedModel:
        """The scripted model server (for stacks that have one)."""
        assert self.scripted is not None, "this stack runs against a real model"
        return self.scripted

    def script(self, *steps: Step) -> None:
        """Queue the model's next answers."""
        self.model.steps.extend(steps)


@contextmanager
def running_stack(
    directory: Path,
    *steps: Step,
    model_url: str | None = None,
    stream: bool = True,
    tool_choice: str | None = None,
) -> Iterator[Stack]:
    """Start the three roles in `directory/home`; stop them (cleanly) at the end.

    The model is a scripted server playing `steps`, or the real server at `model_url`.
    """
    home = directory / "home"
    with ExitStack() as cleanup:
        scripted = None
        if model_url is None:
            scripted = cleanup.enter_context(serve_scripted_model(*steps))
            model_url = scripted.url
        init_home(home, model_url=model_url, model="scripted" if scripted else "smollm2")
        loopd_toml = home / "config" / "loopd.toml"
        text = loopd_toml.read_text()
        if not stream:
            text = text.replace("stream = true", "stream = false", 1)
        if tool_choice is not None:
            text = text.replace('# tool_choice = "auto"', f'tool_choice = "{tool_choice}"', 1)
        loopd_toml.write_text(text)
        stack = Stack(home, scripted)
        try:
            for role in ROLES:
                stack.start(role)
            yield stack
        finally:
            for role in reversed(ROLES):
                if role in stack.processes:
                    stack.stop(role)
