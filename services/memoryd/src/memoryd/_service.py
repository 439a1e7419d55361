"""memoryd's three sockets and what each request does (spec §7, ARCHITECTURE §3)."""

from __future__ import annotations

import logging
from functools import partial

import trio

import proto
from proto import (
    Connection,
    MemoryBlock,
    MemoryBlockReply,
    MemoryHistory,
    MemoryHistoryReply,
    Message,
    Ok,
    ServiceError,
    SessionUpdated,
    ToolRequest,
    ToolResponse,
)

from ._block import memory_block
from ._config import Settings
from ._edits import EditApplier, read_history
from ._files import MemoryDir, MemoryUnavailable

__all__ = ["Memoryd"]

log = logging.getLogger("memoryd")


class Memoryd:
    """The role: owns memory/ (and index/), serves loopd, brokerd and the owner."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.memory = MemoryDir(settings.memory_dir)
        self.edits = EditApplier(self.memory)
        self.updated_sessions: set[str] = set()

    async def start(self, work: trio.Nursery, shutdown: trio.Event) -> str:
        """Serve the three sockets in `work` until `shutdown`; return a status line."""
        s = self.settings
        serve = partial(proto.serve_unix, shutdown=shutdown, read_timeout_s=s.read_timeout_s)
        for spec, path, handler in (
            (proto.LOOP_MEMORY, s.loop_socket, self.handle_loop),
            (proto.BROKER_MEMORY, s.broker_socket, self.handle_broker),
            (proto.OWNER_MEMORY, s.admin_socket, self.handle_admin),
        ):
            await work.start(partial(serve, spec, path, handler))
        return f"serving {s.home} (memory {s.memory_dir})"

    # -- loopd -------------------------------------------------------------------------

    async def handle_loop(self, request: Message, conn: Connection) -> Message:
        """memory_block → memory_block_reply; session_updated → ok."""
        if isinstance(request, MemoryBlock):
            try:
                text = await trio.to_thread.run_sync(memory_block, self.memory)
            except MemoryUnavailable as exc:
                log.warning("memory block refused: %s", exc)
                raise ServiceError(
                    "memory-unavailable",
                    f"the memory block cannot be served: {exc}",
                    runbook="memory-unavailable",
                ) from None
            return MemoryBlockReply(text=text)
        if isinstance(request, SessionUpdated):
            self.updated_sessions.add(request.session)
            return Ok()
        raise AssertionError(f"unroutable {request!r}")  # the socket's allow-list prevents it

    # -- brokerd -----------------------------------------------------------------------

    async def handle_broker(self, request: Message, conn: Connection) -> Message:
        """tool_request for `memory` (and `recall`) → tool_response."""
        assert isinstance(request, ToolRequest)
        name = request.call.name
        if name == "memory":
            return await self.edits.apply(request)
        if name == "recall":
            return ToolResponse(
                call_id=request.call.id, status="error", content="recall is not available yet"
            )
        return ToolResponse(
            call_id=request.call.id,
            status="error",
            content=f"memoryd runs only recall and memory, not {name!r}",
        )

    # -- the owner ---------------------------------------------------------------------

    async def handle_admin(self, request: Message, conn: Connection) -> Message:
        """memory_history → memory_history_reply (reindex and recall_query: part 2)."""
        if isinstance(request, MemoryHistory):
            edits = await trio.to_thread.run_sync(read_history, self.memory, request.file)
            return MemoryHistoryReply(edits=edits)
        kind = type(request).__struct_config__.tag
        raise ServiceError("not-available", f"{kind!r} is not available yet")
