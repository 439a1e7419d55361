"""Where a decided call runs.

The composite runtime sends recall and memory to memoryd's broker socket and everything
else to the configured runtime: the local one (`_local_tools`) or the refusing one. A
runtime may return a label; `run_call` answers with the stricter of the grant's and the
runtime's, so a runtime can make a result stricter, never laxer.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Protocol, assert_never

import proto
from proto import Authority, Label, Status, Surface, ToolCall, ToolRequest, ToolResponse

from ._approvals import format_duration
from ._arguments import Arguments
from ._grants import Grant

__all__ = [
    "MEMORYD_UNREACHABLE",
    "MEMORY_TOOLS",
    "REFUSING",
    "Approved",
    "Auto",
    "CompositeRuntime",
    "LabelledOutput",
    "MemoryRuntime",
    "OwnEdit",
    "Refusal",
    "RefusingRuntime",
    "RunBy",
    "RunOutput",
    "RunRequest",
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
class Auto:
    """Run unasked: its grant's mode is `auto`."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Approved:
    """Run as the owner approved it, where `surface` says.

    In a version of their own when `proposed` (the model's arguments) is set.
    """

    approval: str
    surface: Surface
    note: str | None = None
    """The owner's words on the approval, if any."""
    proposed: str | None = None

    @property
    def decided(self) -> proto.Decided:
        """How memoryd journals it."""
        return proto.OwnerApproved(surface=self.surface, proposed=self.proposed)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OwnEdit:
    """The owner's own memory edit (`memory_edit`), decided by making it, where `surface` says.

    Its `approval` id is minted for it, so memoryd's checks apply unchanged.
    """

    approval: str
    surface: Surface
    undoes: str | None = None
    """The edit id this one undoes."""

    @property
    def decided(self) -> proto.Decided:
        """How memoryd journals it."""
        return proto.OwnerEdit(surface=self.surface, undoes=self.undoes)


RunBy = Auto | Approved | OwnEdit
"""Who decided that a call runs: its grant, or the owner."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunRequest:
    """A call to run, and who decided it runs.

    Its session, id, tool, arguments (canonical and parsed) and the session's taint.
    """

    session: str
    call_id: str
    tool: str
    arguments: Arguments
    taint: Label
    by: RunBy


@dataclasses.dataclass(frozen=True)
class RunOutput:
    """What a runtime answered; `label` only ever makes the grant's stricter."""

    status: Status
    content: str
    label: Label | None = None


@dataclasses.dataclass(frozen=True)
class LabelledOutput:
    """What a decided call answered, under its label: the stricter of grant and runtime."""

    status: Status
    content: str
    label: Label


class Refusal(Exception):
    """A runtime's helper cannot go on: `output` is the call's answer."""

    def __init__(self, output: RunOutput) -> None:
        super().__init__(output.content)
        self.output = output


class Runtime(Protocol):
    """Runs granted calls."""

    async def check(self, request: RunRequest, grant: Grant) -> RunOutput | None:
        """The refusal a call is bound to get, found before the owner is asked; else None."""
        ...

    async def run(self, request: RunRequest, grant: Grant) -> RunOutput:
        """Run a decided call."""
        ...


class RefusingRuntime:
    """Runs nothing: every call fails with `REFUSING`."""

    async def check(self, request: RunRequest, grant: Grant) -> RunOutput | None:
        """Every call is refused, so none is put to the owner."""
        return RunOutput("error", REFUSING.format(tool=request.tool))

    async def run(self, request: RunRequest, grant: Grant) -> RunOutput:
        """Refuse."""
        return RunOutput("error", REFUSING.format(tool=request.tool))


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

    async def check(self, request: RunRequest, grant: Grant) -> RunOutput | None:
        """Nothing to refuse early: memoryd checks the content when it applies the call."""
        return None

    async def run(self, request: RunRequest, grant: Grant) -> RunOutput:
        """Forward the call with its canonical arguments, and its authority if the owner decided.

        The `Authority` is the approval id, its token, and how the owner decided.
        """
        canonical = request.arguments.canonical
        authority = None
        match request.by:
            case Auto():
                pass
            case Approved() | OwnEdit() as owner:
                token = proto.approval_token(
                    self._approval_key,
                    approval=owner.approval,
                    session=request.session,
                    call=request.call_id,
                    tool=request.tool,
                    arguments=canonical,
                )
                authority = Authority(approval=owner.approval, token=token, decided=owner.decided)
            case _:
                assert_never(request.by)
        forwarded = ToolRequest(
            session=request.session,
            call=ToolCall(id=request.call_id, name=request.tool, arguments=canonical),
            taint=request.taint,
            authority=authority,
        )
        try:
            reply = await proto.call(
                self.socket, forwarded, ToolResponse, deadline_s=self.call_timeout_s
            )
        except proto.Unreachable as exc:
            log.warning("%s call %s: %s", request.tool, request.call_id, exc)
            return RunOutput("error", MEMORYD_UNREACHABLE.format(tool=request.tool))
        except proto.CallTimedOut:
            waited = format_duration(self.call_timeout_s)
            log.warning(
                "%s call %s: memoryd did not answer in %s", request.tool, request.call_id, waited
            )
            return RunOutput(
                "error",
                f"memoryd did not answer {request.tool} within {waited}; it may still have run "
                "(runbook: memoryd-unreachable)",
            )
        except proto.RemoteError as exc:
            return RunOutput("error", f"memoryd refused {request.tool}: {exc.error.message}")
        except proto.CallBroken as exc:
            # memoryd went away in the middle of the call: it died, or was stopped.
            log.warning(
                "%s call %r: memoryd went away during it (%s)", request.tool, request.call_id, exc
            )
            return RunOutput("error", MEMORYD_GONE.format(tool=request.tool))
        except proto.CallFailed as exc:
            log.warning(
                "%s call %s: bad answer from memoryd: %s", request.tool, request.call_id, exc
            )
            return RunOutput("error", f"memoryd gave no usable answer to {request.tool}: {exc}")
        return RunOutput(reply.status, reply.content, reply.label)


class CompositeRuntime:
    """recall and memory to memoryd; every other tool to the configured runtime."""

    def __init__(self, memory: Runtime, other: Runtime) -> None:
        self.memory = memory
        self.other = other

    def _for(self, tool: str) -> Runtime:
        return self.memory if tool in MEMORY_TOOLS else self.other

    async def check(self, request: RunRequest, grant: Grant) -> RunOutput | None:
        """Ask the runtime the call would go to."""
        return await self._for(request.tool).check(request, grant)

    async def run(self, request: RunRequest, grant: Grant) -> RunOutput:
        """Run the call where it belongs."""
        return await self._for(request.tool).run(request, grant)


async def run_call(runtime: Runtime, request: RunRequest, grant: Grant) -> LabelledOutput:
    """Run a decided call; its label is the stricter of the grant's and the runtime's.

    A runtime that fails unexpectedly answers `error` (its log says why): a decided call
    always gets an answer and an audit record.
    """
    try:
        output = await runtime.run(request, grant)
    except Exception:
        log.exception("%s call %s failed in its runtime", request.tool, request.call_id)
        output = RunOutput("error", f"{request.tool} failed inside brokerd; its log says why")
    label = grant.label if output.label is None else grant.label.join(output.label)
    return LabelledOutput(output.status, output.content, label)
