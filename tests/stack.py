"""The whole of boxmaker as real processes in a temporary home, for end-to-end tests.

`running_stack` creates a home with `bxctl init` (pointing loopd at a scripted model
server), starts memoryd, brokerd and loopd as processes with their real configs (through
`roles.start_role`: each has said READY=1 on a notify socket, as systemd would see it).
Roles can be restarted one by one. Nothing of ours is faked: only the model is scripted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from roles import RunningRole, start_role
from scripted_model import ScriptedModel, Step, serve_scripted_model

import proto
from bxctl._init import init_home

ROLES = ("memoryd", "brokerd", "loopd")


@dataclass
class Stack:
    """A running boxmaker: its home, its model, its processes."""

    home: Path
    scripted: ScriptedModel | None
    processes: dict[str, RunningRole] = field(default_factory=dict)

    def socket(self, spec: proto.Socket[proto.Message]) -> Path:
        return spec.default_path(self.home)

    def start(self, role: str) -> None:
        config = self.home / "config" / f"{role}.toml"
        self.processes[role] = start_role(role, config, log=self._log_path(role))

    def stop(self, role: str) -> None:
        ended = self.processes.pop(role).stop()
        assert ended.returncode == 0, f"{role} exited {ended.returncode}:\n{ended.log}"

    def restart(self, role: str) -> None:
        self.stop(role)
        self.start(role)

    def log(self, role: str) -> str:
        """Everything `role` logged, every run of it."""
        path = self._log_path(role)
        return path.read_text(errors="replace") if path.exists() else ""

    def _log_path(self, role: str) -> Path:
        return self.home / f"{role}.log"

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


TURN_CAP_S = 60
"""How long a turn through the stack may take in a test."""


async def open_session(stack: Stack) -> str:
    """A new session, as a chat opens one."""
    opened = await proto.call(
        stack.socket(proto.OWNER_LOOP), proto.SessionOpen(origin="e2e"), proto.SessionOpened
    )
    return opened.session


async def say(stack: Stack, session: str, text: str, *, approve: bool | None = None) -> list[Any]:
    """One turn; approvals it raises are decided by the owner over the owner socket."""
    frames: list[Any] = []
    with trio.fail_after(TURN_CAP_S):
        async with proto.open_call(
            stack.socket(proto.OWNER_LOOP), proto.Say(session=session, text=text)
        ) as conversation:
            async for frame in conversation:
                frames.append(frame)
                if isinstance(frame, proto.ApprovalPending):
                    assert approve is not None, "an approval nobody expected"
                    await proto.call(
                        stack.socket(proto.OWNER_BROKER),
                        proto.ApprovalDecide(id=frame.approval.id, approve=approve),
                        proto.Ok,
                    )
    assert isinstance(frames[-1], proto.TurnDone), frames[-1]
    return frames


def files_holding(home: Path, needle: str) -> list[str]:
    """Every file under `home` whose bytes hold `needle`, in any case (`grep -ril`)."""
    lowered = needle.lower().encode()
    return [
        str(path.relative_to(home))
        for path in sorted(home.rglob("*"))
        if path.is_file() and not path.is_socket() and lowered in path.read_bytes().lower()
    ]
