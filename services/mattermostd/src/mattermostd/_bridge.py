"""The bridge: the owner's Mattermost posts become turns; turns become replies and approvals.

```
Bridge.run                      (the role's work nursery)
├─ connection loop              REST + event stream; reconnects after `proto.Backoff`
│   └─ per connection: pump events → catch up with ?since= → read each event (inbox)
└─ turns nursery                outlives a dropped connection
    └─ one worker per session   (TurnRunner) its posts, one turn at a time, in order
        └─ per turn: loopd's events → the reply (ReplyPoster) and approvals
           (ApprovalPoster, found on the Board by approval and call id)
```

The rooms: `_inbox` says what an event means (pure); `_ledger` is the state file whose
changes save themselves in the order exactly-once rests on; `_board` finds approvals;
`_approvals` posts and settles them; `_turns` runs turns; `_replies` shows replies;
`_outbound` makes posts once and tries again; `_stream` and `_api` speak Mattermost.
Nothing Mattermost or loopd does (a refused upgrade, a 5xx, a stall, a slow loopd)
ends the bridge: only a refused token or a forbidden action, which the owner must fix.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import assert_never

import trio

import proto

from ._answers import (
    decision_code,
)
from ._api import Api, Post, Reaction, Rejected, ServerTrouble
from ._approvals import GONE_WHILE_AWAY, ApprovalPoster
from ._board import Board
from ._config import Settings
from ._desk import Desk
from ._inbox import (
    Answers,
    Command,
    Confirms,
    Empty,
    ForSession,
    Ignored,
    Inbox,
    Integration,
    Meaning,
    Revises,
    Stranger,
    Unconfirmed,
)
from ._ledger import Ledger
from ._outbound import FIRST_PAUSE_S, LONGEST_PAUSE_S, Outage, Outbound
from ._replies import ReplyPoster
from ._state import StateStore, thread_of
from ._stream import Posted, PostEdited, ReactionAdded, Stream, StreamEvent, open_stream
from ._turns import TurnRunner

__all__ = ["Bridge"]

log = logging.getLogger("mattermostd")

FUTURE_NOTE_MS = 60_000
"""A post dated more than this after the server's time is said in the log."""
WAITING_NOTE = (
    "An approval is waiting in this thread: reply **yes {code}** or **no {code}** (a reason "
    "may follow), or react :white_check_mark: or :x: on its card. Your message is answered "
    "after it."
)


class Bridge:
    """mattermostd's one object: wires the rooms to one server and one home."""

    def __init__(self, settings: Settings, token: str, api: Api | None = None) -> None:
        self.s = settings
        self._token = token
        self.api = api or Api(settings.url, token, timeout_s=settings.timeout_s)
        self.ledger = Ledger(StateStore(settings.state_file))
        self.out = Outbound(self.api)
        self.board = Board(self.ledger)
        self.approvals = ApprovalPoster(settings, self.ledger, self.board, self.out, self._reaction)
        self.turns = TurnRunner(
            settings,
            self.ledger,
            self.approvals,
            ReplyPoster(self.out, self.ledger, settings.update_s, self._typing),
        )
        self.desk = Desk(settings, self.ledger, self.board, self.out)
        self.inbox = Inbox(owner_id=settings.owner_id, bot_id="", channels=frozenset())
        self.stream: Stream | None = None
        self.connected = trio.Event()
        """Set each time the stream is live and caught up."""
        self._resumed = False
        self._integration_warned = False
        self._outage = Outage(settings.url)
        self._future: set[str] = set()
        """Posts dated in the future, logged once each."""

    def load(self) -> None:
        """Read the state file (before the role reports ready)."""
        self.ledger.load()

    async def run(self, shutdown: trio.Event) -> None:
        """Connect and serve until `shutdown`; turns in flight then finish (or drain)."""
        try:
            async with trio.open_nursery() as turns:
                self.turns.attach(turns, shutdown)
                with trio.CancelScope() as connection:
                    turns.start_soon(_cancel_on, shutdown, connection)
                    await self._connection_loop()
        finally:
            await self.api.aclose()

    async def _connection_loop(self) -> None:
        """Connect, and again after each failure, with pauses from one backoff.

        A connection that said hello and caught up is a success and resets the pauses: a
        drop soon after it is a new outage, not the old one going on. (A reset only after
        a connection had lived a minute let drops a few seconds apart climb to 60 s
        pauses, and the owner's reply or decision made meanwhile waited that long.)
        """
        backoff = proto.Backoff(FIRST_PAUSE_S, LONGEST_PAUSE_S)
        while True:
            try:
                await self._connect_once(caught_up=backoff.reset)
            except* ServerTrouble as group:
                self._outage.failed(str(_first(group)), backoff.next())
                self.stream = None
                self.connected = trio.Event()
                await trio.sleep(self._outage.wait_s)

    async def _connect_once(self, *, caught_up: Callable[[], None]) -> None:
        """One connection, until it fails; `caught_up` once it is live and caught up."""
        me = await self.api.me()
        self.out.bot_id = me.id
        direct = await self.api.direct_channel(me.id, self.s.owner_id)
        channels = {direct.id} | ({self.s.channel} if self.s.channel else set())
        self.inbox = Inbox(self.s.owner_id, me.id, frozenset(channels))
        async with open_stream(self.s.url, self._token, timeout_s=self.s.timeout_s) as stream:
            send, events = trio.open_memory_channel[StreamEvent](math.inf)
            async with trio.open_nursery() as connection:
                connection.start_soon(_pump, stream, send)
                connection.start_soon(self._heartbeat, stream)
                for channel in sorted(channels):
                    await self._catch_up(channel)
                if not self._resumed:
                    await self._resume()
                    self._resumed = True
                for approval in self.board.all():
                    await self.approvals.reactions_on(approval)
                self.stream = stream
                self.connected.set()
                caught_up()
                log.info(
                    "connected to %s as %s; listening to %s%s",
                    self.s.url,
                    me.username or me.id,
                    self.s.owner_name,
                    self._outage.over(),
                )
                async for event in events:
                    await self._event(event)

    async def _heartbeat(self, stream: Stream) -> None:
        """A dead connection, or a revoked token (whose stream just goes quiet), ends it."""
        while True:
            await trio.sleep(self.s.heartbeat_s)
            await stream.ping(self.s.timeout_s)
            await self.api.me()  # 401 here stops the bridge: TokenRefused

    async def _typing(self, channel_id: str, root_id: str) -> None:
        if self.stream is not None:
            await self.stream.typing(channel_id, root_id)

    # -- events in -----------------------------------------------------------------------

    async def _catch_up(self, channel: str) -> None:
        since = self.ledger.state.channels.get(channel, self.ledger.state.horizon)
        missed = await self.api.posts_since(channel, since)
        for post in missed.oldest_first():
            await self._post(post)
        self.ledger.checkpoint()

    async def _event(self, event: StreamEvent) -> None:
        match event:
            case Posted(post=post):
                await self._post(post)
                self.ledger.checkpoint()
            case PostEdited(post=post):
                self._note(self.inbox.edit(post))
            case ReactionAdded(reaction=reaction):
                await self._reaction(reaction)
            case _:
                assert_never(event)

    async def _post(self, post: Post) -> None:
        if post.channel_id in self.inbox.channels:
            self._saw(post)
        meaning = self.inbox.post(post, self.ledger.state, self.board)
        match meaning:
            case ForSession(inflight=inflight, approval_waiting=waiting):
                self.ledger.accept(inflight)
                if (approval := self.board.waiting_in(inflight.root_id)) and waiting:
                    note = WAITING_NOTE.format(code=decision_code(approval.id))
                    await self.out.post(inflight.channel_id, inflight.root_id, note)
                self.turns.enqueue(inflight)
            case Answers(approval_id=approval_id, answer=answer, how=how, post=reply):
                if reply is not None:
                    self.ledger.handled(reply.id, reply.create_at)
                where = reply.id if reply is not None else None
                await self.approvals.decide(approval_id, answer, how=how, post=where)
            case Confirms(confirmation_id=ident, answer=answer, how=how, post=Post() as reply):
                self.ledger.handled(reply.id, reply.create_at)
                self.turns.soon(self.desk.confirm, ident, answer, how, reply.id)
            case Command(command=command, post=asked):
                self.ledger.handled(asked.id, asked.create_at)
                self.turns.soon(self.desk.run, command, asked)
            case Revises(approval_id=approval_id, text=text, post=asked):
                self.ledger.handled(asked.id, asked.create_at)
                self.turns.soon(self.approvals.revise, approval_id, text, asked)
            case Unconfirmed(codes=codes, post=bare):
                self.ledger.handled(bare.id, bare.create_at)
                code = codes[-1]
                await self.out.post(
                    bare.channel_id,
                    bare.root_id or bare.id,
                    f"To decide, name the code on the card: **yes {code}** or **no {code}** "
                    f"(a reason may follow), or react :white_check_mark: or :x: on the card. "
                    "A plain yes or no is not taken: a plugin's slash command can post one in "
                    "your name.",
                )
            case Empty(post=empty):
                self.ledger.handled(empty.id, empty.create_at)
            case _:
                self._note(meaning)

    def _saw(self, post: Post) -> None:
        """Move the channel's place to the post, but never past the server's time.

        A post's `update_at` is its own claim: a system admin (the owner, another admin, an
        admin token, an import) can date a post days ahead, and a place taken from it
        would skip every post made until then. The post itself is read as any other.
        """
        now = self.api.server_now_ms()
        if post.update_at > now + FUTURE_NOTE_MS and post.id not in self._future:
            self._future.add(post.id)
            log.info(
                "post %s is dated %.0f s after the server's time (set by a system admin or an "
                "import); it is read as any other, and the bridge's place stays at the "
                "server's time",
                post.id,
                (post.update_at - now) / 1000,
            )
        self.ledger.saw(post.channel_id, min(post.update_at, now))

    async def _reaction(self, reaction: Reaction) -> None:
        meaning = self.inbox.reaction(reaction, self.board)
        match meaning:
            case Answers(approval_id=approval_id, answer=answer, how=how):
                await self.approvals.decide(approval_id, answer, how=how, post=reaction.post_id)
            case Confirms(confirmation_id=ident, answer=answer, how=how):
                self.turns.soon(self.desk.confirm, ident, answer, how, reaction.post_id)
            case _:
                self._note(meaning)

    def _note(self, meaning: Meaning) -> None:
        """Log what the bridge does not act on, once where it could repeat."""
        match meaning:
            case Stranger(user_id=user_id, what=what) if self.ledger.stranger(user_id):
                log.warning(
                    "ignoring %s by user %s: the bridge listens to the owner (%s) only; this "
                    "is logged once per author",
                    what,
                    user_id,
                    self.s.owner_name,
                )
            case Integration(post_id=post_id) if not self._integration_warned:
                self._integration_warned = True
                log.warning(
                    "ignoring post %s in the owner's name made by an integration (a webhook, "
                    "a slash command, a plugin or a bot): only what the owner types is heard; "
                    "logged once",
                    post_id,
                )
            case Ignored(why=why, noted=True):
                log.info("%s", why)
            case _:
                log.debug("ignored: %s", meaning)

    # -- after a restart -----------------------------------------------------------------

    async def _resume(self) -> None:
        """Pick up what the last run left: posts in flight, approvals still waiting."""
        pending = await self.approvals.pending("none re-announced or closed")
        if pending is None:  # brokerd cannot say which still wait: close none of them
            pending = []
            waiting = {a.id for a in self.board.all()}
        else:
            waiting = {a.id for a in pending}
        for gone in self.board.all():
            if gone.id not in waiting:
                await self.approvals.close(gone, GONE_WHILE_AWAY)
        for approval in pending:
            known = self.board.get(approval.id)
            channel = known.channel_id if known else await self._channel_of(approval.session)
            if channel is not None:
                await self.approvals.announce(approval, channel, True)
        for inflight in list(self.ledger.state.inflight):
            self.turns.enqueue(inflight)

    async def _channel_of(self, session: str) -> str | None:
        """The channel of a Mattermost session's thread, if the bridge listens there."""
        root = thread_of(session)
        if root is None:
            return None  # a session of bxctl
        try:
            post = await self.api.post(root)
        except Rejected as exc:  # the thread is gone
            log.info("the thread of %s is gone (%s); its approval is not posted again", root, exc)
            return None
        return post.channel_id if post.channel_id in self.inbox.channels else None


async def _cancel_on(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def _pump(stream: Stream, send: trio.MemorySendChannel[StreamEvent]) -> None:
    async for event in stream.events():
        send.send_nowait(event)


def _first(group: BaseExceptionGroup[ServerTrouble]) -> BaseException:
    """The first failure in `group`, out of the task groups it came through."""
    problem: BaseException = group
    while isinstance(problem, BaseExceptionGroup):
        problem = problem.exceptions[0]
    return problem
