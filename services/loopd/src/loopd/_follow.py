"""A turn's events for a client that follows it (`turn_follow`), from the turn's start.

A running turn keeps every event it emitted in order; a follower reads them by index and
waits for the next one, so one that joins late gets the events before it joined exactly
once, then the live ones, then the turn's end. Events are never pushed into a follower's
channel, so a follower that leaves leaves nothing to clean up. A finished turn's events
are rebuilt from the session's records (what a restarted bridge needs to redraw a reply
with its tool lines).
"""

from __future__ import annotations

import trio

import proto
from proto import (
    AssistantRecord,
    AssistantText,
    Connection,
    Message,
    ToolCall,
    ToolCalled,
    ToolResult,
    ToolResultRecord,
    TurnDone,
    TurnEvent,
    UserRecord,
)

from ._outbox import joined
from ._outcome import recorded_status

__all__ = ["TURN_INTERRUPTED", "RunningTurn", "recorded_turn"]

TURN_INTERRUPTED = (
    "the turn for this message stopped before it answered (boxmaker stopped, a role "
    "restarted, or the model failed); say something in the session to go on"
)


class RunningTurn:
    """A turn in progress: its `ref`, its events so far and, once it has ended, its end."""

    def __init__(self, ref: str | None) -> None:
        self.ref = ref
        self.events: list[TurnEvent] = []
        self.outcome: Message | None = None
        """`turn_done` or the `error` the turn ended with; None while it runs."""
        self._changed = trio.Event()

    def add(self, event: TurnEvent) -> None:
        """Keep `event` and wake the followers."""
        self.events.append(event)
        self._wake()

    def end(self, outcome: Message) -> None:
        """The turn has ended with `outcome`: followers send it after the last event."""
        self.outcome = outcome
        self._wake()

    def _wake(self) -> None:
        # A trio.Event cannot be cleared: each change sets the one followers wait on and
        # puts a new one in its place.
        self._changed.set()
        self._changed = trio.Event()

    async def follow(self, conn: Connection) -> Message:
        """Send `conn` every event of the turn from its start; return the turn's end.

        Raises:
            PeerGone: the follower left (the turn goes on).
        """
        sent = 0
        while True:
            if sent < len(self.events):
                batch = self.events[sent:]
                sent += len(batch)
                for event in joined(batch):
                    await conn.send(event)
            elif self.outcome is not None:
                return self.outcome
            else:
                await self._changed.wait()


def recorded_turn(records: list[proto.SessionRecord], ref: str) -> tuple[list[TurnEvent], Message]:
    """The events and end of the finished turn that answered the message `ref`.

    Rebuilt from the records after that message, up to the owner's next one, in the order
    a running turn emits them: each assistant message's text, then each call followed by
    its result. The answer is the last assistant message without tool calls; without one,
    the turn stopped before it answered.
    """
    start = next(
        (
            i
            for i in range(len(records) - 1, -1, -1)
            if isinstance(records[i], UserRecord) and records[i].ref == ref  # type: ignore[union-attr]
        ),
        None,
    )
    if start is None:
        return [], proto.Error(
            code="turn-not-found",
            message=f"no message of this session is named {ref!r}: it never arrived",
        )
    events: list[TurnEvent] = []
    calls: dict[str, ToolCall] = {}
    answer: str | None = None
    for record in records[start + 1 :]:
        match record:
            case UserRecord():
                break
            case AssistantRecord():
                if record.content:
                    events.append(AssistantText(text=record.content))
                calls = {call.id: call for call in record.tool_calls}
                if not record.tool_calls:
                    answer = record.content or ""
            case ToolResultRecord():
                call = calls.pop(record.call_id, None) or ToolCall(
                    id=record.call_id, name=record.name, arguments=""
                )
                events.append(ToolCalled(call=call))
                events.append(
                    ToolResult(
                        call=call,
                        status=recorded_status(record.content),
                        content=record.content,
                        label=record.label,
                    )
                )
    if answer is None:
        return events, proto.Error(code="turn-interrupted", message=TURN_INTERRUPTED)
    return events, TurnDone(text=answer)
