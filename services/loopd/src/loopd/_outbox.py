"""A turn's events on their way to its chat client: in order, text joined when it piles up.

A model server streams its answer a token per event, and from a fast server (or after a
pause) dozens of them arrive in one network read. Sent one frame each, every piece would
cost loopd and the chat client a write and a wake-up. The outbox takes each event without
waiting; its task sends them in order, and the text pieces that came in while the last
frame was being written (or before the task got to run) go out as one `assistant_text`.
A piece that comes alone goes out at once, as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

from proto import AssistantText, Connection, PeerGone, TurnEvent

__all__ = ["Outbox", "joined"]


def joined(events: list[TurnEvent]) -> list[TurnEvent]:
    """`events` in order, each run of `assistant_text` made one."""
    out: list[TurnEvent] = []
    run: list[str] = []
    for event in events:
        if isinstance(event, AssistantText):
            run.append(event.text)
            continue
        if run:
            out.append(AssistantText(text="".join(run)))
            run = []
        out.append(event)
    if run:
        out.append(AssistantText(text="".join(run)))
    return out


class Outbox:
    """The events of one turn for one chat client."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._send, self._receive = trio.open_memory_channel[TurnEvent](math.inf)
        self.gone = False
        """Whether the client has left (or stopped reading): nothing more is sent."""

    async def put(self, event: TurnEvent) -> None:
        """Queue `event` (never waits: it is the turn's `emit`)."""
        self._send.send_nowait(event)

    def close(self) -> None:
        """No more events: `run` sends what is queued and returns."""
        self._send.close()

    async def run(self, left: Callable[[], None]) -> None:
        """Send the events until `close`; call `left` once if the client goes."""
        async with self._receive:
            async for first in self._receive:
                events = [first]
                while True:
                    try:
                        events.append(self._receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                for event in joined(events):
                    if self.gone:
                        break
                    try:
                        await self._conn.send(event)
                    except PeerGone:
                        self.gone = True
                        left()
