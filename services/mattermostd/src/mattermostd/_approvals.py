"""Approvals in threads: posted, decided by the owner, closed with their call's outcome.

The life of one approval, each step recorded in the ledger before it is taken:

1. loopd passes on brokerd's `approval_pending` during a turn: `announce` posts it in
   the session's thread (a head, and parts when the arguments are too long for one post).
2. The owner answers (`decide`): brokerd is told, and the head says who decided, how
   and when. A decision made in bxctl meanwhile is brokerd's to refuse.
3. The call's `tool_result` comes (`settle`, found by the call id brokerd gave): the
   head says what became of the call, and the approval is closed.
4. After a restart (`resume`) brokerd says which approvals still wait: the others are
   closed (their turn's reply says what happened), the waiting ones posted again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import assert_never

from msgspec import UNSET, UnsetType

import entries
import proto
from proto import (
    ApprovalDecide,
    ApprovalRevise,
    ApprovalRevised,
    Approvals,
    ApprovalsList,
    Approve,
    Deny,
    Ok,
    PendingApproval,
    Surface,
    ToolResult,
)

from ._answers import OwnerAnswer, OwnerApproves, OwnerDenies
from ._api import Post, Reaction, Rejected
from ._board import Board
from ._config import Settings
from ._ledger import Ledger
from ._outbound import Outbound
from ._state import DecidedInMattermost, OpenApproval, Undecided, thread_of
from ._text import (
    APPROVAL_COLORS,
    DECIDED_ELSEWHERE,
    GONE_WHILE_AWAY,
    approval_card,
    approval_posts,
    card_text,
    not_editable,
    outcome_span,
    revision_message,
)

__all__ = ["APPROVAL_PROP", "GONE_WHILE_AWAY", "ApprovalPoster", "OnReaction"]

log = logging.getLogger("mattermostd")

APPROVAL_PROP = "boxmaker_approval"
OnReaction = Callable[[Reaction], Awaitable[None]]


def card_props(approval_id: str, text: str, color: str) -> dict[str, object]:
    """An approval post's props: its id (how the bridge finds it) and its card."""
    return {APPROVAL_PROP: approval_id, "attachments": [approval_card(text, color)]}


class ApprovalPoster:
    """The approvals the bridge posts and the owner decides.

    `on_reaction` is the bridge's reading of a reaction: reactions made while the bridge
    could not see them (found on an approval's posts) go the way the stream's do.
    """

    def __init__(
        self,
        settings: Settings,
        ledger: Ledger,
        board: Board,
        out: Outbound,
        on_reaction: OnReaction,
    ) -> None:
        self.s = settings
        self.ledger = ledger
        self.board = board
        self.out = out
        self._on_reaction = on_reaction

    # -- 1. posted -----------------------------------------------------------------------

    async def announce(self, approval: PendingApproval, channel: str, again: bool = False) -> None:
        """Post the approval in its session's thread (a settle waits for this).

        `again` posts it anew after a restart ("still waiting"); otherwise an approval
        whose post exists (a follow replaying the turn) is not posted twice.
        """
        self.board.announcing(approval.id)
        try:
            await self._announce(approval, channel, again)
        except Rejected as exc:
            log.error("cannot post approval %s in its thread: %s", approval.id, exc)
        finally:
            self.board.announced(approval.id)

    async def _announce(self, approval: PendingApproval, channel: str, again: bool) -> None:
        root = thread_of(approval.session)
        assert root is not None, approval.session
        message, *parts = approval_posts(approval, again=again)
        known = self.board.get(approval.id)
        if known is None:
            known = OpenApproval(
                id=approval.id,
                session=approval.session,
                call_id=approval.call_id,
                channel_id=channel,
                root_id=root,
                message=message,
                arguments=approval.arguments,
            )
            self.ledger.approval_opened(known)
        else:
            if known.call_id is UNSET or known.arguments is UNSET:  # read from a version 1 file
                self.ledger.approval_call(known, approval.call_id, approval.arguments)
            await self.out.retrying(lambda: self._adopt(known, approval))
            if known.post_ids and not again:
                return
        post = await self._card(channel, root, approval.id, message)
        self.ledger.approval_post(known, post.id, part=False)
        for part in parts:
            post = await self._card(channel, root, approval.id, part)
            self.ledger.approval_post(known, post.id, part=True)
        match known.status:
            case Undecided(revised=str(revised)) if again:
                # the owner's version waits for their yes: say it again
                text = revision_message(known.id, revised)
                post = await self._card(channel, root, approval.id, text)
                self.ledger.approval_post(known, post.id, part=True)
            case Undecided() | DecidedInMattermost():
                pass
            case _:
                assert_never(known.status)
        # The owner may have reacted before the bridge knew a post's id (its create was
        # answered late, or found again after a lost answer): the stream's event was not
        # recognised then.
        await self.out.retrying(lambda: self.reactions_on(known))

    async def _card(self, channel: str, root: str, approval_id: str, text: str) -> Post:
        """Post one card of an approval (its head, or a part of its arguments)."""
        props = card_props(approval_id, text, APPROVAL_COLORS["asking"])

        def same(post: Post) -> bool:
            return post.props.get(APPROVAL_PROP) == approval_id and card_text(post.props) == text

        return await self.out.post(channel, root, "", props=props, same=same)

    async def _adopt(self, known: OpenApproval, approval: PendingApproval) -> None:
        """Take as this approval's the posts of it the bridge made but did not record.

        A bridge killed between a post's create and the ledger's write left a post the
        owner may react to, or that should say the outcome: found in the thread by its
        prop and its text (the head as first posted or as posted again, or a part).
        """
        first, *parts = approval_posts(approval)
        heads = {first, approval_posts(approval, again=True)[0]}
        known_ids = {*known.post_ids, *known.part_ids}
        for post in await self.out.own_posts(known.root_id):
            if post.props.get(APPROVAL_PROP) != approval.id or post.id in known_ids:
                continue
            text = card_text(post.props)
            if text in heads or text in parts:
                self.ledger.approval_post(known, post.id, part=text in parts)
                log.info("approval %s: found its post %s made before a restart", known.id, post.id)

    async def reactions_on(self, approval: OpenApproval) -> None:
        """The reactions on the approval's posts, made while the bridge could not see them."""
        for post_id in [*approval.post_ids, *approval.part_ids]:
            for reaction in await self.out.api.reactions(post_id):
                await self._on_reaction(reaction)

    # -- 2. decided ----------------------------------------------------------------------

    async def decide(
        self, approval_id: str, answer: OwnerAnswer, *, how: str, post: str | None = None
    ) -> None:
        """Send the owner's decision to brokerd and say it on the approval's head.

        `post` is the reply or card that decided, for the audit's record of where.
        """
        approval = self.board.get(approval_id)
        if approval is None:
            return
        match approval.status:
            case Undecided(revised=revised):
                if not self.board.start_deciding(approval_id):
                    return
                try:
                    await self._decide(approval, revised, answer, how, post)
                finally:
                    self.board.done_deciding(approval_id)
            case DecidedInMattermost():
                return
            case _:
                assert_never(approval.status)

    async def _decide(
        self,
        approval: OpenApproval,
        revised: str | UnsetType,
        answer: OwnerAnswer,
        how: str,
        post: str | None,
    ) -> None:
        surface = Surface(via="mattermost", user=self.s.owner_name, post=post)
        reason: str | None
        verdict: Approve | Deny
        match answer:
            case OwnerApproves():
                approve, reason = True, None
                verdict = Approve(version=None if isinstance(revised, UnsetType) else revised)
            case OwnerDenies(reason=reason):
                approve = False
                verdict = Deny(reason=reason)
            case _:
                assert_never(answer)
        request = ApprovalDecide.deciding(approval.id, verdict, surface=surface)
        try:
            await proto.call(self.s.broker_socket, request, Ok, deadline_s=self.s.call_timeout_s)
        except proto.RemoteError as exc:
            text = (
                f"**Not recorded:** {outcome_span(exc.error.message)} (it may have been "
                "decided already, from bxctl, or have timed out)."
            )
            color = APPROVAL_COLORS["closed"]
        except proto.CallFailed as exc:
            log.warning("cannot send the decision on %s to brokerd: %s", approval.id, exc)
            await self.out.post(
                approval.channel_id,
                approval.root_id,
                "**Your decision was not recorded:** brokerd did not answer "
                f"({proto.code_span(str(exc))}). Try again in a moment.",
            )
            return
        else:
            word = "Approved" if approve else "Denied"
            if approve and revised is not UNSET:
                word = "Approved with your changes"
            said = f", reason {outcome_span(reason)}" if reason else ""
            text = (
                f"**{word}** by {proto.code_span(self.s.owner_name)} in Mattermost "
                f"({how}{said}), {proto.utc_stamp()}."
            )
            color = APPROVAL_COLORS["approved" if approve else "denied"]
            log.info("approval %s %s from Mattermost", approval.id, word.lower())
        self.ledger.approval_decided(approval, text)
        await self._show(approval, text, color)

    async def _show(self, approval: OpenApproval, outcome: str, color: str) -> None:
        props = card_props(approval.id, f"{approval.message}\n\n{outcome}", color)
        for post_id in approval.post_ids:
            try:
                await self.out.edit(post_id, "", props=props)
            except Rejected as exc:
                log.warning("cannot show the outcome on approval %s: %s", approval.id, exc)

    async def revise(self, approval_id: str, text: str, post: Post) -> None:
        """The owner's own text for a waiting add or replace (`edit CODE: …`).

        brokerd checks it with the same rules (same action, same file) without deciding;
        the version it would run is shown back on a card of its own, and the owner's
        `yes CODE` then approves that version, not the model's.
        """
        approval = self.board.get(approval_id)
        if approval is None:
            return
        match approval.status:
            case Undecided():
                pass
            case DecidedInMattermost():
                return
            case _:
                assert_never(approval.status)
        mine = None if approval.arguments is UNSET else entries.with_text(approval.arguments, text)
        if mine is None:
            await self.out.post(approval.channel_id, approval.root_id, not_editable(approval.id))
            return
        try:
            revised = await proto.call(
                self.s.broker_socket,
                ApprovalRevise(id=approval.id, arguments=mine),
                ApprovalRevised,
                deadline_s=self.s.call_timeout_s,
            )
        except proto.CallFailed as exc:
            await self.out.post(
                approval.channel_id,
                approval.root_id,
                f"**Your version was not taken:** {outcome_span(str(exc))}. The approval "
                "still waits for the model's version or yours.",
            )
            return
        self.ledger.approval_revised(approval, revised.arguments)
        text = revision_message(approval.id, revised.arguments)
        card = await self._card(approval.channel_id, approval.root_id, approval.id, text)
        self.ledger.approval_post(approval, card.id, part=True)  # a ✅ on it approves too
        log.info("approval %s: the owner's version is waiting for their yes", approval.id)

    # -- 3. settled by its call ----------------------------------------------------------

    async def settle(self, session: str, result: ToolResult) -> None:
        """A call's result came: if an approval decided it, its head says what became of it."""
        approval = self.board.of_call(session, result.call.id)
        if approval is None:
            return
        await self.board.wait_announced(approval.id)
        if self.ledger.approval_closed(approval.id) is None:
            return  # settled meanwhile (the same result, replayed by a follow)
        if result.status == "denied":
            ran, color = f"The call did not run: {outcome_span(result.content)}", "denied"
        elif result.status == "ok":
            ran, color = "The call ran.", "approved"
        else:
            ran = f"The call ended in an error: {outcome_span(result.content)}"
            color = "closed"
        match approval.status:
            case DecidedInMattermost(text=decided):
                pass
            case Undecided():
                decided = "**Decided outside Mattermost** (bxctl, or it timed out)."
            case _:
                assert_never(approval.status)
        await self._show(approval, f"{decided}\n{ran}", APPROVAL_COLORS[color])

    # -- 4. after a restart, or a turn that ended without their results ------------------

    async def pending(self, otherwise: str) -> list[PendingApproval] | None:
        """Every approval brokerd waits on, a frame's worth at a time.

        None, and a log line ending in `otherwise`, when brokerd cannot say.
        """
        request = ApprovalsList()
        pending: list[PendingApproval] = []
        try:
            while True:
                reply = await proto.call(
                    self.s.broker_socket, request, Approvals, deadline_s=self.s.call_timeout_s
                )
                pending += reply.pending
                if not reply.more:
                    return pending
                request = ApprovalsList(ids=reply.more)
        except proto.CallFailed as exc:
            log.warning("cannot list the pending approvals (%s); %s", exc, otherwise)
            return None

    async def close(self, approval: OpenApproval, otherwise: str) -> None:
        """An approval brokerd no longer waits on, whose call's result the bridge missed."""
        if self.ledger.approval_closed(approval.id) is None:
            return
        match approval.status:
            case DecidedInMattermost(text=decided):
                outcome = f"{decided}\nThe reply in this thread says what became of the call."
            case Undecided():
                outcome = otherwise
            case _:
                assert_never(approval.status)
        await self._show(approval, outcome, APPROVAL_COLORS["closed"])

    async def close_gone(self, session: str) -> None:
        """After a turn: close the session's approvals brokerd no longer waits on.

        A turn that ended without a call's result (loopd restarted, the turn was
        interrupted) leaves its approval open; brokerd, not a guess, says it is over.
        """
        left = self.board.of_session(session)
        if not left:
            return
        pending = await self.pending("left for the next start")
        if pending is None:
            return
        waiting = {a.id for a in pending}
        for approval in left:
            if approval.id not in waiting:
                await self.close(approval, DECIDED_ELSEWHERE)
