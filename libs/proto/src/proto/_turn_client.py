"""The one turn client: say something (or follow a turn) and read the turn as it happens.

`bxctl chat`, `bxctl chat -m` and the Mattermost bridge all read a turn through this:

```python
async with proto.open_turn(chat_socket, Say(session=..., text=...)) as turn:
    async for item in turn:
        match item:
            case AssistantText() | ToolCalled() | ToolResult() | ApprovalPending(): ...
            case TurnDone(text=text): ...  # always the last item
```

A turn ends in its `turn_done` (the last item), or in a failure of the `CallFailed`
family: `RemoteError` for loopd's `error` frame (its `code` says which:
`turn-not-found`, `session-full`, `model-timeout`, …), `NoReply` when loopd closed the
connection without the turn's end (it stopped or restarted mid-turn), `CallTimedOut`
when loopd sent nothing for `idle_s`, and the rest of the family as for any call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from ._calls import BadReply, NoReply, RemoteError
from ._client import Conversation, open_call
from ._messages import (
    ApprovalPending,
    AssistantText,
    Error,
    Say,
    ToolCalled,
    ToolResult,
    TurnDone,
    TurnEvent,
    TurnFollow,
)

__all__ = ["TURN_IDLE_S", "Turn", "TurnItem", "open_turn"]

TURN_IDLE_S = 1000.0
"""How long a turn may send nothing: an approval waits up to brokerd's timeout (900 s),
and the call it approves then runs."""
CONNECT_DEADLINE_S = 30.0
"""How long loopd may take to accept the connection and the request."""

TurnItem = TurnEvent | TurnDone
"""What a turn yields: its events, then its `turn_done`."""


class Turn:
    """A turn being read: an async iterator of its events, ending with its `turn_done`."""

    def __init__(self, conversation: Conversation, idle_s: float) -> None:
        self._conversation = conversation
        self._idle_s = idle_s
        self.done: TurnDone | None = None
        """The turn's end, once it came."""

    def __aiter__(self) -> Turn:
        return self

    async def __anext__(self) -> TurnItem:
        if self.done is not None:
            raise StopAsyncIteration
        try:
            frame = await self._conversation.receive(deadline_s=self._idle_s)
        except NoReply:
            raise NoReply("loopd closed the turn without its answer") from None
        match frame:
            case AssistantText() | ToolCalled() | ToolResult() | ApprovalPending():
                return frame
            case TurnDone():
                self.done = frame
                return frame
            case Error():
                raise RemoteError(frame)
            case _:
                kind = type(frame).__struct_config__.tag
                raise BadReply(f"loopd sent a {kind!r} frame in a turn")


@asynccontextmanager
async def open_turn(
    path: Path, request: Say | TurnFollow, *, idle_s: float = TURN_IDLE_S
) -> AsyncIterator[Turn]:
    """Send `request` to loopd's chat socket at `path`, and yield the turn to read.

    Leaving the block closes the connection: a `say` without `keep_going` is then
    cancelled by loopd (what was said is kept).
    """
    async with open_call(path, request, deadline_s=CONNECT_DEADLINE_S) as conversation:
        yield Turn(conversation, idle_s)
