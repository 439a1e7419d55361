"""The reply poster: one turn's reply post, created at its first words and edited as it grows.

The reply is edited at most every `[reply] update_s`; while the model works the thread
shows the bot typing. A reply post is created with a `pending_post_id` (recorded first)
and a `boxmaker_reply_to` prop naming the owner's post, by which a restarted bridge finds
it in the thread instead of posting a second one. The final reply is split into posts
of at most `MAX_POST_CHARS`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import assert_never

import trio

from ._api import Rejected
from ._ledger import Ledger, now_ms
from ._outbound import Outbound
from ._state import Inflight, NoReplyPost, ReplyCreating, ReplyPosted
from ._text import MAX_POST_CHARS, Reply, split_message

__all__ = ["REPLY_PROP", "UNSAFE_LINKS", "LiveReply", "ReplyPoster", "Typing"]

log = logging.getLogger("mattermostd")

REPLY_PROP = "boxmaker_reply_to"
UNSAFE_LINKS = {"unsafe_links": "true"}
"""Mattermost (10.x) neither previews nor links the addresses in such a post: the server
fetching a page the model named, with what the session read in its address, is a leak."""
TYPING_EVERY_S = 3.0
"""Mattermost shows "typing" for a few seconds after each `user_typing`."""

Typing = Callable[[str, str], Awaitable[None]]
"""Show the bot typing in (channel, thread); best effort."""


@dataclass
class LiveReply:
    """The reply to one owner post while its turn runs, and what the poster showed of it."""

    inflight: Inflight
    reply: Reply = field(default_factory=Reply)
    changed: trio.Event = field(default_factory=trio.Event)
    finished: bool = False
    ended: trio.Event = field(default_factory=trio.Event)
    """Set with `finished`: the typing task stops at once."""
    thinking: bool = True
    """The model is working (typing is shown); false while an approval waits."""
    shown: str = ""

    def update(self) -> None:
        """The reply changed: the poster shows it (at its pace)."""
        self.changed.set()

    def finish(self) -> None:
        """The turn is over: the poster posts the final reply and stops."""
        self.finished = True
        self.ended.set()
        self.changed.set()


class ReplyPoster:
    """Shows turns' replies in their threads."""

    def __init__(self, out: Outbound, ledger: Ledger, update_s: float, typing: Typing) -> None:
        self.out = out
        self.ledger = ledger
        self.update_s = update_s
        self._typing = typing

    async def typing(self, live: LiveReply) -> None:
        """Show typing while the model works, until the turn ends."""
        while not live.finished:
            if live.thinking:
                await self._typing(live.inflight.channel_id, live.inflight.root_id)
            with trio.move_on_after(TYPING_EVERY_S):
                await live.ended.wait()

    async def show(self, live: LiveReply) -> None:
        """Show the reply as it grows, then the final one; the post is then handled."""
        last = -math.inf
        while True:
            await live.changed.wait()
            live.changed = trio.Event()
            finished = live.finished
            wait = last + self.update_s - trio.current_time()
            if wait > 0:
                await trio.sleep(wait)
                finished = live.finished
            if live.reply.empty and not finished:
                continue
            if finished:
                try:
                    await self.out.retrying(lambda: self._final(live))
                except Rejected as exc:
                    log.error(
                        "cannot post the reply to %s (%s); the answer is in session %s",
                        live.inflight.post_id,
                        exc,
                        live.inflight.session,
                    )
                self.ledger.answered(live.inflight)
                return
            message = live.reply.message()
            if len(message) > MAX_POST_CHARS:
                message = message[: MAX_POST_CHARS - 40] + "\n\n_… (continued when finished)_"
            if message != live.shown:
                try:
                    await self.out.retrying(partial(self._show, live, message))
                except Rejected as exc:
                    log.warning("cannot show the reply to %s yet: %s", live.inflight.post_id, exc)
            last = trio.current_time()

    async def _show(self, live: LiveReply, message: str) -> None:
        inflight = live.inflight
        match inflight.reply_post:
            case NoReplyPost() | ReplyCreating() as where:
                self.ledger.reply_made(
                    inflight, await self._find_or_create(inflight, where, message)
                )
            case ReplyPosted(reply_id=reply_id):
                try:
                    await self.out.api.patch_post(reply_id, message)
                except Rejected as exc:
                    log.warning("the reply post %s: %s; posting a new one", reply_id, exc)
                    self.ledger.reply_lost(inflight)
                    made = await self._find_or_create(inflight, NoReplyPost(), message)
                    self.ledger.reply_made(inflight, made)
            case _:
                assert_never(inflight.reply_post)
        live.shown = message

    async def _find_or_create(
        self, inflight: Inflight, where: NoReplyPost | ReplyCreating, message: str
    ) -> str:
        match where:
            case ReplyCreating(pending_post_id=pending):
                # A create may have gone through before the bridge stopped: look first.
                for post in await self.out.own_posts(inflight.root_id):
                    if post.props.get(REPLY_PROP) == inflight.post_id:
                        await self.out.api.patch_post(post.id, message)
                        return post.id
            case NoReplyPost():
                pending = f"{self.out.bot_id}:{now_ms()}"
                self.ledger.reply_creating(inflight, pending)
            case _:
                assert_never(where)
        post = await self.out.api.create_post(
            channel_id=inflight.channel_id,
            message=message,
            root_id=inflight.root_id,
            pending_post_id=pending,
            props={REPLY_PROP: inflight.post_id, **UNSAFE_LINKS},
        )
        return post.id

    async def _final(self, live: LiveReply) -> None:
        parts = split_message(live.reply.message())
        if parts[0] != live.shown or not isinstance(live.inflight.reply_post, ReplyPosted):
            await self._show(live, parts[0])
        for number, part in enumerate(parts[1:], start=2):
            await self.out.post(
                live.inflight.channel_id,
                live.inflight.root_id,
                part,
                props={REPLY_PROP: f"{live.inflight.post_id}#{number}", **UNSAFE_LINKS},
            )
