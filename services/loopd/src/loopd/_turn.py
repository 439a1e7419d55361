"""One turn: the owner's message, then model calls and tool calls until the model answers.

A turn appends a `user` record, then loops: send the baseline and every record to the
model, append its `assistant` record, run each tool call in order and append a
`tool_result` per call, until an assistant message has no tool calls (the turn is
finished; memoryd is told, best effort). Nothing already in the log is ever rewritten:
a failed turn leaves what happened, and the session stays usable.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, assert_never

import msgspec
import trio

import proto
from proto import (
    ApprovalPending,
    AssistantRecord,
    AssistantText,
    ToolCall,
    ToolCalled,
    ToolRequest,
    ToolResponse,
    ToolResult,
    ToolResultRecord,
    TurnEvent,
    UserRecord,
)

from ._config import ModelSection
from ._model import ContextExceeded, ModelClient, ModelError
from ._outcome import ToolOutcome
from ._sessions import CHARS_PER_TOKEN, Session
from ._tools import CORE_TOOL_NAMES, REGISTRY, find_tools

__all__ = [
    "ContextRefused",
    "Emit",
    "MessageTooLong",
    "SessionFull",
    "TurnContext",
    "TurnError",
    "run_turn",
]

log = logging.getLogger("loopd.turn")

Emit = Callable[[TurnEvent], Awaitable[None]]
_encoder = msgspec.json.Encoder()
SESSION_UPDATED_DEADLINE_S = 5.0


class TurnError(proto.ServiceError):
    """A turn that could not finish; the chat client gets its code, sentence and runbook."""


class SessionFull(TurnError):
    """The conversation so far leaves no room for the next request: a new session would."""

    def __init__(self, sentence: str = "this session is full; start a new one") -> None:
        super().__init__("session-full", sentence)


class MessageTooLong(TurnError):
    """The owner's message alone does not fit the model's context: no session would take it."""

    def __init__(self, message: int, window: int, used: int, answer: int) -> None:
        super().__init__(
            "message-too-long",
            f"this message is about {message:,} tokens; this session's model takes "
            f"{window:,} (the system prompt and the conversation so far take {used:,}, and "
            f"its answer up to {answer:,}): shorten it or split it",
        )


class ContextRefused(TurnError):
    """The server refused a session's first request for its context (its words said).

    The system prompt and the first message are all it held: "the session is full; start
    a new one" would send the owner to a new session that fails the same way.
    """

    def __init__(self, words: str) -> None:
        super().__init__(
            "context-refused",
            "the model server refused this session's first message for its context: "
            f"{words}. The system prompt and this message do not fit in it: start a new "
            "session with a shorter message, or give the model server a larger context",
        )


class NewSessions(Protocol):
    """A session whose first message is refused is taken back, and written again later.

    Its folder would otherwise stay behind empty (another copy of memory), and a first
    message the server refused would stay in it, refused again at every next turn.
    """

    async def write(self, session: Session) -> None:
        """Write a session begun anew (its baseline made again if a forget ran since)."""

    async def unwrite(self, session: Session) -> None:
        """Remove the files and catalog line of a session whose first message was refused."""


@dataclass(frozen=True)
class TurnContext:
    """What a turn needs besides its session."""

    model: ModelClient
    broker_socket: Path
    memory_socket: Path
    settings: ModelSection
    new_sessions: NewSessions
    broker_timeout_s: float = 960.0
    """How long a call to brokerd may take: an `ask` call waits for the owner (brokerd's
    approval timeout) and then runs, so this is that timeout and a margin."""
    shutdown: trio.Event = field(default_factory=trio.Event)
    """Set when loopd stops: a turn waiting for the owner's decision stops waiting."""


def _check_room(session: Session, ctx: TurnContext) -> None:
    needed = session.estimated_tokens() + ctx.settings.max_tokens
    if needed > ctx.model.context_tokens:
        raise SessionFull


def _check_message(session: Session, ctx: TurnContext, text: str) -> None:
    """Refuse, before it is recorded, a message the next request would have no room for.

    Which sentence depends on where the room went: a message longer than a new session's
    room must be shortened; one that fits a new session but not this one's remaining room
    can also go to a new session; a session with no room left at all is full.
    """
    window, answer = ctx.model.context_tokens, ctx.settings.max_tokens
    if session.estimated_tokens(len(text)) + answer <= window:
        return
    used = session.estimated_tokens()
    message = -(-len(text) // CHARS_PER_TOKEN)
    room = window - answer - used
    if session.baseline_tokens() + message + answer > window:
        raise MessageTooLong(message, window, used, answer)
    if room <= 0:
        raise SessionFull
    raise SessionFull(
        f"this message is about {message:,} tokens, and this session has room for about "
        f"{room:,} more (its model takes {window:,}; the conversation so far takes "
        f"{used:,}): shorten it, or start a new session"
    )


async def _append(session: Session, record: proto.SessionRecord) -> None:
    await trio.to_thread.run_sync(session.append, record)


INTERRUPTED = (
    "interrupted: this call did not finish (the owner cancelled the turn, or boxmaker "
    "stopped or a role restarted, before its result came back); {fate}"
)
"""The result recorded for a tool call that has none: a strict server needs one."""


async def answer_unanswered(session: Session, ctx: TurnContext) -> int:
    """Record a result for every tool call of the log that has none; return how many.

    What became of the call is asked of brokerd, whose audit knows whether it ran.
    """
    calls = session.unanswered()
    for call in calls:
        fate = await call_fate(ctx.broker_socket, session.id, call.id)
        await _append(session, _interrupted(call, fate))
    if calls:
        log.warning(
            "session %s: recorded %d interrupted tool call(s) before going on",
            session.id,
            len(calls),
        )
    return len(calls)


def _interrupted(call: ToolCall, fate: str) -> ToolResultRecord:
    return _error(INTERRUPTED.format(fate=fate)).record(call)


async def call_fate(broker_socket: Path, session: str, call_id: str) -> str:
    """What became of an unanswered call, in words, as brokerd's audit log tells it."""
    try:
        reply = await proto.call(
            broker_socket,
            proto.CallState(session=session, call=call_id),
            proto.CallStateReply,
            deadline_s=CALL_STATE_DEADLINE_S,
        )
    except proto.CallFailed as exc:
        log.warning("cannot ask brokerd what became of call %r: %s", call_id, exc)
        return "it may have run (brokerd could not be asked)"
    return _FATES[reply.state].format(status=reply.status or "")


CALL_STATE_DEADLINE_S = 10.0
_FATES = {
    "unknown": "brokerd has no record of running it, so it did not run",
    "denied": "brokerd denied it, so it did not run",
    "refused": "brokerd refused it, so it did not run",
    "started": "it was running and may have run",
    "finished": "it ran (its status: {status}), but its result was lost",
}


async def run_turn(
    session: Session, text: str, ctx: TurnContext, emit: Emit, *, ref: str | None = None
) -> str:
    """Run one turn to its end and return the assistant's final text.

    Cancelled (boxmaker stopping past its drain deadline, or the chat client leaving:
    the owner cancelled), it records a result for the tool call in flight, so the
    session goes on next time.
    """
    await answer_unanswered(session, ctx)
    await ctx.model.probe_context()
    first = not session.records
    try:
        _check_message(session, ctx, text)
    except MessageTooLong:
        if first and session.written:
            await ctx.new_sessions.unwrite(session)
        raise
    if not session.written:
        await ctx.new_sessions.write(session)
    await _append(session, UserRecord(time=proto.utc_stamp(), content=text, ref=ref))
    try:
        try:
            return await _steps(session, ctx, emit, first=first)
        except ContextRefused:
            # Its one record is the refused message: taken back, the session is as if
            # begun only, and a shorter message begins it, rather than finding it full.
            await ctx.new_sessions.unwrite(session)
            raise
    except* trio.Cancelled:
        # `except*`: a cancel that reaches a task inside one of the turn's nurseries (the
        # wait for the owner's decision) arrives here in that nursery's exception group.
        with trio.CancelScope(shield=True), trio.move_on_after(RECORD_DEADLINE_S):
            for call in session.unanswered():
                await _append(session, _interrupted(call, "it may have run"))
        raise


RECORD_DEADLINE_S = 5.0
"""How long a cancelled turn may take to record its interrupted calls."""


async def _steps(session: Session, ctx: TurnContext, emit: Emit, *, first: bool) -> str:
    """The turn's model and tool calls; `first`: its message is the session's first record."""

    async def on_text(delta: str) -> None:
        await emit(AssistantText(text=delta))

    for step in range(ctx.settings.max_steps):
        _check_room(session, ctx)
        body = session.history.body(ctx.model.head(session.baseline.tools))
        try:
            reply = await ctx.model.send(body, on_text)
        except ContextExceeded as exc:
            if first and step == 0:
                log.warning("session %s: its first request refused: %s", session.id, exc)
                raise ContextRefused(exc.words) from None
            log.warning("session %s is full: %s", session.id, exc)
            raise SessionFull from None
        except ModelError as exc:
            # model-timeout, model-unreachable or model-error: a client tells them apart
            # by the code, never by the sentence.
            raise TurnError(exc.code, str(exc), runbook="model-unavailable") from None
        calls = _new_ids(session, reply.tool_calls)
        await _append(
            session,
            AssistantRecord(
                time=proto.utc_stamp(),
                content=reply.content,
                reasoning_content=reply.reasoning,
                tool_calls=calls,
                tokens=reply.total_tokens,
            ),
        )
        if not calls:
            await notify_memoryd(ctx.memory_socket, session.id)
            return reply.content or ""
        for call in calls:
            await emit(ToolCalled(call=call))
            outcome = await _run_tool(session, call, ctx, emit)
            await _append(session, outcome.record(call))
            await emit(
                ToolResult(
                    call=call,
                    status=outcome.status,
                    content=outcome.content,
                    label=outcome.label,
                )
            )
    raise TurnError(
        "turn-too-long",
        f"the model made {ctx.settings.max_steps} calls in this turn without answering; "
        "the turn was stopped (raise [model] max_steps to allow more)",
    )


def _new_ids(session: Session, calls: list[ToolCall]) -> list[ToolCall]:
    """The calls, each with an id not used before in the session (loopd's own if needed).

    Models reuse ids such as `call_0` from turn to turn; in a session an id names one call,
    so brokerd's audit can say what became of it (`call_state`) after a crash.
    """
    used = session.history.call_ids
    fresh: list[ToolCall] = []
    for call in calls:
        if call.id in used or any(call.id == other.id for other in fresh):
            call = msgspec.structs.replace(call, id=f"call-{secrets.token_hex(8)}")
        fresh.append(call)
    return fresh


async def notify_memoryd(
    memory_socket: Path, session: str, *, rewritten: str | None = None
) -> None:
    try:
        await proto.call(
            memory_socket,
            proto.SessionUpdated(session=session, rewritten=rewritten),
            proto.Ok,
            deadline_s=SESSION_UPDATED_DEADLINE_S,
        )
    except proto.CallFailed as exc:
        log.warning(
            "session_updated for %s not delivered (memoryd catches up at its next start): %s",
            session,
            exc,
        )


def _error(message: str) -> ToolOutcome:
    return ToolOutcome("error", message)


async def _run_tool(session: Session, call: ToolCall, ctx: TurnContext, emit: Emit) -> ToolOutcome:
    match proto.parse_core_call(call):
        case proto.Clock():
            now = proto.utc_now()
            return ToolOutcome("ok", f"{proto.utc_stamp(now)} ({now:%A})")
        case proto.FindTool(args=args):
            found = [t["function"] for t in find_tools(args.query)]
            if not found:
                names = ", ".join(REGISTRY)
                return ToolOutcome("ok", f"no tool matches {args.query!r}; the tools are: {names}")
            return ToolOutcome("ok", _encoder.encode(found).decode())
        case proto.Brokered(call=brokered) | proto.CallTool(call=brokered):
            return await _broker(session, brokered, ctx, emit)
        case proto.NoSuchLocalTool(name=name):
            known = ", ".join(REGISTRY)
            return _error(f"no tool named {name!r}; use find_tool (the tools are: {known})")
        case proto.NoSuchTool(name=name):
            known = ", ".join(CORE_TOOL_NAMES)
            return _error(f"there is no tool named {name!r}; the tools are {known}")
        case proto.BadArgs(message=message):
            return _error(message)
        case unexpected:
            assert_never(unexpected)


async def _broker(session: Session, call: ToolCall, ctx: TurnContext, emit: Emit) -> ToolOutcome:
    request = ToolRequest(session=session.id, call=call, taint=session.taint())
    with trio.move_on_after(ctx.broker_timeout_s) as waited:
        return await _ask_broker(ctx.broker_socket, request, emit, ctx.shutdown)
    assert waited.cancelled_caught
    return _error(
        f"brokerd did not answer within {ctx.broker_timeout_s:g} s; the call may have run"
    )


async def _ask_broker(
    socket: Path, request: ToolRequest, emit: Emit, shutdown: trio.Event
) -> ToolOutcome:
    """Brokerd's answer to `request`; once the owner is asked, loopd stopping ends the wait.

    The owner may be away for hours: stopping does not wait for them. Hanging up makes
    brokerd settle the approval as not approved.
    """
    asked = trio.Event()
    outcome: ToolOutcome | None = None
    with trio.CancelScope() as waiting:
        async with trio.open_nursery() as watching:
            watching.start_soon(_stop_waiting, asked, shutdown, waiting)
            outcome = await _converse(socket, request, emit, asked)
            watching.cancel_scope.cancel()
    if outcome is None:
        return ToolOutcome("denied", proto.NOT_DECIDED)
    return outcome


async def _stop_waiting(asked: trio.Event, shutdown: trio.Event, waiting: trio.CancelScope) -> None:
    await asked.wait()
    await shutdown.wait()
    waiting.cancel()


async def _converse(
    socket: Path, request: ToolRequest, emit: Emit, asked: trio.Event
) -> ToolOutcome:
    """Brokerd's answer to `request`; `asked` is set when it says the owner is asked.

    Every failure of the call is an outcome (never raised: this runs in a nursery, whose
    exception group the caller would have to unwrap).
    """
    try:
        async with proto.open_call(socket, request) as conversation:
            while True:
                match await conversation.receive():
                    case ApprovalPending() as frame:
                        asked.set()
                        await emit(frame)
                    case ToolResponse() as frame:
                        return ToolOutcome(frame.status, frame.content, frame.label)
                    case proto.Error() as frame:
                        return _error(f"brokerd refused the call: {frame.message}")
                    case frame:
                        kind = type(frame).__struct_config__.tag
                        return _error(f"brokerd sent an unexpected {kind!r}")
    except proto.Unreachable as exc:
        return _error(f"brokerd is unreachable ({exc.reason}); the tool did not run")
    except proto.CallFailed as exc:
        return _error(f"brokerd closed the call without an answer ({exc})")
