"""loopd's chat socket: open a session, say something, stream the turn back."""

from __future__ import annotations

import dataclasses
import logging
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
    Say,
    ServiceError,
    SessionOpen,
    SessionOpened,
    TurnDone,
    TurnEvent,
)

from ._config import Settings
from ._model import ModelClient
from ._sessions import Session, SessionStore, new_session_id
from ._tools import tool_schemas
from ._turn import TurnContext, TurnError, run_turn

__all__ = ["Loopd"]

log = logging.getLogger("loopd")

MEMORY_BLOCK_DEADLINE_S = 10.0
CLOSE_DEADLINE_S = 5.0
"""How long closing the model client's connections may take at shutdown."""


class Loopd:
    """The role: owns sessions/, runs turns against the model, serves the chat socket."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = SessionStore(settings.sessions_dir)
        self.model = ModelClient(settings.model)
        self._turns: dict[str, trio.Lock] = {}
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
            with trio.fail_after(MEMORY_BLOCK_DEADLINE_S):
                block = await proto.call(
                    self.settings.memory_socket, MemoryBlock(), MemoryBlockReply
                )
        except proto.RemoteError as exc:
            raise ServiceError(
                "memory-unavailable",
                f"the session was not started: {exc.error.message}",
                runbook="memory-unavailable",
            ) from None
        except (
            proto.Unreachable,
            proto.ProtocolError,
            trio.TooSlowError,
            OSError,
            trio.BrokenResourceError,
        ) as exc:
            raise ServiceError(
                "memory-unavailable",
                f"the session was not started: memoryd did not answer "
                f"({exc or type(exc).__name__})",
                runbook="memory-unavailable",
            ) from None
        return system.rstrip("\n") + "\n\n" + block.text

    async def say(self, request: Say, conn: Connection) -> Message:
        """Run one turn of `request.session`, streaming its events to `conn`."""
        session_id = request.session
        if not await trio.to_thread.run_sync(self.store.exists, session_id):
            raise ServiceError("no-session", f"there is no session {session_id!r}; open it first")
        lock = self._turns.setdefault(session_id, trio.Lock())
        if lock.locked():
            raise ServiceError(
                "turn-in-progress",
                f"a turn is already running in session {session_id}; wait for it to finish",
            )
        async with lock:
            session: Session = await trio.to_thread.run_sync(self.store.load, session_id)
            client_gone = False

            async def emit(event: TurnEvent) -> None:
                nonlocal client_gone
                if client_gone:
                    return
                try:
                    await conn.send(event)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    client_gone = True  # the turn goes on; its records are the truth
                    log.info("chat client of %s left during a turn", session_id)

            try:
                text = await run_turn(session, request.text, self._context, emit)
            except TurnError as exc:
                log.warning("turn in %s ended: %s", session_id, exc.message)
                raise  # a ServiceError: the chat client gets its error frame
        return TurnDone(text=text)
