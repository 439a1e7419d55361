"""memoryd's three sockets and what each request does."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TypeVar, assert_never

import msgspec
import trio

import proto
from proto import (
    Connection,
    ForgetAbort,
    ForgetApply,
    ForgetLook,
    ForgetPrepare,
    ForgetStore,
    MemoryBlock,
    MemoryBlockReply,
    MemoryFind,
    MemoryHistory,
    MemoryHistoryReply,
    MemoryWhy,
    Message,
    Ok,
    OwnerRecall,
    OwnerRecalled,
    RecallQuery,
    Reindex,
    Reindexed,
    ServiceError,
    SessionUpdated,
    ToolRequest,
    ToolResponse,
    UndoPlan,
)

from ._block import memory_block
from ._config import Settings
from ._edits import EditApplier, read_history
from ._files import MemoryDir, MemoryUnavailable, ensure_private_dir
from ._forget import MemoryForget, MemorySteps
from ._history import JournalTable
from ._index import RUNBOOK, Index, IndexDamaged, IndexUnavailable, Search
from ._owner import find, plan_undo
from ._recall import label_of, owner_hits, recall_record, render
from ._store import Sources
from ._why import why

M = TypeVar("M", bound=Message)

__all__ = ["Memoryd"]

log = logging.getLogger("memoryd")

BUILD_S_PER_SESSION = 0.0007
"""A first build's time per session, for the owner's estimate (`just bench age`: 44 s for
65,700 sessions on a 2-core machine)."""

READY_WAIT_S = 3.0
"""How long memoryd's start waits for its index to catch up before it reports ready anyway
(with what it is still reading): a catch-up reads only what changed, so at any age it is
done well within this after a clean stop or a crash."""

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
        self.journal = JournalTable(self.memory.edits)
        self.index = Index(
            settings.index_dir,
            Sources(
                sessions_dir=settings.sessions_dir,
                archive=self.memory.path("archive.md"),
                max_class=settings.max_class,
                ranking=settings.ranking,
                languages=settings.languages,
            ),
        )
        self.forget = MemoryForget(self.memory, self.edits, self.index)
        store: ForgetStore[MemorySteps] = self.forget
        self.forget_part = proto.ForgetPart(store)

    def recover_files(self) -> int:
        """At start, before any socket and `reconcile`: the files of every committed plan.

        Blocking. Returns how many; their index part follows (`recover`), before the
        index serves.
        """
        plans = self.forget_part.committed()
        for plan in plans:
            for conflict in self.forget.apply_files(plan):
                log.warning("forget %s at start: %s", plan.plan, conflict)
        return len(plans)

    async def recover(self, opened: bool) -> None:
        """Before the index serves: finish every committed plan, files and index.

        `opened`: the index file was opened; False when it was built anew (from files
        the forget has redacted already), when their rows' part has nothing left to do.
        """
        self.forget.starting = not opened
        try:
            await self.forget_part.recover()
        finally:
            self.forget.starting = None

    async def start(self, work: trio.Nursery, shutdown: trio.Event) -> str:
        """Serve the three sockets in `work` until `shutdown`; return a status line.

        The index is opened (or built) and caught up in the background: the memory
        block is served at once.
        """
        s = self.settings
        ensure_private_dir(s.index_dir)
        work.start_soon(self.index.run, shutdown, self.recover)
        serve = partial(proto.serve_unix, shutdown=shutdown, read_timeout_s=s.read_timeout_s)
        for spec, path, handler, peers in (
            (proto.LOOP_MEMORY, s.loop_socket, self.handle_loop, s.loop_peers),
            (proto.BROKER_MEMORY, s.broker_socket, self.handle_broker, s.broker_peers),
            (proto.OWNER_MEMORY, s.admin_socket, self.handle_admin, s.admin_peers),
        ):
            await work.start(partial(serve, spec, path, handler, peers=peers))
        # The journal's table, read now rather than at the owner's first `memory history`
        # or `memory why` (5,000 lines at three years: tens of milliseconds off that call).
        work.start_soon(self._read_journal)
        return f"serving {s.home} (memory {s.memory_dir}); {await self._index_standing()}"

    async def _index_standing(self) -> str:
        """Once the index has caught up with every log, or `READY_WAIT_S` on: its state.

        A turn is answered at full speed meanwhile too (its end is indexed at once, or not
        waited for during a build), but recall does not yet find everything: what is
        still being read is said (`proto.STILL_READING`), and `bxctl up` shows it.
        """
        index = self.index
        with trio.move_on_after(READY_WAIT_S):
            await index.caught_up.wait()
        if index.caught_up.is_set():
            return "the recall index is caught up"
        if index.building.is_set():
            sessions = await trio.to_thread.run_sync(_catalogued, self.settings.sessions_dir)
            guess = max(1, round(sessions * BUILD_S_PER_SESSION))
            return (
                f"{proto.STILL_READING}the recall index is being built from {sessions:,} "
                f"sessions (about {guess} s); turns are answered meanwhile, and recall finds "
                "older sessions as they are read"
            )
        return (
            f"{proto.STILL_READING}the recall index is catching up with the session logs; "
            "turns are answered meanwhile, and recall finds their newest records when it is done"
        )

    async def _read_journal(self) -> None:
        try:
            await trio.to_thread.run_sync(self.journal.view)
        except OSError as exc:  # the request that needs it says so, in its own words
            log.warning("cannot read the edit journal yet: %s", exc)

    # -- loopd -------------------------------------------------------------------------

    async def handle_loop(self, request: proto.LoopMemoryRequest, conn: Connection) -> Message:
        """memory_block → memory_block_reply; session_updated → ok."""
        match request:
            case MemoryBlock():
                return await self.memory_block()
            case SessionUpdated():
                try:
                    await self.index.session_updated(request.session, request.rewritten)
                except IndexDamaged as exc:
                    raise ServiceError("memory-index-damaged", str(exc), runbook=RUNBOOK) from None
                return Ok()
            case _:
                assert_never(request)

    async def memory_block(self) -> MemoryBlockReply:
        """The memory block of a new session, or the refusal that names why not."""
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

    # -- brokerd -----------------------------------------------------------------------

    async def handle_broker(self, request: proto.BrokerMemoryRequest, conn: Connection) -> Message:
        """tool_request for `memory` (and `recall`) → tool_response; the forget's four kinds."""
        match request:
            case ToolRequest():
                return await self.tool(request)
            case ForgetLook() | ForgetPrepare() | ForgetApply() | ForgetAbort():
                return await self.forget_part.handle(request)
            case _:
                assert_never(request)

    async def tool(self, request: ToolRequest) -> ToolResponse:
        """The `memory` and `recall` tools."""
        match request.call.name:
            case "memory":
                reply = await self.edits.apply(request)
                if reply.status == "ok":
                    await self._archive_changed()
                return reply
            case "recall":
                return await self.recall(request)
            case name:
                return ToolResponse(
                    call_id=request.call.id,
                    status="error",
                    content=f"memoryd runs only recall and memory, not {name!r}",
                )

    # -- the owner ---------------------------------------------------------------------

    async def handle_admin(self, request: proto.OwnerMemoryRequest, conn: Connection) -> Message:
        """The owner: reindex, recall, the journal, why, find, undo plans, the block."""
        match request:
            case MemoryHistory():
                return await trio.to_thread.run_sync(self._history, request)
            case Reindex():
                return await self.reindex()
            case RecallQuery():
                return await self.recall_query(request)
            case OwnerRecall():
                return await self.owner_recall(request)
            case MemoryWhy():
                return await self._owner_read(
                    why, self.memory, self.settings.sessions_dir, request.part, self.journal
                )
            case MemoryFind():
                return await self._owner_read(find, self.memory, request.part, request.file)
            case UndoPlan():
                journal = await trio.to_thread.run_sync(read_history, self.memory, None)
                return plan_undo(journal, request.edit)
            case MemoryBlock():
                return await self.memory_block()
            case _:
                assert_never(request)

    def _history(self, request: MemoryHistory) -> MemoryHistoryReply:
        page, older = self.journal.page(request.file, request.before)
        return MemoryHistoryReply(edits=page, older=older)

    async def _owner_read(self, read: Callable[..., M], *args: object) -> M:
        """An owner's read of the memory files, in a worker thread; unreadable: refused."""
        try:
            return await trio.to_thread.run_sync(read, *args)
        except MemoryUnavailable as exc:
            raise ServiceError(
                "memory-unavailable", str(exc), runbook="memory-unavailable"
            ) from None

    # -- recall and the index ----------------------------------------------------------

    async def recall(self, request: ToolRequest) -> ToolResponse:
        """The recall tool: search, answer with the label, log the recall."""
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
            return await self._recall(call_id, args, then=log_recall)
        except IndexDamaged as exc:
            return ToolResponse(
                call_id=call_id, status="error", content=f"{exc} (runbook: {RUNBOOK})"
            )

    def _log_recall(self, record: proto.RecallRecord, now: datetime) -> None:
        with self.forget.files_lock:  # a forget rewriting the log would lose the line
            self.memory.recalls.mkdir(mode=0o700, exist_ok=True)
            proto.append_line(proto.month_file(self.memory.recalls, now), _encoder.encode(record))

    async def recall_query(self, request: RecallQuery) -> ToolResponse:
        """The owner's own search: the recall engine and format, no recall-log line."""
        args = _owner_args(request.query, request.k)
        with _owner_search():
            return await self._recall("owner", args)

    async def owner_recall(self, request: OwnerRecall) -> OwnerRecalled:
        """The owner's own search hit by hit, each with its source; no recall-log line."""
        args = _owner_args(request.query, request.k)
        with _owner_search():
            search = await self.index.search(args.query, args.k)
        found = search.found
        return OwnerRecalled(hits=owner_hits(found, search.ranking.marked), label=label_of(found))

    async def _recall(
        self, call_id: str, args: proto.RecallArgs, *, then: Callable[[Search], None] | None = None
    ) -> ToolResponse:
        """Search for `args` and answer in the recall format, labelled by what was found."""
        search = await self.index.search(args.query, args.k, then=then)
        found = search.found
        content = render(args.query, found, search.ranking.marked)
        return ToolResponse(call_id=call_id, status="ok", content=content, label=label_of(found))

    async def reindex(self) -> Reindexed:
        """Rebuild the index into a new file and swap it in."""
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


def _owner_args(query: str, k: int) -> proto.RecallArgs:
    """The owner's search, held to the recall tool's own limits (1 to 500 characters, k 1 to 10)."""
    try:
        return proto.parse_recall_args(_encoder.encode({"query": query, "k": k}))
    except proto.ToolArgsError as exc:
        raise ServiceError("bad-arguments", str(exc)) from None


@contextlib.contextmanager
def _owner_search() -> Iterator[None]:
    """An index that cannot answer the owner's search, as the owner's `error` frame."""
    try:
        yield
    except IndexUnavailable as exc:
        raise ServiceError("index-unavailable", str(exc), runbook=RUNBOOK) from None
    except IndexDamaged as exc:
        raise ServiceError("memory-index-damaged", str(exc), runbook=RUNBOOK) from None


def _catalogued(sessions_dir: Path) -> int:
    """How many sessions the catalog lists (0 without one): the size of a build, roughly."""
    read = proto.read_catalog(sessions_dir)
    return 0 if read is None else len(read.entries)
