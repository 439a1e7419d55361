"""The turn runner: each session's accepted posts, one turn at a time, in order.

A session (a thread) has one worker while it has posts to answer. Each turn says the
post to loopd (or, if it may have been said before a restart, follows its turn by ref)
through the one turn client, `proto.open_turn`, and feeds what happens to the reply
poster and the approvals. loopd may be down, restarting or slow: every failure of the
call is a note in the reply, a pause from the one backoff and another try, never the
bridge's end. A follow replays the turn from its start, so the reply is rebuilt whole.
"""

from __future__ import annotations

import logging
import math
from typing import assert_never

import trio

import proto
from proto import (
    ApprovalPending,
    AssistantText,
    Say,
    SessionOpen,
    SessionOpened,
    ToolCalled,
    ToolResult,
    TurnDone,
    TurnFollow,
)

from ._approvals import ApprovalPoster
from ._config import Settings
from ._ledger import Ledger
from ._outbound import FIRST_PAUSE_S, LONGEST_PAUSE_S
from ._replies import LiveReply, ReplyPoster
from ._state import Inflight
from ._text import Reply

__all__ = ["TurnRunner"]

log = logging.getLogger("mattermostd")


class TurnRunner:
    """Runs the turns of every session, in a nursery that outlives a dropped connection."""

    def __init__(
        self,
        settings: Settings,
        ledger: Ledger,
        approvals: ApprovalPoster,
        poster: ReplyPoster,
    ) -> None:
        self.s = settings
        self.ledger = ledger
        self.approvals = approvals
        self.poster = poster
        self._queues: dict[str, trio.MemorySendChannel[Inflight]] = {}
        self._taken: set[str] = set()
        """Posts queued or being answered: a post is answered by one turn, once."""
        self._nursery: trio.Nursery | None = None
        self._stopping = trio.Event()

    def attach(self, nursery: trio.Nursery, stopping: trio.Event) -> None:
        """Run the workers in `nursery` until `stopping`.

        Once it is set, queued posts wait for the next start; the turns already running
        finish, or the role's drain ends them.
        """
        self._nursery = nursery
        self._stopping = stopping

    def enqueue(self, inflight: Inflight) -> None:
        """Answer `inflight` after the posts of its session before it."""
        if self._stopping.is_set():
            return  # answered after the next start
        if inflight.post_id in self._taken:
            # Accepted by the catch-up of the first connection and also left in flight
            # for the resume that follows it: a second turn would redraw the reply.
            return
        self._taken.add(inflight.post_id)
        queue = self._queues.get(inflight.session)
        if queue is None:
            send, receive = trio.open_memory_channel[Inflight](math.inf)
            self._queues[inflight.session] = queue = send
            assert self._nursery is not None, "TurnRunner.run is not running"
            self._nursery.start_soon(self._worker, inflight.session, receive)
        queue.send_nowait(inflight)

    def soon(self, *args: object) -> None:
        """Start a task beside the turns (an approval's posts, its settling)."""
        assert self._nursery is not None, "TurnRunner.attach was not called"
        self._nursery.start_soon(*args)  # type: ignore[arg-type]

    async def _worker(self, session: str, queue: trio.MemoryReceiveChannel[Inflight]) -> None:
        while not self._stopping.is_set():
            try:
                inflight = queue.receive_nowait()
            except trio.WouldBlock:
                break
            try:
                await self._answer(inflight)
            finally:
                self._taken.discard(inflight.post_id)
        del self._queues[session]

    async def _answer(self, inflight: Inflight) -> None:
        live = LiveReply(inflight)
        async with trio.open_nursery() as tasks:
            tasks.start_soon(self.poster.show, live)
            tasks.start_soon(self.poster.typing, live)
            await self._run(live)
            live.finish()
        await self.approvals.close_gone(inflight.session)

    async def _run(self, live: LiveReply) -> None:
        """Say the post (or follow its turn) until its answer or error; loopd may restart."""
        inflight = live.inflight
        ref = f"mm:{inflight.post_id}"
        backoff = proto.Backoff(FIRST_PAUSE_S, LONGEST_PAUSE_S)
        while True:
            try:
                if not inflight.said:
                    await self._open_session(inflight.session)
                    self.ledger.said(inflight)
                    request: Say | TurnFollow = Say(
                        session=inflight.session, text=inflight.text, ref=ref, keep_going=True
                    )
                else:
                    request = TurnFollow(session=inflight.session, ref=ref)
                if await self._read(live, request):
                    return
            except proto.RemoteError as exc:
                if exc.code == "turn-not-found":
                    self.ledger.unsaid(inflight)  # the say never arrived: say it now
                    continue
                if exc.code == "turn-in-progress":
                    await trio.sleep(backoff.next())
                    continue
                live.reply.note = _failure(exc.error)
                return
            except proto.CallFailed as exc:
                if not live.reply.note:
                    live.reply.note = (
                        "_boxmaker is not answering right now (loopd: "
                        f"{proto.code_span(str(exc))}); this message is answered when it is back._"
                    )
                    live.update()
                log.warning("loopd for %s: %s; trying again", inflight.session, exc)
                await trio.sleep(backoff.next())

    async def _open_session(self, session: str) -> None:
        opened = await proto.call(
            self.s.loop_socket,
            SessionOpen(origin="mattermost", session=session),
            SessionOpened,
            deadline_s=self.s.call_timeout_s,
        )
        if opened.created:
            log.info("new session %s", session)

    async def _read(self, live: LiveReply, request: Say | TurnFollow) -> bool:
        """One conversation with loopd; True once the turn's outcome is in the reply."""
        async with proto.open_turn(self.s.loop_socket, request) as events:
            # a follow replays the turn from its start: the reply is built again
            live.reply = Reply()
            async for item in events:
                match item:
                    case TurnDone(text=text):
                        live.reply.finish(text)
                        return True
                    case AssistantText(text=text):
                        live.reply.text(text)
                        live.thinking = True
                    case ToolCalled(call=call):
                        live.reply.called(call)
                    case ToolResult():
                        live.reply.result(item)
                        live.thinking = True
                        self.soon(self.approvals.settle, live.inflight.session, item)
                    case ApprovalPending(approval=approval):
                        live.thinking = False
                        live.reply.waiting()
                        self.soon(
                            self.approvals.announce,
                            approval,
                            live.inflight.channel_id,
                            False,
                        )
                    case _:
                        assert_never(item)
                live.update()
        raise proto.NoReply("loopd ended the turn without its answer")


def _failure(error: proto.Error) -> str:
    runbook = f" (runbook: {proto.code_span(error.runbook)})" if error.runbook else ""
    return f"**boxmaker could not answer:** {proto.code_span(error.message)}{runbook}"
