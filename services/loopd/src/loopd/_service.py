"""loopd's chat socket: open a session, say something, stream the turn back."""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import assert_never

import msgspec
import trio

import proto
from proto import (
    Baseline,
    BaselinePreview,
    BaselinePreviewReply,
    Connection,
    MemoryBlock,
    MemoryBlockReply,
    Message,
    ModelInfo,
    ModelInfoReply,
    Say,
    ServiceError,
    SessionOpen,
    SessionOpened,
    TurnDone,
    TurnEvent,
    TurnFollow,
)

from ._config import Settings
from ._follow import TURN_INTERRUPTED, RunningTurn, recorded_turn
from ._forget import SessionBusy, SessionsForget
from ._model import ModelClient
from ._outbox import Outbox
from ._sessions import Session, SessionStore, new_session_id
from ._tools import tool_schemas
from ._turn import TurnContext, TurnError, notify_memoryd, run_turn

__all__ = ["Loopd"]

log = logging.getLogger("loopd")

MEMORY_BLOCK_DEADLINE_S = 10.0
CLOSE_DEADLINE_S = 5.0
"""How long closing the model client's connections may take at shutdown."""
CANCEL_WAIT_S = 10.0
"""How long a `say` waits for the session's cancelled turn to finish recording."""


TAKEN_BACK = 1_000
"""How many sessions taken back loopd remembers: one pushed out (or forgotten by a
restart) answers `no-session` at its next message, and its client opens it again."""


@dataclasses.dataclass
class _TakenBack:
    """A session taken back: who opened it, and when its next baseline was made."""

    origin: str | msgspec.UnsetType
    applied: int = -1
    """The forget count (`SessionsForget.applied`) its baseline was made at; -1: none made yet."""


@dataclasses.dataclass(eq=False)
class _SessionTurns:
    """The turns of one session: at most one runs; the next `say` waits for its lock.

    Held only while someone uses it (`users`: a turn running, or a `say` waiting for the
    lock): the last one out drops it, so a session no longer spoken in leaves nothing.
    """

    lock: trio.Lock = dataclasses.field(default_factory=trio.Lock)
    running: RunningTurn | None = None
    cancel: trio.CancelScope | None = None
    """The running turn's scope, cancelled when its chat client leaves (not `keep_going`)."""
    forgetting: bool = False
    """A forget holds the lock (briefly: a file rewrite); a `say` waits for it."""
    users: int = 0

    @property
    def cancelling(self) -> bool:
        """Whether the running turn is being cancelled because its chat client left."""
        return self.cancel is not None and self.cancel.cancel_called


class Loopd:
    """The role: owns sessions/, runs turns against the model, serves the chat socket.

    And brokerd's socket, where a forget asks for loopd's part of it.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = SessionStore(settings.sessions_dir, null_content=settings.model.null_content)
        self.model = ModelClient(settings.model)
        self._sessions: dict[str, _SessionTurns] = {}
        """The sessions with a turn running or a `say` waiting for one; no others."""
        self._taken_back: collections.OrderedDict[str, _TakenBack] = collections.OrderedDict()
        """Sessions whose first message was refused, files removed (the last `TAKEN_BACK`)."""
        self._context = TurnContext(
            model=self.model,
            broker_socket=settings.broker_socket,
            memory_socket=settings.memory_socket,
            settings=settings.model,
            new_sessions=self,
            broker_timeout_s=settings.broker_timeout_s,
        )
        self.forget = SessionsForget(self.store, self._hold_for_forget, self._notify_memoryd)
        self.forget_part = proto.ForgetPart(self.forget)

    async def start(self, work: trio.Nursery, shutdown: trio.Event) -> str:
        """Serve the chat socket in `work` until `shutdown` and the turns in flight end.

        A forget decided before loopd stopped is finished first: no turn runs, and nothing
        is appended, until no session holds what the owner forgot.
        """
        s = self.settings
        self._context = dataclasses.replace(self._context, shutdown=shutdown)
        await self.recover(work)
        await work.start(self._serve, shutdown)
        await work.start(self._serve_forget, shutdown)
        return (
            f"serving {s.chat_socket} and {s.forget_socket}; model {s.model.model} at {s.model.url}"
        )

    async def recover(self, work: trio.Nursery) -> None:
        """Finish committed forget plans; memoryd is told about each session, once it is up."""

        async def once_up(session: str, plan: str) -> None:
            work.start_soon(_notify_memoryd_once_up, self.settings.memory_socket, session, plan)

        self.forget.notify = once_up
        try:
            await self.forget_part.recover()
        finally:
            self.forget.notify = self._notify_memoryd

    async def _notify_memoryd(self, session: str, plan: str) -> None:
        await notify_memoryd(self.settings.memory_socket, session, rewritten=plan)

    async def _serve_forget(
        self, shutdown: trio.Event, *, task_status: trio.TaskStatus[Path] = trio.TASK_STATUS_IGNORED
    ) -> None:
        s = self.settings
        await proto.serve_unix(
            proto.BROKER_LOOP,
            s.forget_socket,
            self.handle_broker,
            shutdown=shutdown,
            read_timeout_s=s.read_timeout_s,
            peers=s.forget_peers,
            task_status=task_status,
        )

    async def handle_broker(self, request: proto.BrokerLoopRequest, conn: Connection) -> Message:
        """forget_look, forget_prepare, forget_apply, forget_abort (`proto.ForgetPart`)."""
        return await self.forget_part.handle(request)

    @asynccontextmanager
    async def _using(self, session_id: str) -> AsyncIterator[_SessionTurns]:
        """The session's turns, held while the block uses them (the last user drops them)."""
        turns = self._sessions.setdefault(session_id, _SessionTurns())
        turns.users += 1
        try:
            yield turns
        finally:
            turns.users -= 1
            if turns.users == 0:
                del self._sessions[session_id]

    @asynccontextmanager
    async def _hold_for_forget(self, session_id: str) -> AsyncIterator[None]:
        """The session's turn lock for a forget; `SessionBusy` after `forget_wait_s`."""
        async with self._using(session_id) as turns:
            with trio.move_on_after(self.settings.forget_wait_s) as waited:
                await turns.lock.acquire()
            if waited.cancelled_caught:
                raise SessionBusy(session_id)
            turns.forgetting = True
            try:
                yield
            finally:
                turns.forgetting = False
                turns.lock.release()

    async def _serve(
        self, shutdown: trio.Event, *, task_status: trio.TaskStatus[Path] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The chat socket; the model client outlives every turn that uses it.

        After `shutdown`, turns in flight go on until they end or the role's drain
        deadline cancels them (a cancelled turn records its interrupted call); only then
        is the model client closed.
        """
        s = self.settings
        try:
            await proto.serve_unix(
                proto.OWNER_LOOP,
                s.chat_socket,
                self.handle_chat,
                shutdown=shutdown,
                read_timeout_s=s.read_timeout_s,
                peers=s.chat_peers,
                task_status=task_status,
            )
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_DEADLINE_S):
                await self.model.aclose()

    @property
    def shutdown(self) -> trio.Event:
        """Set when loopd stops: a turn waiting for the owner's decision stops waiting."""
        return self._context.shutdown

    @property
    def sessions_in_use(self) -> int:
        """How many sessions have a turn running or a `say` waiting for one."""
        return len(self._sessions)

    async def handle_chat(self, request: proto.OwnerLoopRequest, conn: Connection) -> Message:
        """session_open → session_opened; say → turn_event* then turn_done; and the rest."""
        match request:
            case SessionOpen():
                return await self.open_session(request)
            case Say():
                return await self.say(request, conn)
            case TurnFollow():
                return await self.follow(request, conn)
            case ModelInfo():
                return ModelInfoReply(model=self.settings.model.model, url=self.settings.model.url)
            case BaselinePreview():
                system = await self._system_prompt()
                model = self.settings.model
                return BaselinePreviewReply(
                    system=system, tools=tool_schemas(), model=model.model, model_url=model.url
                )
            case _:
                assert_never(request)

    async def open_session(self, request: SessionOpen) -> SessionOpened:
        """Resume the named session, or create it (a new id when none is given).

        A session taken back (its first message refused) is opened still: its next
        message writes it again.
        """
        session = request.session or new_session_id()
        if request.session is not None:
            if session in self._taken_back:
                self._taken_back.move_to_end(session)
                return SessionOpened(session=session, created=False)
            exists = await trio.to_thread.run_sync(self.store.exists, session)
            if exists:
                return SessionOpened(session=session, created=False)
        baseline = await self._baseline(session)
        try:
            await trio.to_thread.run_sync(self.store.create, session, baseline, request.origin)
        except FileExistsError:
            return SessionOpened(session=session, created=False)  # opened meanwhile
        log.info("created session %s for %s", session, request.origin)
        return SessionOpened(session=session, created=True)

    async def _begin(self, session: str, taken: _TakenBack) -> Session:
        """A session taken back, begun anew: its baseline made now, written at a message."""
        taken.applied = self.forget.applied
        baseline = await self._baseline(session)
        return await trio.to_thread.run_sync(self.store.begin, session, baseline, taken.origin)

    async def _baseline(self, session: str) -> Baseline:
        return Baseline(
            session=session,
            epoch=0,
            created=proto.utc_stamp(),
            model=self.settings.model.model,
            system=await self._system_prompt(),
            tools=tool_schemas(),
        )

    async def write(self, session: Session) -> None:
        """Write a session taken back, before its next first record (`NewSessions`).

        Not while a forget applies; and a baseline made before a forget that has applied
        since is made again, so no session is written holding what the owner forgot.
        """
        taken = self._taken_back.get(session.id) or _TakenBack(origin=session.origin)
        async with self.forget.writing:
            if taken.applied != self.forget.applied:
                session.rebase(await self._baseline(session.id))
            try:
                await trio.to_thread.run_sync(self.store.write, session)
            except FileExistsError:  # written meanwhile, not by loopd: never overwritten
                raise ServiceError(
                    "session-exists",
                    f"session {session.id} was made by another writer meanwhile; open it again",
                ) from None
        self._taken_back.pop(session.id, None)
        log.info("created session %s again for %s", session.id, session.origin)

    async def unwrite(self, session: Session) -> None:
        """Take back a session whose first message was refused (`NewSessions`)."""
        await trio.to_thread.run_sync(self.store.unwrite, session)
        self._taken_back[session.id] = _TakenBack(origin=session.origin)
        self._taken_back.move_to_end(session.id)
        while len(self._taken_back) > TAKEN_BACK:
            self._taken_back.popitem(last=False)
        log.info("session %s taken back: its first message was refused", session.id)

    async def _system_prompt(self) -> str:
        path = self.settings.system_prompt
        try:
            system = await trio.to_thread.run_sync(path.read_text)
        except (OSError, UnicodeDecodeError) as exc:
            raise ServiceError(
                "system-prompt-unreadable", f"cannot read the system prompt {path}: {exc}"
            ) from None
        try:
            block = await proto.call(
                self.settings.memory_socket,
                MemoryBlock(),
                MemoryBlockReply,
                deadline_s=MEMORY_BLOCK_DEADLINE_S,
            )
        except proto.RemoteError as exc:
            raise ServiceError(
                "memory-unavailable",
                f"the session was not started: {exc.error.message}",
                runbook="memory-unavailable",
            ) from None
        except proto.CallFailed as exc:
            raise ServiceError(
                "memory-unavailable",
                f"the session was not started: memoryd did not answer ({exc})",
                runbook="memory-unavailable",
            ) from None
        return system.rstrip("\n") + "\n\n" + block.text

    async def say(self, request: Say, conn: Connection) -> Message:
        """Run one turn of `request.session`, streaming its events to `conn`.

        A client that leaves mid-turn (closes its end, or stops reading) cancels the
        turn: what it recorded stays (the user record, an interrupted result for a call
        in flight), and the session's next `say` goes on from there. With `keep_going`
        the turn finishes without it, and `turn_follow` (by `ref`) picks it up.
        """
        session_id = request.session
        # The session loopd kept is checked with two stat calls, on the event loop: a
        # worker thread costs more than they do.
        if (
            self.store.kept(session_id) is None
            and session_id not in self._taken_back
            and not await trio.to_thread.run_sync(self.store.exists, session_id)
        ):
            raise ServiceError("no-session", f"there is no session {session_id!r}; open it first")
        async with self._using(session_id) as turns:
            return await self._say(turns, request, conn)

    async def _say(self, turns: _SessionTurns, request: Say, conn: Connection) -> Message:
        session_id = request.session
        busy = ServiceError(
            "turn-in-progress",
            f"a turn is already running in session {session_id}; wait for it to finish",
        )
        if turns.lock.locked() and not (turns.cancelling or turns.forgetting):
            raise busy
        # A turn whose client left is recording its interrupted call (a few seconds at
        # most): the owner who cancelled it and spoke again at once waits for that; so
        # does one who speaks while a forget rewrites the session's files.
        with trio.move_on_after(CANCEL_WAIT_S) as waited:
            await turns.lock.acquire()
        if waited.cancelled_caught:
            raise busy
        running = turns.running = RunningTurn(request.ref)
        turns.cancel = trio.CancelScope()
        outcome: Message = proto.Error(code="turn-interrupted", message=TURN_INTERRUPTED)
        text: str | None = None
        try:
            session = await self._turn_session(session_id)
            text = await self._turn(session, request, conn, running, turns.cancel)
            if text is not None:
                outcome = TurnDone(text=text)
        except ServiceError as exc:
            outcome = exc.to_frame()
            raise
        finally:
            running.end(outcome)
            turns.running = turns.cancel = None
            turns.lock.release()
        if text is None:
            return proto.Error(
                code="turn-cancelled", message="the chat client left; turn cancelled"
            )
        return outcome

    async def _turn_session(self, session_id: str) -> Session:
        """The session a turn runs in: kept, begun anew (taken back), or read."""
        if (kept := self.store.kept(session_id)) is not None:
            return kept
        taken = self._taken_back.get(session_id)
        if taken is not None and not await trio.to_thread.run_sync(self.store.exists, session_id):
            return await self._begin(session_id, taken)
        self._taken_back.pop(session_id, None)
        return await self._read(session_id, self.store.open)

    async def _turn(
        self,
        session: Session,
        request: Say,
        conn: Connection,
        running: RunningTurn,
        cancel: trio.CancelScope,
    ) -> str | None:
        """The turn's final text, or None when its client left and `cancel` stopped it.

        A client that leaves (closes its end, or stops reading) cancels the turn, unless
        the turn is `keep_going`: then it goes on and only stops being sent to.
        """
        outbox = Outbox(conn)

        def gone(why: str) -> None:
            if request.keep_going:
                log.info("chat client of %s %s; its turn goes on", session.id, why)
            elif not cancel.cancel_called:
                log.info("chat client of %s %s; cancelling its turn", session.id, why)
                cancel.cancel()

        async def emit(event: TurnEvent) -> None:
            running.add(event)
            await outbox.put(event)

        failed: TurnError | None = None
        text: str | None = None
        with cancel:
            async with trio.open_nursery() as tasks:

                async def watch() -> None:
                    await conn.wait_peer_gone()
                    gone("left")

                async def send() -> None:
                    await outbox.run(lambda: gone("stopped reading"))
                    tasks.cancel_scope.cancel()  # the turn ended and every event went out

                if not request.keep_going:
                    tasks.start_soon(watch)
                tasks.start_soon(send)
                try:
                    text = await run_turn(
                        session, request.text, self._context, emit, ref=request.ref
                    )
                except TurnError as exc:
                    failed = exc
                finally:
                    outbox.close()
        if failed is not None:
            log.warning("turn in %s ended: %s", session.id, failed.message)
            raise failed  # a ServiceError: the chat client gets its error frame
        return text

    async def follow(self, request: TurnFollow, conn: Connection) -> Message:
        """Every event of the turn that answers `request.ref`, from its start, and its end.

        A running turn's events come as it emits them; a finished one's are rebuilt
        from the session's records.
        """
        turns = self._sessions.get(request.session)
        running = turns.running if turns is not None else None
        if running is not None and running.ref == request.ref:
            return await running.follow(conn)
        if not await trio.to_thread.run_sync(self.store.exists, request.session):
            raise ServiceError("no-session", f"there is no session {request.session!r}")
        session = await self._read(request.session, self.store.load)
        events, end = recorded_turn(session.records, request.ref)
        for event in events:
            await conn.send(event)
        return end

    async def _read(self, session_id: str, read: Callable[[str], Session]) -> Session:
        """The session read from its files; files that cannot be read refuse the turn.

        A baseline that is not one (edited, cut short) or a file loopd may not read
        cannot be replayed: the owner is told which file and why, and nothing is written.
        """
        try:
            return await trio.to_thread.run_sync(read, session_id)
        except (OSError, ValueError) as exc:
            log.error("session %s cannot be read: %s (runbook: session-damaged)", session_id, exc)
            raise ServiceError(
                "session-damaged",
                f"session {session_id} cannot go on: {exc}. Nothing was written to it; "
                "start a new session",
                runbook="session-damaged",
            ) from None


RECOVERED_NOTIFY_DEADLINE_S = 60.0
"""How long a session a recovered forget rewrote waits for memoryd to be up (`bxctl up`'s
readiness deadline): roles start side by side, so memoryd may not answer yet."""


async def _notify_memoryd_once_up(memory_socket: Path, session: str, plan: str) -> None:
    """`session_updated` for a rewritten session, once memoryd answers on its socket.

    memoryd's own catch-up at its start counts a log's lines, and a forget keeps them, so
    without this message memoryd's index would keep the forgotten text.
    """
    pause_s = 0.05
    with trio.move_on_after(RECOVERED_NOTIFY_DEADLINE_S):
        while not await _answers(memory_socket):
            await trio.sleep(pause_s)
            pause_s = min(pause_s * 2, 1.0)
    await notify_memoryd(memory_socket, session, rewritten=plan)


async def _answers(socket: Path) -> bool:
    """Whether memoryd accepts connections (any other error: `notify_memoryd` says it)."""
    try:
        return await trio.to_thread.run_sync(proto.socket_answers, socket)
    except OSError:
        return True
