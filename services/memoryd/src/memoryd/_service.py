"""memoryd's three sockets and what each request does (spec §7, ARCHITECTURE §3)."""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial
from typing import assert_never

import msgspec
import trio

import proto
from proto import (
    Connection,
    MemoryBlock,
    MemoryBlockReply,
    MemoryHistory,
    MemoryHistoryReply,
    MemoryWhy,
    Message,
    Ok,
    RecallQuery,
    Reindex,
    Reindexed,
    ServiceError,
    SessionUpdated,
    ToolRequest,
    ToolResponse,
)

from ._block import memory_block
from ._config import Settings
from ._edits import EditApplier, history_page, read_history
from ._files import MemoryDir, MemoryUnavailable, ensure_private_dir
from ._index import RUNBOOK, Index, IndexDamaged, IndexUnavailable, Search
from ._recall import label_of, recall_record, render
from ._store import Sources
from ._why import why

__all__ = ["Memoryd"]

log = logging.getLogger("memoryd")

_encoder = msgspec.json.Encoder()


class Memoryd:
    """The role: owns memory/ (and index/), serves loopd, brokerd and the owner."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.memory = MemoryDir(settings.memory_dir)
        try:
            approval_key = proto.ensure_key(settings.approval_key, shared=True)
        except (proto.KeyUnusable, OSError) as exc:
            raise proto.StartFailed(str(exc)) from exc
        self.edits = EditApplier(self.memory, approval_key)
        self.index = Index(
            settings.index_dir,
            Sources(
                sessions_dir=settings.sessions_dir,
                archive=self.memory.path("archive.md"),
                max_class=settings.max_class,
            ),
        )

    async def start(self, work: trio.Nursery, shutdown: trio.Event) -> str:
        """Serve the three sockets in `work` until `shutdown`; return a status line.

        The index is opened (or built) and caught up in the background: the memory
        block is served at once.
        """
        s = self.settings
        ensure_private_dir(s.index_dir)
        work.start_soon(self.index.run, shutdown)
        serve = partial(proto.serve_unix, shutdown=shutdown, read_timeout_s=s.read_timeout_s)
        for spec, path, handler, peers in (
            (proto.LOOP_MEMORY, s.loop_socket, self.handle_loop, s.loop_peers),
            (proto.BROKER_MEMORY, s.broker_socket, self.handle_broker, s.broker_peers),
            (proto.OWNER_MEMORY, s.admin_socket, self.handle_admin, s.admin_peers),
        ):
            await work.start(partial(serve, spec, path, handler, peers=peers))
        return f"serving {s.home} (memory {s.memory_dir})"

    # -- loopd -------------------------------------------------------------------------

    async def handle_loop(self, request: proto.LoopMemoryRequest, conn: Connection) -> Message:
        """memory_block → memory_block_reply; session_updated → ok."""
        match request:
            case MemoryBlock():
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
            case SessionUpdated():
                try:
                    await self.index.session_updated(request.session)
                except IndexDamaged as exc:
                    raise ServiceError("memory-index-damaged", str(exc), runbook=RUNBOOK) from None
                return Ok()
            case _:
                assert_never(request)

    # -- brokerd -----------------------------------------------------------------------

    async def handle_broker(self, request: proto.BrokerMemoryRequest, conn: Connection) -> Message:
        """tool_request for `memory` (and `recall`) → tool_response."""
        name = request.call.name
        if name == "memory":
            reply = await self.edits.apply(request)
            if reply.status == "ok":
                await self._archive_changed()
            return reply
        if name == "recall":
            return await self.recall(request)
        return ToolResponse(
            call_id=request.call.id,
            status="error",
            content=f"memoryd runs only recall and memory, not {name!r}",
        )

    # -- the owner ---------------------------------------------------------------------

    async def handle_admin(self, request: proto.OwnerMemoryRequest, conn: Connection) -> Message:
        """The owner: reindex, recall_query (→ tool_response), memory_history, memory_why."""
        match request:
            case MemoryHistory():
                edits = await trio.to_thread.run_sync(read_history, self.memory, request.file)
                page, older = history_page(edits, request.before)
                return MemoryHistoryReply(edits=page, older=older)
            case Reindex():
                return await self.reindex()
            case RecallQuery():
                return await self.recall_query(request)
            case MemoryWhy():
                try:
                    return await trio.to_thread.run_sync(
                        why, self.memory, self.settings.sessions_dir, request.part
                    )
                except MemoryUnavailable as exc:
                    raise ServiceError(
                        "memory-unavailable", str(exc), runbook="memory-unavailable"
                    ) from None
            case _:
                assert_never(request)

    # -- recall and the index ----------------------------------------------------------

    async def recall(self, request: ToolRequest) -> ToolResponse:
        """The recall tool (spec §5): search, answer with the label, log the recall."""
        call_id = request.call.id
        try:
            args = proto.parse_recall_args(request.call.arguments)
        except proto.ToolArgsError as exc:
            return ToolResponse(call_id=call_id, status="error", content=str(exc))

        def log_recall(search: Search) -> None:  # in the thread that searched
            now = proto.utc_now()
            record = recall_record(now, request.session, args.query, args.k, search.found)
            try:
                self._log_recall(record, now)
            except OSError as exc:
                log.error("recall by call %s is not in the recall log: %s", call_id, exc)

        try:
            search = await self.index.search(args.query, args.k, then=log_recall)
        except IndexDamaged as exc:
            return ToolResponse(
                call_id=call_id, status="error", content=f"{exc} (runbook: {RUNBOOK})"
            )
        found = search.found
        content = render(args.query, found, search.ranking.marked)
        return ToolResponse(call_id=call_id, status="ok", content=content, label=label_of(found))

    def _log_recall(self, record: proto.RecallRecord, now: datetime) -> None:
        self.memory.recalls.mkdir(mode=0o700, exist_ok=True)
        proto.append_line(proto.month_file(self.memory.recalls, now), _encoder.encode(record))

    async def recall_query(self, request: RecallQuery) -> ToolResponse:
        """The owner's own search: the recall engine and format, no recall-log line."""
        try:  # the tool's own limits: 1 to 500 characters, k from 1 to 10
            args = proto.parse_recall_args(
                _encoder.encode({"query": request.query, "k": request.k})
            )
        except proto.ToolArgsError as exc:
            raise ServiceError("bad-arguments", str(exc)) from None
        try:
            search = await self.index.search(args.query, args.k)
        except IndexUnavailable as exc:
            raise ServiceError("index-unavailable", str(exc), runbook=RUNBOOK) from None
        except IndexDamaged as exc:
            raise ServiceError("memory-index-damaged", str(exc), runbook=RUNBOOK) from None
        content = render(args.query, search.found, search.ranking.marked)
        return ToolResponse(
            call_id="owner", status="ok", content=content, label=label_of(search.found)
        )

    async def reindex(self) -> Reindexed:
        """Rebuild the index into a new file and swap it in (spec §10)."""
        try:
            built = await self.index.rebuild()
        except (OSError, IndexDamaged) as exc:
            log.error("reindex failed: %s", exc)
            raise ServiceError(
                "reindex-failed", f"the index could not be rebuilt: {exc}", runbook=RUNBOOK
            ) from None
        return Reindexed(logs=built.logs, records=built.records, archive=built.archive)

    async def _archive_changed(self) -> None:
        # The edit is applied by now: nothing here may turn its answer into a failure.
        try:
            await self.index.archive_changed()
        except (IndexDamaged, OSError) as exc:
            log.error("archive.md changed but could not be indexed: %s (runbook: %s)", exc, RUNBOOK)
