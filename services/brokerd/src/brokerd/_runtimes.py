"""Where a decided call runs (spec §8, ARCHITECTURE §5).

The composite runtime sends recall and memory to memoryd's broker socket and everything
else to the configured runtime: the local one (`_local_tools`) or the refusing one. A
runtime may return a label; `run_call` answers with the stricter of the grant's and the
runtime's, so a runtime can make a result stricter, never laxer.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Protocol

import msgspec

import proto
from proto import Label, Status, ToolCall, ToolRequest, ToolResponse

from ._approvals import format_duration
from ._arguments import Arguments
from ._grants import Grant

__all__ = [
    "MEMORYD_UNREACHABLE",
    "MEMORY_TOOLS",
    "REFUSING",
    "Call",
    "CompositeRuntime",
    "MemoryRuntime",
    "RefusingRuntime",
    "RunOutput",
    "Runtime",
    "run_call",
]

log = logging.getLogger("brokerd.runtimes")

MEMORY_TOOLS = frozenset({"recall", "memory"})

MEMORYD_UNREACHABLE = (
    "memoryd is unreachable, so {tool} did not run; try again later (runbook: memoryd-unreachable)"
)
"""Fixed apart from the tool: a recall or memory call while memoryd does not answer."""

MEMORYD_GONE = (
    "memoryd went away during {tool} (it stopped or died); it may have run "
    "(runbook: memoryd-unreachable)"
)
"""Fixed apart from the tool: memoryd closed the connection before answering."""

REFUSING = (
    'this brokerd runs no tools but recall and memory ([runtime] kind = "refusing"); '
    "{tool} did not run"
)
"""Fixed apart from the tool: every call the refusing runtime gets."""


@dataclasses.dataclass(frozen=True)
class Call:
    """A call to run: its session, id, tool, arguments (canonical and parsed) and taint."""

    session: str
    call_id: str
    tool: str
    arguments: Arguments
    taint: Label
    decided: proto.Decided | None = None
    """How the owner decided a memory call (approved, or their own edit): memoryd journals it."""


@dataclasses.dataclass(frozen=True)
class RunOutput:
    """What a runtime answered; `label` only ever makes the grant's stricter."""

    status: Status
    content: str
    label: Label | None = None


class Runtime(Protocol):
    """Runs granted calls."""

    async def check(self, call: Call, grant: Grant) -> RunOutput | None:
        """The refusal a call is bound to get, found before the owner is asked; else None."""
        ...

    async def run(self, call: Call, grant: Grant, approval: str | None) -> RunOutput:
        """Run a decided call (`approval` is the owner's approval id, if any)."""
        ...


class RefusingRuntime:
    """Runs nothing: every call fails with `REFUSING`."""

    async def check(self, call: Call, grant: Grant) -> RunOutput | None:
        """Every call is refused, so none is put to the owner."""
        return RunOutput("error", REFUSING.format(tool=call.tool))

    async def run(self, call: Call, grant: Grant, approval: str | None) -> RunOutput:
        """Refuse."""
        return RunOutput("error", REFUSING.format(tool=call.tool))


class MemoryRuntime:
    """Sends recall and memory calls to memoryd's broker socket as `tool_request`.

    An approved call carries its approval id and a token that binds it to exactly this
    call (`proto.approval_token` under the approval key, which memoryd also reads), so
    memoryd can check that the owner approved what it is asked to apply.
    """

    def __init__(self, socket: Path, *, call_timeout_s: float, approval_key: bytes) -> None:
        self.socket = socket
        self.call_timeout_s = call_timeout_s
        self._approval_key = approval_key

    async def check(self, call: Call, grant: Grant) -> RunOutput | None:
        """Nothing to refuse early: memoryd checks the content when it applies the call."""
        return None

    async def run(self, call: Call, grant: Grant, approval: str | None) -> RunOutput:
        """Forward the call, with the canonical arguments, the approval id and its token."""
        canonical = call.arguments.canonical
        token = None
        if approval is not None:
            token = proto.approval_token(
                self._approval_key,
                approval=approval,
                session=call.session,
                call=call.call_id,
                tool=call.tool,
                arguments=canonical,
            )
        request = ToolRequest(
            session=call.session,
            call=ToolCall(id=call.call_id, name=call.tool, arguments=canonical),
            taint=call.taint,
            approval=approval,
            token=token,
            decided=msgspec.UNSET if call.decided is None else call.decided,
        )
        try:
            reply = await proto.call(
                self.socket, request, ToolResponse, deadline_s=self.call_timeout_s
            )
        except proto.Unreachable as exc:
            log.warning("%s call %s: %s", call.tool, call.call_id, exc)
            return RunOutput("error", MEMORYD_UNREACHABLE.format(tool=call.tool))
        except proto.CallTimedOut:
            waited = format_duration(self.call_timeout_s)
            log.warning("%s call %s: memoryd did not answer in %s", call.tool, call.call_id, waited)
            return RunOutput(
                "error",
                f"memoryd did not answer {call.tool} within {waited}; it may still have run "
                "(runbook: memoryd-unreachable)",
            )
        except proto.RemoteError as exc:
            return RunOutput("error", f"memoryd refused {call.tool}: {exc.error.message}")
        except proto.CallBroken as exc:
            # memoryd went away in the middle of the call: it died, or was stopped.
            log.warning(
                "%s call %r: memoryd went away during it (%s)", call.tool, call.call_id, exc
            )
            return RunOutput("error", MEMORYD_GONE.format(tool=call.tool))
        except proto.CallFailed as exc:
            log.warning("%s call %s: bad answer from memoryd: %s", call.tool, call.call_id, exc)
            return RunOutput("error", f"memoryd gave no usable answer to {call.tool}: {exc}")
        return RunOutput(reply.status, reply.content, reply.label)


class CompositeRuntime:
    """recall and memory to memoryd; every other tool to the configured runtime."""

    def __init__(self, memory: Runtime, other: Runtime) -> None:
        self.memory = memory
        self.other = other

    def _for(self, tool: str) -> Runtime:
        return self.memory if tool in MEMORY_TOOLS else self.other

    async def check(self, call: Call, grant: Grant) -> RunOutput | None:
        """Ask the runtime the call would go to."""
        return await self._for(call.tool).check(call, grant)

    async def run(self, call: Call, grant: Grant, approval: str | None) -> RunOutput:
        """Run the call where it belongs."""
        return await self._for(call.tool).run(call, grant, approval)


async def run_call(runtime: Runtime, call: Call, grant: Grant, approval: str | None) -> RunOutput:
    """Run a decided call; its label is the stricter of the grant's and the runtime's.

    A runtime that fails unexpectedly answers `error` (its log says why): a decided call
    always gets an answer and an audit record.
    """
    try:
        output = await runtime.run(call, grant, approval)
    except Exception:
        log.exception("%s call %s failed in its runtime", call.tool, call.call_id)
        output = RunOutput("error", f"{call.tool} failed inside brokerd; its log says why")
    label = grant.label if output.label is None else grant.label.join(output.label)
    return dataclasses.replace(output, label=label)
