"""loopd's chat socket: open a session, say something, stream the turn back."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from collections.abc import Callable
from pathlib import Path

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
from ._model import ModelClient
from ._outbox import Outbox
from ._sessions import Session, SessionStore, new_session_id
from ._tools import tool_schemas
from ._turn import TurnContext, TurnError, run_turn

__all__ = ["Loopd"]

log = logging.getLogger("loopd")

MEMORY_BLOCK_DEADLINE_S = 10.0
CLOSE_DEADLINE_S = 5.0
"""How long closing the model client's connections may take at shutdown."""
CANCEL_WAIT_S = 10.0
"""How long a `say` waits for the session's cancelled turn to finish recording."""


@dataclasses.dataclass
class _Running:
    """A turn in progress, and the clients following it (`turn_follow`)."""

    ref: str | None
    followers: list[trio.MemorySendChannel[Message]] = dataclasses.field(default_factory=list)

    def tell(self, frame: Message) -> None:
        for follower in self.followers:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                follower.send_nowait(frame)  # fails only for a follower that left

    def end(self, outcome: Message) -> None:
        self.tell(outcome)
        for follower in self.followers:
            follower.close()


TURN_INTERRUPTED = (
    "the turn for this message stopped before it answered (boxmaker stopped, a role "
    "restarted, or the model failed); say something in the session to go on"
)


class Loopd:
    """The role: owns sessions/, runs turns against the model, serves the chat socket."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = SessionStore(settings.sessions_dir, null_content=settings.model.null_content)
        self.model = ModelClient(settings.model)
        self._turns: dict[str, trio.Lock] = {}
        self._cancelling: set[str] = set()
        """Sessions whose turn is being cancelled because its chat client left."""
        self._running: dict[str, _Running] = {}
        self._context = TurnContext(
            model=self.model,
            broker_socket=settings.broker_socket,
            memory_socket=settings.memory_socket,
            settings=settings.model,
            broker_timeout_s=settings.broker_timeout_s,
        )

    async def start(self, work: trio.Nursery, shutdown: trio.Event) -> str:
        """Serve the chat socket in `work` until `shutdown` and the turns in flight end."""
        s = self.settings
        self._context = dataclasses.replace(self._context, shutdown=shutdown)
        await work.start(self._serve, shutdown)
        return f"serving {s.chat_socket}; model {s.model.model} at {s.model.url}"

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

    async def handle_chat(self, request: Message, conn: Connection) -> Message:
        """session_open → session_opened; say → turn_event* then turn_done; baseline_preview."""
        if isinstance(request, SessionOpen):
            return await self.open_session(request)
        if isinstance(request, Say):
            return await self.say(request, conn)
        if isinstance(request, TurnFollow):
            return await self.follow(request, conn)
        if isinstance(request, ModelInfo):
            return ModelInfoReply(model=self.settings.model.model, url=self.settings.model.url)
        if isinstance(request, BaselinePreview):
            system = await self._system_prompt()
            model = self.settings.model
            return BaselinePreviewReply(
                system=system, tools=tool_schemas(), model=model.model, model_url=model.url
            )
        raise AssertionError(f"unroutable {request!r}")

    async def open_session(self, request: SessionOpen) -> SessionOpened:
        """Resume the named session, or create it (a new id when none is given)."""
        session = request.session or new_session_id()
        if request.session is not None:
            exists = await trio.to_thread.run_sync(self.store.exists, session)
            if exists:
                return SessionOpened(session=session, created=False)
        baseline = Baseline(
            session=session,
            epoch=0,
            created=proto.utc_stamp(),
            model=self.settings.model.model,
            system=await self._system_prompt(),
            tools=tool_schemas(),
        )
        try:
            await trio.to_thread.run_sync(self.store.create, session, baseline)
        except FileExistsError:
            return SessionOpened(session=session, created=False)  # opened meanwhile
        log.info("created session %s for %s", session, request.origin)
        return SessionOpened(session=session, created=True)

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
        if self.store.kept(session_id) is None and not await trio.to_thread.run_sync(
            self.store.exists, session_id
        ):
            raise ServiceError("no-session", f"there is no session {session_id!r}; open it first")
        lock = self._turns.setdefault(session_id, trio.Lock())
        busy = ServiceError(
            "turn-in-progress",
            f"a turn is already running in session {session_id}; wait for it to finish",
        )
        if lock.locked() and session_id not in self._cancelling:
            raise busy
        # A turn whose client left is recording its interrupted call (a few seconds at
        # most): the owner who cancelled it and spoke again at once waits for that.
        with trio.move_on_after(CANCEL_WAIT_S) as waited:
            await lock.acquire()
        if waited.cancelled_caught:
            raise busy
        running = _Running(request.ref)
        self._running[session_id] = running
        outcome: Message = proto.Error(code="turn-interrupted", message=TURN_INTERRUPTED)
        try:
            session = self.store.kept(session_id) or await self._read(session_id, self.store.open)
            if request.keep_going:
                text: str | None = await self._turn_to_the_end(session, request, conn, running)
            else:
                text = await self._turn_unless_gone(session, request, conn, running)
            if text is not None:
                outcome = TurnDone(text=text)
        except ServiceError as exc:
            outcome = exc.to_frame()
            raise
        finally:
            running.end(outcome)
            del self._running[session_id]
            self._cancelling.discard(session_id)
            lock.release()
        if text is None:
            return proto.Error(
                code="turn-cancelled", message="the chat client left; turn cancelled"
            )
        return TurnDone(text=text)

    async def _turn_to_the_end(
        self, session: Session, request: Say, conn: Connection, running: _Running
    ) -> str:
        """The turn's final text; a client that leaves does not stop it."""
        outbox = Outbox(conn)

        async def emit(event: TurnEvent) -> None:
            running.tell(event)
            await outbox.put(event)

        def left() -> None:
            log.info("chat client of %s left; its turn goes on", session.id)

        failed: TurnError | None = None
        text = ""
        async with trio.open_nursery() as sending:
            sending.start_soon(outbox.run, left)
            try:
                text = await run_turn(session, request.text, self._context, emit, ref=request.ref)
            except TurnError as exc:
                failed = exc
            finally:
                outbox.close()
        if failed is not None:
            log.warning("turn in %s ended: %s", session.id, failed.message)
            raise failed
        return text

    async def follow(self, request: TurnFollow, conn: Connection) -> Message:
        """The events of the turn that answers `request.ref` from now on, and its end."""
        running = self._running.get(request.session)
        if running is not None and running.ref == request.ref:
            send, receive = trio.open_memory_channel[Message](math.inf)
            running.followers.append(send)
            async with receive:
                async for frame in receive:
                    if isinstance(frame, TurnDone | proto.Error):
                        return frame
                    try:
                        await conn.send(frame)
                    except proto.PeerGone:
                        running.followers.remove(send)
                        return proto.Error(code="turn-interrupted", message="follower left")
            return proto.Error(code="turn-interrupted", message=TURN_INTERRUPTED)
        if not await trio.to_thread.run_sync(self.store.exists, request.session):
            raise ServiceError("no-session", f"there is no session {request.session!r}")
        session = await self._read(request.session, self.store.load)
        return _ended_turn(session.records, request.ref)

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

    async def _turn_unless_gone(
        self, session: Session, request: Say, conn: Connection, running: _Running
    ) -> str | None:
        """The turn's final text, or None when its client left and the turn was cancelled."""
        done: list[str] = []
        failed: list[TurnError] = []
        async with trio.open_nursery() as race:

            def cancel(why: str) -> None:
                if not race.cancel_scope.cancel_called:
                    log.info("chat client of %s %s; cancelling its turn", session.id, why)
                    self._cancelling.add(session.id)
                    race.cancel_scope.cancel()

            outbox = Outbox(conn)

            async def emit(event: TurnEvent) -> None:
                running.tell(event)
                await outbox.put(event)

            async def watch() -> None:
                await conn.wait_peer_gone()
                cancel("left")

            async def send() -> None:
                await outbox.run(lambda: cancel("stopped reading"))
                race.cancel_scope.cancel()  # the turn ended and every event went out

            async def turn() -> None:
                try:
                    done.append(
                        await run_turn(session, request.text, self._context, emit, ref=request.ref)
                    )
                except TurnError as exc:
                    log.warning("turn in %s ended: %s", session.id, exc.message)
                    failed.append(exc)
                finally:
                    outbox.close()

            race.start_soon(watch)
            race.start_soon(send)
            race.start_soon(turn)
        if failed:
            raise failed[0]  # a ServiceError: the chat client gets its error frame
        return done[0] if done else None


def _ended_turn(records: list[proto.SessionRecord], ref: str) -> Message:
    """How the finished turn that answered the message `ref` ended, from the session's log.

    Its answer is the last assistant message without tool calls before the next message
    of the owner; without one, the turn stopped before it answered.
    """
    start = next(
        (
            i
            for i in range(len(records) - 1, -1, -1)
            if isinstance(records[i], proto.UserRecord) and records[i].ref == ref  # type: ignore[union-attr]
        ),
        None,
    )
    if start is None:
        return proto.Error(
            code="turn-not-found",
            message=f"no message of this session is named {ref!r}: it never arrived",
        )
    answer: str | None = None
    for record in records[start + 1 :]:
        if isinstance(record, proto.UserRecord):
            break
        if isinstance(record, proto.AssistantRecord) and not record.tool_calls:
            answer = record.content or ""
    if answer is None:
        return proto.Error(code="turn-interrupted", message=TURN_INTERRUPTED)
    return TurnDone(text=answer)
