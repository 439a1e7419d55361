"""loopd in-process: its chat handler over memory streams, test doubles of memoryd and
brokerd on real Unix sockets (loopd reaches them by their paths)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import inmemory
import trio

import proto
from loopd import Loopd
from loopd._config import ModelSection, resolve
from proto import (
    ApprovalPending,
    Label,
    MemoryBlock,
    MemoryBlockReply,
    Message,
    Ok,
    PendingApproval,
    ServiceError,
    SessionUpdated,
    ToolRequest,
    ToolResponse,
)

BLOCK = "# soul.md\nTest soul.\n\n# memory.md (0 of 2,200 characters)\n(empty)"

M = TypeVar("M", bound=Message)


@dataclass
class FakeMemoryd:
    """Serves the loop-memory socket: a block (or a refusal), and records session_updated."""

    block: str | None = BLOCK
    updated: list[str] = field(default_factory=list)
    served: trio.Event = field(default_factory=trio.Event)  # set by the first block served

    async def handle(self, request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, MemoryBlock):
            if self.block is None:
                raise ServiceError(
                    "memory-unavailable",
                    "memory.md is 2,300 of 2,200 characters",
                    runbook="memory-unavailable",
                )
            self.served.set()
            return MemoryBlockReply(text=self.block)
        assert isinstance(request, SessionUpdated)
        self.updated.append(request.session)
        return Ok()


@dataclass
class FakeBrokerd:
    """Serves the loop-broker socket: answers each tool by name; `ask` tools announce first."""

    answers: dict[str, tuple[str, Label]] = field(default_factory=dict)
    ask: set[str] = field(default_factory=set)
    requests: list[ToolRequest] = field(default_factory=list)
    gate: trio.Event | None = None  # when set, calls wait for it
    arrived: trio.Event = field(default_factory=trio.Event)  # set by the first call
    decided: trio.Event | None = None  # when set, an `ask` call waits for it after announcing
    states: dict[str, proto.CallStateReply] = field(default_factory=dict)  # call_state answers
    withdrawn: trio.Event = field(default_factory=trio.Event)  # loopd hung up on an `ask`

    async def handle(self, request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.CallState):
            return self.states.get(request.call, proto.CallStateReply(state="unknown"))
        assert isinstance(request, ToolRequest)
        self.requests.append(request)
        self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        if request.call.name in self.ask:
            await conn.send(
                ApprovalPending(
                    approval=PendingApproval(
                        id="ap1",
                        session=request.session,
                        call_id=request.call.id,
                        tool=request.call.name,
                        arguments=request.call.arguments,
                        taint=request.taint,
                        time="2026-11-30T00:00:00Z",
                    )
                )
            )
            if self.decided is not None:
                async with trio.open_nursery() as wait:

                    async def decided(decided: trio.Event = self.decided) -> None:
                        await decided.wait()
                        wait.cancel_scope.cancel()

                    async def gone() -> None:
                        await conn.wait_peer_gone()  # brokerd settles it: "loopd disconnected"
                        self.withdrawn.set()
                        wait.cancel_scope.cancel()

                    wait.start_soon(decided)
                    wait.start_soon(gone)
                if self.withdrawn.is_set():
                    return ToolResponse(
                        call_id=request.call.id,
                        status="denied",
                        content="loopd left",
                        label=Label(),
                    )
        content, label = self.answers.get(request.call.name, ("done", Label()))
        return ToolResponse(call_id=request.call.id, status="ok", content=content, label=label)


@dataclass
class Chat:
    """loopd's chat handler, reached over memory streams as bxctl reaches its socket."""

    loopd: Loopd

    def open_call(self, request: Message) -> AbstractAsyncContextManager[proto.Conversation]:
        return inmemory.open_exchange(proto.OWNER_LOOP, self.loopd.handle_chat, request)

    async def call(self, request: Message, expect: type[M]) -> M:
        return await inmemory.call(proto.OWNER_LOOP, self.loopd.handle_chat, request, expect)


@dataclass
class Harness:
    loopd: Loopd
    memoryd: FakeMemoryd
    brokerd: FakeBrokerd
    home: Path

    @property
    def chat(self) -> Chat:
        return Chat(self.loopd)


async def start_harness(
    nursery: trio.Nursery, short_dir: Path, model_url: str, **model: object
) -> Harness:
    home = short_dir / "home"
    (short_dir / "system.md").write_text("You are boxmaker.\n")
    config = proto.LoopdConfig(
        paths=proto.PathsSection(home=str(home)),
        model=ModelSection(url=model_url, **model),  # type: ignore[arg-type]
    )
    settings = resolve(config, config_dir=short_dir)
    memoryd, brokerd = FakeMemoryd(), FakeBrokerd()
    shutdown = trio.Event()
    for spec, path, handler in (
        (proto.LOOP_MEMORY, settings.memory_socket, memoryd.handle),
        (proto.LOOP_BROKER, settings.broker_socket, brokerd.handle),
    ):
        await nursery.start(
            lambda task_status, spec=spec, path=path, handler=handler: proto.serve_unix(
                spec, path, handler, shutdown=shutdown, task_status=task_status
            )
        )
    role = Loopd(settings)
    nursery.start_soon(_close_model_at_the_end, role)
    return Harness(role, memoryd, brokerd, home)


async def _close_model_at_the_end(role: Loopd) -> None:
    # What `Loopd.start` does at shutdown, without serving the chat socket.
    try:
        await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await role.model.aclose()


async def say(chat: Chat, session: str, text: str) -> list[Message]:
    """Send `say` and collect every frame until the server closes."""
    frames: list[Message] = []
    async with chat.open_call(proto.Say(session=session, text=text)) as conversation:
        async for frame in conversation:
            frames.append(frame)
    return frames


async def open_session(chat: Chat, session: str | None = None) -> proto.SessionOpened:
    """Open (or create) a session through the chat handler."""
    return await chat.call(proto.SessionOpen(origin="test", session=session), proto.SessionOpened)
