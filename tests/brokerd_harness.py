"""brokerd as a real process in a temporary home, for tests that restart it or read its log.

`BrokerdHome` writes the config and grant files, starts brokerd with `roles.start_role`
(READY=1 on a notify socket, as systemd sees it), stops and restarts it, and keeps every
run's log in one file. Calls go over its real sockets: `loop` as loopd sends a
`tool_request`, `owner` as bxctl.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import trio
from roles import Ended, RunningRole, start_role

import proto
from proto import (
    AuditVerified,
    AuditVerify,
    Label,
    Message,
    ToolCall,
    ToolRequest,
    ToolResponse,
)

CAP_S = 20
SESSION = "chat-securitysession01"
M = TypeVar("M", bound=Message)


def grant(
    tool: str,
    mode: str,
    *,
    max_taint: str = "secret",
    result_class: str = "private",
    untrusted: bool = False,
    extra: str = "",
) -> str:
    """A grant file's text."""
    return (
        f'tool = "{tool}"\nmode = "{mode}"\nmax_taint = "{max_taint}"\n'
        f'result_class = "{result_class}"\nuntrusted = {str(untrusted).lower()}\n{extra}'
    )


def request(
    tool: str,
    args: Any,
    *,
    call: str = "c1",
    session: str = SESSION,
    taint: Label | None = None,
) -> ToolRequest:
    """A `tool_request` as loopd sends it (`args` as JSON, or a string as it is)."""
    raw = args if isinstance(args, str) else json.dumps(args)
    return ToolRequest(
        session=session, call=ToolCall(id=call, name=tool, arguments=raw), taint=taint or Label()
    )


class BrokerdHome:
    """A home under `base` (a short directory), its brokerd.toml, and brokerd's process."""

    def __init__(self, base: Path, config: str = "") -> None:
        self.base = base
        self.home = base / "home"
        self.config = base / "brokerd.toml"
        self.log_path = base / "brokerd.log"
        self.config.write_text(f'[paths]\nhome = "{self.home}"\n{config}')
        (self.home / "grants").mkdir(parents=True, exist_ok=True)
        self.process: RunningRole | None = None

    @property
    def audit(self) -> Path:
        return self.home / "audit"

    def write_grant(self, name: str, text: str | bytes) -> None:
        path = self.home / "grants" / f"{name}.toml"
        if isinstance(text, str):
            path.write_text(text)
        else:
            path.write_bytes(text)

    def start(self) -> RunningRole:
        """Start brokerd; returns once it said READY=1."""
        assert self.process is None, "brokerd is running already"
        self.process = start_role("brokerd", self.config, log=self.log_path)
        return self.process

    def stop(self) -> Ended:
        """SIGTERM brokerd; it must exit 0."""
        assert self.process is not None, "brokerd is not running"
        ended = self.process.stop()
        self.process = None
        assert ended.returncode == 0, f"brokerd exited {ended.returncode}:\n{ended.log}"
        return ended

    def restart(self) -> RunningRole:
        self.stop()
        return self.start()

    def kill(self) -> None:
        """Cleanup after a failed test."""
        if self.process is not None:
            self.process.kill()
            self.process = None

    def log(self) -> str:
        """What the current (or last) run logged."""
        assert self.process is not None, "brokerd is not running"
        return self.process.log()

    async def loop(self, req: ToolRequest) -> list[Message]:
        """Send `req` as loopd does; every frame brokerd answers (the reply last)."""
        with trio.fail_after(CAP_S):
            async with proto.open_call(proto.LOOP_BROKER.default_path(self.home), req) as call:
                return [frame async for frame in call]

    async def answer(self, req: ToolRequest) -> ToolResponse:
        """The one reply to a call that is not asked."""
        (reply,) = await self.loop(req)
        assert isinstance(reply, ToolResponse), reply
        return reply

    async def owner(self, req: Message, expect: type[M]) -> M:
        """Send `req` as bxctl does."""
        with trio.fail_after(CAP_S):
            return await proto.call(proto.OWNER_BROKER.default_path(self.home), req, expect)

    async def verify(self) -> AuditVerified:
        return await self.owner(AuditVerify(), AuditVerified)
