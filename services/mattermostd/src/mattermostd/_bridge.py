"""The bridge: the owner's Mattermost posts become turns; turns become replies and approvals.

```
Bridge.run                      (the role's work nursery)
├─ connection loop              REST + event stream; reconnects with backoff and jitter
│   └─ per connection: pump events → catch up with ?since= → handle events in order
└─ turns nursery                outlives a dropped connection
    └─ one worker per session   its accepted posts, one turn at a time, in order
        └─ per turn: loopd's events → the reply model; a poster edits the reply post
           at most every `update_s`; typing while the model thinks; approval posts
```

Exactly once: an owner post is *accepted* (written to the state file as in flight)
before anything is done with it, and *handled* once its reply is final. A `say` is
marked sent before it is sent; after a restart, a post that may have been said is
followed (`turn_follow` by its ref), not said again; loopd answers `turn-not-found` if
the `say` never arrived. A reply post is created with a `pending_post_id` (a retry
within 30 s returns the same post) and a `boxmaker_reply_to` prop, by which a restarted
bridge finds it in the thread instead of posting a second one.
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import trio

import proto
from proto import (
    ApprovalDecide,
    ApprovalPending,
    Approvals,
    ApprovalsList,
    AssistantText,
    Ok,
    PendingApproval,
    Say,
    SessionOpen,
    SessionOpened,
    ToolCalled,
    ToolResult,
    TurnDone,
    TurnFollow,
)

from ._api import Api, Post, Reaction, Rejected, ServerTrouble
from ._config import Settings
from ._state import Inflight, OpenApproval, State, StateStore
from ._stream import Event, Stream, open_stream
from ._text import (
    APPROVE_EMOJI,
    DENY_EMOJI,
    MAX_POST_CHARS,
    Decision,
    Reply,
    approval_posts,
    outcome_span,
    parse_decision,
    split_message,
)

__all__ = ["Bridge"]

log = logging.getLogger("mattermostd")

T = TypeVar("T")

FIRST_PAUSE_S = 1.0
LONGEST_PAUSE_S = 60.0
HEALTHY_S = 60.0
"""A connection that lasted this long resets the reconnect pause."""
TYPING_EVERY_S = 3.0
"""Mattermost shows "typing" for a few seconds after each `user_typing`."""
LOOP_CALL_DEADLINE_S = 30.0
TURN_IDLE_DEADLINE_S = 1000.0
"""How long a turn may send nothing (an approval waits up to brokerd's 900 s)."""
_ID = re.compile(r"[a-z0-9]{26}")
REPLY_PROP = "boxmaker_reply_to"
UNSAFE_LINKS = {"unsafe_links": "true"}
"""Mattermost (10.x) neither previews nor links the addresses in such a post: the server
fetching a page the model named, with what the session read in its address, is a leak."""
APPROVAL_PROP = "boxmaker_approval"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _jittered(pause: float) -> float:
    return pause * random.uniform(0.5, 1.0)


@dataclass
class _Turn:
    """One turn being answered: its post, its reply model and what the poster showed."""

    inflight: Inflight
    reply: Reply = field(default_factory=Reply)
    changed: trio.Event = field(default_factory=trio.Event)
    finished: bool = False
    ended: trio.Event = field(default_factory=trio.Event)
    """Set with `finished`: the typing task stops at once."""
    thinking: bool = True
    """The model is working (typing is shown); false while an approval waits."""
    shown: str = ""
    approval: str = ""
    """The id of the approval this turn waits for, if any."""
    settled: set[str] = field(default_factory=set)
    """Approvals whose result this turn saw (their posts are being edited)."""


class Bridge:
    """mattermostd's one object: the state, the API, the sockets, the turns."""

    def __init__(self, settings: Settings, token: str, api: Api | None = None) -> None:
        self.s = settings
        self._token = token
        self.api = api or Api(settings.url, token, timeout_s=settings.timeout_s)
        self.store = StateStore(settings.state_file)
        self.state = State()
        self.bot_id = ""
        self.channels: set[str] = set()
        self.stream: Stream | None = None
        self._workers: dict[str, trio.MemorySendChannel[Inflight]] = {}
        self._turns: dict[str, _Turn] = {}
        self._announcing: dict[str, trio.Event] = {}
        self._turn_nursery: trio.Nursery | None = None
        self._shutdown = trio.Event()
        self._resumed = False
        self._integration_warned = False
        self._deciding: set[str] = set()
        """Approvals whose decision is on its way to brokerd (a reaction seen twice, from
        the stream and from a check, decides once)."""
        self.connected = trio.Event()
        """Set each time the stream is live and caught up (tests wait for it)."""

    # -- lifecycle -----------------------------------------------------------------------

    def load(self) -> None:
        """Read the state file (before the role reports ready)."""
        self.state = self.store.load(now_ms=_now_ms())

    def save(self) -> None:
        """Write the state file."""
        self.store.save(self.state)

    async def run(self, shutdown: trio.Event) -> None:
        """Connect and serve until `shutdown`; turns in flight then finish (or drain)."""
        self._shutdown = shutdown
        try:
            async with trio.open_nursery() as turns:
                self._turn_nursery = turns
                with trio.CancelScope() as connection:
                    turns.start_soon(self._cancel_on, shutdown, connection)
                    await self._connection_loop()
        finally:
            await self.api.aclose()

    @staticmethod
    async def _cancel_on(event: trio.Event, scope: trio.CancelScope) -> None:
        await event.wait()
        scope.cancel()

    async def _connection_loop(self) -> None:
        pause = FIRST_PAUSE_S
        while True:
            started = trio.current_time()
            try:
                await self._connect_once()
            except* ServerTrouble as group:
                problem = _first(group)
                if trio.current_time() - started > HEALTHY_S:
                    pause = FIRST_PAUSE_S
                wait = _jittered(pause)
                log.warning(
                    "Mattermost at %s: %s; trying again in %.0f s "
                    "(runbook: mattermost-unreachable)",
                    self.s.url,
                    problem,
                    wait,
                )
                self.stream = None
                self.connected = trio.Event()
                await trio.sleep(wait)
                pause = min(pause * 2, LONGEST_PAUSE_S)

    async def _connect_once(self) -> None:
        me = await self.api.me()
        self.bot_id = me.id
        direct = await self.api.direct_channel(me.id, self.s.owner_id)
        self.channels = {direct.id} | ({self.s.channel} if self.s.channel else set())
        async with open_stream(self.s.url, self._token, timeout_s=self.s.timeout_s) as stream:
            send, events = trio.open_memory_channel[Event](math.inf)
            async with trio.open_nursery() as connection:
                connection.start_soon(self._pump, stream, send)
                connection.start_soon(self._heartbeat, stream)
                for channel in sorted(self.channels):
                    await self._catch_up(channel)
                if not self._resumed:
                    await self._resume()
                    self._resumed = True
                await self._check_reactions()
                self.stream = stream
                self.connected.set()
                log.info(
                    "connected to %s as %s; listening to %s",
                    self.s.url,
                    me.username or me.id,
                    self.s.owner_name,
                )
                async for event in events:
                    await self._on_event(event)

    async def _heartbeat(self, stream: Stream) -> None:
        """A dead connection, or a revoked token (whose stream just goes quiet), ends it."""
        while True:
            await trio.sleep(self.s.heartbeat_s)
            await stream.ping(self.s.timeout_s)
            await self.api.me()  # 401 here stops the bridge: TokenRefused

    @staticmethod
    async def _pump(stream: Stream, send: trio.MemorySendChannel[Event]) -> None:
        async for event in stream.events():
            send.send_nowait(event)

    # -- posts in ------------------------------------------------------------------------

    async def _catch_up(self, channel: str) -> None:
        since = self.state.channels.get(channel, self.state.horizon)
        missed = await self.api.posts_since(channel, since)
        for post in missed.oldest_first():
            await self._on_post(post)
        self.save()

    async def _on_event(self, event: Event) -> None:
        if event.kind == "posted" and event.post is not None:
            await self._on_post(event.post)
            self.save()
        elif event.kind == "reaction_added" and event.reaction is not None:
            await self._on_reaction(event.reaction)
        elif event.kind == "post_edited" and event.post is not None:
            post = event.post
            if post.user_id == self.s.owner_id and post.channel_id in self.channels:
                log.info("the owner edited post %s; boxmaker answers what was first said", post.id)

    def _stranger(self, user_id: str, what: str) -> None:
        if user_id in self.state.strangers:
            return
        self.state.strangers.append(user_id)
        self.save()
        log.warning(
            "ignoring %s by user %s: the bridge listens to the owner (%s) only; this is "
            "logged once per author",
            what,
            user_id,
            self.s.owner_name,
        )

    def _integration_post(self, post: Post) -> None:
        if self._integration_warned:
            return
        self._integration_warned = True
        log.warning(
            "ignoring post %s in the owner's name made by an integration (a webhook, a slash "
            "command, a plugin or a bot): only what the owner types is heard; logged once",
            post.id,
        )

    async def _on_post(self, post: Post) -> None:
        if post.channel_id not in self.channels:
            return
        self.state.seen(post.channel_id, post.update_at)
        if post.delete_at or post.original_id or post.type:
            return  # deleted, an edit's old copy, or a system message
        if post.user_id == self.bot_id:
            return
        if post.user_id != self.s.owner_id:
            self._stranger(post.user_id, "a post")
            return
        if _by_integration(post):
            self._integration_post(post)
            return
        if post.create_at < self.state.horizon or self.state.is_known(post.id):
            return
        root = post.root_id or post.id
        if not _is_id(root):
            log.warning("post %r has a root id the bridge cannot use; ignored", post.id)
            return
        waiting = self._approval_in_thread(root)
        decision = parse_decision(post.message) if waiting is not None else None
        if waiting is not None and decision is not None:
            self.state.handled[post.id] = post.create_at
            self.save()
            await self._decide(waiting, decision, how="a reply")
            return
        if not post.message.strip():
            self.state.handled[post.id] = post.create_at
            return  # a file or an empty post: nothing to say
        inflight = Inflight(
            post_id=post.id,
            channel_id=post.channel_id,
            root_id=root,
            session=f"mm-{root}",
            text=post.message,
            create_at=post.create_at,
        )
        self.state.inflight.append(inflight)
        self.save()
        if waiting is not None:
            await self._post(
                inflight.channel_id,
                inflight.root_id,
                "An approval is waiting in this thread: reply **yes** or **no** (a reason "
                "may follow), or react :white_check_mark: or :x:. Your message is "
                "answered after it.",
            )
        self._enqueue(inflight)

    async def _on_reaction(self, reaction: Reaction) -> None:
        approval = next(
            (
                a
                for a in self.state.approvals.values()
                if reaction.post_id in a.post_ids or reaction.post_id in a.part_ids
            ),
            None,
        )
        if approval is None:
            return
        if reaction.user_id == self.bot_id:
            return
        if reaction.user_id != self.s.owner_id:
            self._stranger(reaction.user_id, "a reaction")
            return
        if approval.decided:
            return
        if reaction.emoji_name in APPROVE_EMOJI:
            await self._decide(approval, Decision(approve=True), how="a reaction")
        elif reaction.emoji_name in DENY_EMOJI:
            await self._decide(approval, Decision(approve=False), how="a reaction")

    async def _check_reactions(self) -> None:
        """Reactions made while the stream was down: each open approval post's."""
        for approval in list(self.state.approvals.values()):
            await self._reactions_on(approval)

    async def _reactions_on(self, approval: OpenApproval) -> None:
        for post_id in [*approval.post_ids, *approval.part_ids]:
            for reaction in await self.api.reactions(post_id):
                await self._on_reaction(reaction)

    # -- approvals -----------------------------------------------------------------------

    def _approval_in_thread(self, root: str) -> OpenApproval | None:
        for approval in self.state.approvals.values():
            if approval.root_id == root and not approval.decided:
                return approval
        return None

    async def _announce(self, approval: PendingApproval, channel: str, again: bool) -> None:
        """Post the approval in its session's thread (a settle waits for this)."""
        posted = self._announcing.setdefault(approval.id, trio.Event())
        try:
            await self._announce_now(approval, channel, again)
        except Rejected as exc:
            log.error("cannot post approval %s in its thread: %s", approval.id, exc)
        finally:
            posted.set()
            self._announcing.pop(approval.id, None)

    async def _announce_now(self, approval: PendingApproval, channel: str, again: bool) -> None:
        root = approval.session.removeprefix("mm-")
        message, *parts = approval_posts(approval, again=again)
        known = self.state.approvals.get(approval.id)
        if known is None:
            known = OpenApproval(
                id=approval.id,
                session=approval.session,
                channel_id=channel,
                root_id=root,
                message=message,
            )
            self.state.approvals[approval.id] = known
            self.save()
        else:
            await self._retrying(partial(self._adopt, known, approval))
        post = await self._post(channel, root, message, props={APPROVAL_PROP: approval.id})
        known.post_ids.append(post.id)
        self.save()
        for part in parts:
            post = await self._post(channel, root, part, props={APPROVAL_PROP: approval.id})
            known.part_ids.append(post.id)
            self.save()
        # The owner may have reacted before the bridge knew a post's id (its create was
        # answered late, or found again after a lost answer): the stream's event was not
        # recognised then.
        await self._retrying(partial(self._reactions_on, known))

    async def _own_posts(self, root: str) -> list[Post]:
        """The bridge's live posts in the thread of `root`, oldest first."""
        thread = await self.api.thread(root)
        return [p for p in thread.oldest_first() if p.user_id == self.bot_id and not p.delete_at]

    async def _adopt(self, known: OpenApproval, approval: PendingApproval) -> None:
        """Take as this approval's the posts of it the bridge made but did not record.

        A bridge killed between a post's create and the state file's save left a post the
        owner may react to, or that should say the outcome: found in the thread by its
        prop and its text (the head as first posted or as posted again, or a part).
        """
        first, *parts = approval_posts(approval)
        heads = {first, approval_posts(approval, again=True)[0]}
        known_ids = {*known.post_ids, *known.part_ids}
        for post in await self._own_posts(known.root_id):
            if post.props.get(APPROVAL_PROP) != approval.id or post.id in known_ids:
                continue
            if post.message in heads:
                known.post_ids.append(post.id)
            elif post.message in parts:
                known.part_ids.append(post.id)
            else:
                continue
            log.info("approval %s: found its post %s made before a restart", approval.id, post.id)
        self.save()

    async def _decide(self, approval: OpenApproval, decision: Decision, *, how: str) -> None:
        """Send the owner's decision to brokerd and say it on the approval posts."""
        if approval.id in self._deciding:
            return
        self._deciding.add(approval.id)
        try:
            await self._decide_now(approval, decision, how=how)
        finally:
            self._deciding.discard(approval.id)

    async def _decide_now(self, approval: OpenApproval, decision: Decision, *, how: str) -> None:
        request = ApprovalDecide(id=approval.id, approve=decision.approve, reason=decision.reason)
        try:
            with trio.fail_after(LOOP_CALL_DEADLINE_S):
                await proto.call(self.s.broker_socket, request, Ok)
        except proto.RemoteError as exc:
            text = (
                f"**Not recorded:** {outcome_span(exc.error.message)} (it may have been "
                "decided already, from bxctl, or have timed out)."
            )
        except proto.CallFailed as exc:
            log.warning("cannot send the decision on %s to brokerd: %s", approval.id, exc)
            problem = str(exc)
            await self._post(
                approval.channel_id,
                approval.root_id,
                "**Your decision was not recorded:** brokerd did not answer "
                f"({proto.code_span(problem)}). Try again in a moment.",
            )
            return
        else:
            word = "Approved" if decision.approve else "Denied"
            reason = f", reason {outcome_span(decision.reason)}" if decision.reason else ""
            text = (
                f"**{word}** by {proto.code_span(self.s.owner_name)} in Mattermost "
                f"({how}{reason}), {proto.utc_stamp()}."
            )
            log.info("approval %s %s from Mattermost", approval.id, word.lower())
        approval.decided = text
        self.save()
        try:
            await self._show_approval(approval, text)
        except Rejected as exc:
            log.warning("cannot show the decision on approval %s: %s", approval.id, exc)

    async def _show_approval(self, approval: OpenApproval, outcome: str) -> None:
        message = f"{approval.message}\n\n{outcome}"
        for post_id in approval.post_ids:
            await self._retrying(partial(self.api.patch_post, post_id, message))

    async def _settle(self, approval_id: str, result: ToolResult) -> None:
        """The call's result came: the approval posts say what became of it."""
        announcing = self._announcing.get(approval_id)
        if announcing is not None:
            await announcing.wait()
        approval = self.state.approvals.pop(approval_id, None)
        if approval is None:
            return
        self.save()
        if result.status == "denied":
            ran = f"The call did not run: {outcome_span(result.content)}"
        elif result.status == "ok":
            ran = "The call ran."
        else:
            ran = f"The call ran and failed: {outcome_span(result.content)}"
        decided = approval.decided or "**Decided outside Mattermost** (bxctl, or it timed out)."
        try:
            await self._show_approval(approval, f"{decided}\n{ran}")
        except Rejected as exc:
            log.warning("cannot show the outcome of approval %s: %s", approval_id, exc)

    # -- after a restart -----------------------------------------------------------------

    async def _resume(self) -> None:
        """Pick up what the last run left: posts in flight, approvals still waiting."""
        pending = await self._pending_approvals("none re-announced or closed")
        if pending is None:  # brokerd cannot say which still wait: close none of them
            pending = []
            waiting = set(self.state.approvals)
        else:
            waiting = {a.id for a in pending}
        for gone in list(self.state.approvals.values()):
            if gone.id not in waiting:
                await self._close(
                    gone,
                    "**No longer waiting:** decided (in bxctl) or timed out while the "
                    "Mattermost bridge was away; the reply in this thread says what happened.",
                )
        for approval in pending:
            if not approval.session.startswith("mm-"):
                continue
            known = self.state.approvals.get(approval.id)
            channel = known.channel_id if known else await self._channel_of(approval.session)
            if channel is None:
                continue
            await self._announce(approval, channel, True)
        for inflight in list(self.state.inflight):
            self._enqueue(inflight)

    async def _close(self, approval: OpenApproval, otherwise: str) -> None:
        """An approval brokerd no longer waits on, whose outcome the bridge did not see."""
        self.state.approvals.pop(approval.id, None)
        self.save()
        if approval.decided:
            outcome = f"{approval.decided}\nThe reply in this thread says what became of the call."
        else:
            outcome = otherwise
        try:
            await self._show_approval(approval, outcome)
        except Rejected as exc:
            log.warning("cannot show the outcome of approval %s: %s", approval.id, exc)

    async def _close_left_over(self, turn: _Turn) -> None:
        """After a turn, close its approvals whose result the bridge did not see.

        The result came before the bridge followed the turn again after a restart; the
        posts are closed once brokerd no longer waits on them.
        """
        left = [
            a
            for a in self.state.approvals.values()
            if a.session == turn.inflight.session and a.id not in turn.settled
        ]
        if not left:
            return
        pending = await self._pending_approvals("left for the next start")
        if pending is None:
            return
        waiting = {a.id for a in pending}
        for approval in left:
            if approval.id not in waiting and approval.id in self.state.approvals:
                await self._close(
                    approval,
                    "**Decided outside Mattermost** (bxctl, or it timed out); the reply in "
                    "this thread says what became of the call.",
                )

    async def _pending_approvals(self, otherwise: str) -> list[PendingApproval] | None:
        """Every approval brokerd waits on, a frame's worth at a time.

        None, and a log line ending in `otherwise`, when brokerd cannot say.
        """
        request = ApprovalsList()
        pending: list[PendingApproval] = []
        try:
            while True:
                with trio.fail_after(LOOP_CALL_DEADLINE_S):
                    reply = await proto.call(self.s.broker_socket, request, Approvals)
                pending += reply.pending
                if not reply.more:
                    return pending
                request = ApprovalsList(ids=reply.more)
        except proto.CallFailed as exc:
            problem = str(exc) or type(exc).__name__
            log.warning("cannot list the pending approvals (%s); %s", problem, otherwise)
            return None

    async def _channel_of(self, session: str) -> str | None:
        root = session.removeprefix("mm-")
        try:
            post = await self.api.post(root)
        except Rejected:
            return None
        return post.channel_id if post.channel_id in self.channels else None

    # -- turns ---------------------------------------------------------------------------

    def _enqueue(self, inflight: Inflight) -> None:
        if self._shutdown.is_set():
            return  # answered after the next start
        queue = self._workers.get(inflight.session)
        if queue is None:
            send, receive = trio.open_memory_channel[Inflight](math.inf)
            self._workers[inflight.session] = send
            assert self._turn_nursery is not None
            self._turn_nursery.start_soon(self._worker, inflight.session, receive)
            queue = send
        queue.send_nowait(inflight)

    async def _worker(self, session: str, queue: trio.MemoryReceiveChannel[Inflight]) -> None:
        while not self._shutdown.is_set():
            try:
                inflight = queue.receive_nowait()
            except trio.WouldBlock:
                break
            await self._answer(inflight)
        del self._workers[session]

    async def _answer(self, inflight: Inflight) -> None:
        turn = _Turn(inflight)
        self._turns[inflight.session] = turn
        try:
            async with trio.open_nursery() as tasks:
                tasks.start_soon(self._poster, turn)
                tasks.start_soon(self._typing, turn)
                await self._run_turn(turn)
                turn.finished = True
                turn.ended.set()
                turn.changed.set()
            await self._close_left_over(turn)
        finally:
            del self._turns[inflight.session]

    async def _run_turn(self, turn: _Turn) -> None:
        """Say the post (or follow its turn) until its answer or error; loopd may restart."""
        inflight = turn.inflight
        ref = f"mm:{inflight.post_id}"
        pause = FIRST_PAUSE_S
        while True:
            try:
                if not inflight.said:
                    await self._open_session(inflight.session)
                    inflight.said = True
                    self.save()
                    request: proto.Message = Say(
                        session=inflight.session, text=inflight.text, ref=ref, keep_going=True
                    )
                else:
                    request = TurnFollow(session=inflight.session, ref=ref)
                if await self._events(turn, request):
                    return
            except proto.RemoteError as exc:
                if exc.error.code == "turn-not-found":
                    inflight.said = False  # the say never arrived: say it now
                    continue
                if exc.error.code == "turn-in-progress":
                    await trio.sleep(_jittered(pause))
                    pause = min(pause * 2, LONGEST_PAUSE_S)
                    continue
                turn.reply.note = _failure(exc.error)
                return
            except proto.CallFailed as exc:
                if not turn.reply.note:
                    turn.reply.note = (
                        "_boxmaker is not answering right now (loopd: "
                        f"{proto.code_span(str(exc))}); this message is answered when it is back._"
                    )
                    turn.changed.set()
                log.warning("loopd for %s: %s; trying again", inflight.session, exc)
                await trio.sleep(_jittered(pause))
                pause = min(pause * 2, LONGEST_PAUSE_S)

    async def _open_session(self, session: str) -> None:
        with trio.fail_after(LOOP_CALL_DEADLINE_S):
            opened = await proto.call(
                self.s.loop_socket, SessionOpen(origin="mattermost", session=session), SessionOpened
            )
        if opened.created:
            log.info("new session %s", session)

    async def _events(self, turn: _Turn, request: proto.Message) -> bool:
        """One conversation with loopd; True once the turn's outcome is in the reply."""
        async with proto.open_call(self.s.loop_socket, request) as conversation:
            turn.reply.note = ""
            while True:
                try:
                    frame = await conversation.receive(deadline_s=TURN_IDLE_DEADLINE_S)
                except proto.NoReply:
                    raise proto.NoReply("loopd closed the turn without an answer") from None
                if isinstance(frame, TurnDone):
                    turn.reply.finish(frame.text)
                    return True
                if isinstance(frame, proto.Error):
                    raise proto.RemoteError(frame)
                self._on_turn_event(turn, frame)
                turn.changed.set()

    def _on_turn_event(self, turn: _Turn, frame: proto.Message) -> None:
        match frame:
            case AssistantText(text=text):
                turn.reply.text(text)
                turn.thinking = True
            case ToolCalled(call=call):
                turn.reply.called(call)
            case ToolResult() as result:
                turn.reply.result(result)
                turn.thinking = True
                if not turn.approval:
                    # followed after a restart: the turn waited on the approval announced
                    # before it, and a turn runs one call at a time, so this is its result
                    turn.approval = next(
                        (
                            a.id
                            for a in self.state.approvals.values()
                            if a.session == turn.inflight.session
                        ),
                        "",
                    )
                if turn.approval:
                    approval, turn.approval = turn.approval, ""
                    turn.settled.add(approval)
                    assert self._turn_nursery is not None
                    self._turn_nursery.start_soon(self._settle, approval, result)
            case ApprovalPending(approval=approval):
                turn.approval = approval.id
                turn.thinking = False
                turn.reply.waiting()
                assert self._turn_nursery is not None
                self._turn_nursery.start_soon(
                    self._announce, approval, turn.inflight.channel_id, False
                )
            case _:
                log.warning("an unexpected %s frame in a turn; ignored", type(frame).__name__)

    async def _typing(self, turn: _Turn) -> None:
        while not turn.finished:
            if turn.thinking and self.stream is not None:
                await self.stream.typing(turn.inflight.channel_id, turn.inflight.root_id)
            with trio.move_on_after(TYPING_EVERY_S):
                await turn.ended.wait()

    async def _poster(self, turn: _Turn) -> None:
        """Show the reply: created at its first words, edited at most every `update_s`."""
        last = -math.inf
        while True:
            await turn.changed.wait()
            turn.changed = trio.Event()
            finished = turn.finished
            wait = last + self.s.update_s - trio.current_time()
            if wait > 0:
                await trio.sleep(wait)
                finished = turn.finished
            if turn.reply.empty and not finished:
                continue
            if finished:
                try:
                    await self._retrying(lambda: self._final(turn))
                except Rejected as exc:
                    log.error(
                        "cannot post the reply to %s (%s); the answer is in session %s",
                        turn.inflight.post_id,
                        exc,
                        turn.inflight.session,
                    )
                self.state.done(turn.inflight)
                self.save()
                return
            message = turn.reply.message()
            if len(message) > MAX_POST_CHARS:
                message = message[: MAX_POST_CHARS - 40] + "\n\n_… (continued when finished)_"
            if message != turn.shown:
                try:
                    await self._retrying(partial(self._show, turn, message))
                except Rejected as exc:
                    log.warning("cannot show the reply to %s yet: %s", turn.inflight.post_id, exc)
            last = trio.current_time()

    async def _show(self, turn: _Turn, message: str) -> None:
        inflight = turn.inflight
        if not inflight.reply_id:
            inflight.reply_id = await self._find_or_create_reply(inflight, message)
            self.save()
        else:
            try:
                await self.api.patch_post(inflight.reply_id, message)
            except Rejected as exc:
                log.warning("the reply post %s: %s; posting a new one", inflight.reply_id, exc)
                inflight.reply_id, inflight.pending_post_id = "", ""
                self.save()
                inflight.reply_id = await self._find_or_create_reply(inflight, message)
                self.save()
        turn.shown = message

    async def _find_or_create_reply(self, inflight: Inflight, message: str) -> str:
        if inflight.pending_post_id:
            # A create may have gone through before the bridge stopped: look first.
            for post in await self._own_posts(inflight.root_id):
                if post.props.get(REPLY_PROP) == inflight.post_id:
                    await self.api.patch_post(post.id, message)
                    return post.id
        else:
            inflight.pending_post_id = f"{self.bot_id}:{_now_ms()}"
            self.save()
        post = await self.api.create_post(
            channel_id=inflight.channel_id,
            message=message,
            root_id=inflight.root_id,
            pending_post_id=inflight.pending_post_id,
            props={REPLY_PROP: inflight.post_id, **UNSAFE_LINKS},
        )
        return post.id

    async def _final(self, turn: _Turn) -> None:
        parts = split_message(turn.reply.message())
        if parts[0] != turn.shown or not turn.inflight.reply_id:
            await self._show(turn, parts[0])
        for number, part in enumerate(parts[1:], start=2):
            await self._post(
                turn.inflight.channel_id,
                turn.inflight.root_id,
                part,
                props={REPLY_PROP: f"{turn.inflight.post_id}#{number}", **UNSAFE_LINKS},
            )

    # -- REST helpers --------------------------------------------------------------------

    async def _post(
        self, channel: str, root: str, message: str, *, props: dict[str, object] | None = None
    ) -> Post:
        """Create a post in a thread, trying until Mattermost takes it, and only once.

        A create whose answer was lost (the connection cut after the server made it) is
        found again, not made twice: a retry sends the same `pending_post_id` (Mattermost
        returns the post it made for it within 30 s), and after a failure the thread is
        first searched for the post. A second approval post would leave the owner's
        reaction on the first unheard.
        """
        pending = f"{self.bot_id}:{_now_ms()}:{random.randrange(1 << 30)}"
        wanted = (props or {}).items()
        attempts = 0

        async def attempt() -> Post:
            nonlocal attempts
            attempts += 1
            if attempts > 1 and root:  # the last attempt failed: it may have been made
                for post in await self._own_posts(root):
                    if post.message == message and all(post.props.get(k) == v for k, v in wanted):
                        return post
            return await self.api.create_post(
                channel_id=channel,
                message=message,
                root_id=root,
                pending_post_id=pending,
                props=props,
            )

        return await self._retrying(attempt)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt` until Mattermost takes it; a refused token still stops the bridge."""
        pause = FIRST_PAUSE_S
        while True:
            try:
                return await attempt()
            except ServerTrouble as exc:
                wait = _jittered(pause)
                log.warning("Mattermost: %s; trying again in %.0f s", exc, wait)
                await trio.sleep(wait)
                pause = min(pause * 2, LONGEST_PAUSE_S)


def _failure(error: proto.Error) -> str:
    runbook = f" (runbook: {proto.code_span(error.runbook)})" if error.runbook else ""
    return f"**boxmaker could not answer:** {proto.code_span(error.message)}{runbook}"


def _first(group: BaseExceptionGroup[ServerTrouble]) -> BaseException:
    """The first failure in `group`, out of the task groups it came through."""
    problem: BaseException = group
    while isinstance(problem, BaseExceptionGroup):
        problem = problem.exceptions[0]
    return problem


INTEGRATION_PROPS = ("from_webhook", "from_bot", "from_plugin", "override_username")
"""Props Mattermost sets on a post that an integration made: an incoming webhook or a slash
command posts in the name of the user who created it, and whoever holds its URL or
token could otherwise speak, or answer an approval, as the owner."""


def _by_integration(post: Post) -> bool:
    return any(post.props.get(name) not in (None, "", False, "false") for name in INTEGRATION_PROPS)


def _is_id(value: str) -> bool:
    return _ID.fullmatch(value) is not None
