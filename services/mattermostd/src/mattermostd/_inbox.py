"""The inbox: what an event from Mattermost means to the bridge. Pure: no I/O, no state change.

The bridge listens to the owner alone. A post or reaction is the owner's only when its
author is the owner's user id and no integration made it in their name (an incoming
webhook, a slash command, a bot or a plugin sets one of `INTEGRATION_PROPS`). A post
answers a change the owner's own command showed (`Confirms`), or an approval, when its
thread has one waiting and it reads as a decision naming that card's code
(`parse_decision`); any other owner post with text is a message for its thread's session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import assert_never

import entries

from ._answers import (
    APPROVE_EMOJI,
    DENY_EMOJI,
    OwnerAnswer,
    OwnerApproves,
    OwnerDenies,
    bare_decision,
    decision_code,
    parse_decision,
    parse_revision,
)
from ._api import Post, Reaction
from ._board import Board
from ._state import DecidedInMattermost, Inflight, State, Undecided, session_of

__all__ = [
    "INTEGRATION_PROPS",
    "Answers",
    "Command",
    "Confirms",
    "Empty",
    "ForSession",
    "Ignored",
    "Inbox",
    "Integration",
    "Meaning",
    "Revises",
    "Stranger",
    "Unconfirmed",
]

INTEGRATION_PROPS = ("from_webhook", "from_bot", "from_plugin", "override_username")
"""Props Mattermost sets on a post that an integration made: an incoming webhook or a slash
command posts in the name of the user who created it, and whoever holds its URL or
token could otherwise speak, or answer an approval, as the owner."""
_ID = re.compile(r"[a-z0-9]{26}")


@dataclass(frozen=True)
class Ignored:
    """Nothing for the bridge (another channel, a deletion, its own post, an edit, …)."""

    why: str
    noted: bool = False
    """Worth a log line (the owner did something the bridge does not act on)."""


@dataclass(frozen=True)
class Stranger:
    """By someone who is not the owner (logged once per author)."""

    user_id: str
    what: str


@dataclass(frozen=True)
class Integration:
    """A post in the owner's name made by an integration (logged once)."""

    post_id: str


@dataclass(frozen=True)
class Answers:
    """The owner's decision on a waiting approval, by a reply or a reaction."""

    approval_id: str
    answer: OwnerAnswer
    how: str
    post: Post | None = None
    """The reply that decided (handled at once), or None for a reaction."""


@dataclass(frozen=True)
class Confirms:
    """The owner's answer to a change their own `!` command showed, by a reply or reaction."""

    confirmation_id: str
    answer: OwnerAnswer
    how: str
    post: Post | None = None
    """The reply that answered, or None for a reaction."""


@dataclass(frozen=True)
class Unconfirmed:
    """A yes or no in a thread with a card waiting, without the card's code.

    Handled, not sent to the model: the owner is told to name the code (`codes`: those
    of the cards waiting there, newest last). A plugin's slash command answers in-channel
    in the owner's name, with no mark of a plugin, so a plain `yes` could be anyone's
    canned reply.
    """

    codes: tuple[str, ...]
    post: Post


@dataclass(frozen=True)
class Command:
    """The owner's `!` command (answered by the bridge, never sent to the model)."""

    command: entries.OwnerCommand | entries.NotACommand | entries.Usage
    post: Post


@dataclass(frozen=True)
class Revises:
    """The owner's own version of a waiting approval's text: `edit CODE: NEW TEXT`."""

    approval_id: str
    text: str
    post: Post


@dataclass(frozen=True)
class Empty:
    """An owner post with nothing to say (a file alone): handled, not answered."""

    post: Post


@dataclass(frozen=True)
class ForSession:
    """An owner post for its thread's session; `approval_waiting` if one waits there."""

    inflight: Inflight
    approval_waiting: bool


Meaning = (
    Ignored
    | Stranger
    | Integration
    | Answers
    | Confirms
    | Unconfirmed
    | Command
    | Revises
    | Empty
    | ForSession
)


def by_integration(post: Post) -> bool:
    """Whether an integration made the post (in whoever's name)."""
    return any(post.props.get(name) not in (None, "", False, "false") for name in INTEGRATION_PROPS)


@dataclass(frozen=True)
class Inbox:
    """What each event means to one bridge: who the owner and the bot are, which channels count."""

    owner_id: str
    bot_id: str
    channels: frozenset[str]

    def post(self, post: Post, state: State, board: Board) -> Meaning:
        """What a new post means."""
        if post.channel_id not in self.channels:
            return Ignored("another channel")
        if post.delete_at or post.original_id or post.type:
            return Ignored("deleted, an edit's old copy, or a system message")
        if post.user_id == self.bot_id:
            return Ignored("the bridge's own post")
        if post.user_id != self.owner_id:
            return Stranger(post.user_id, "a post")
        if by_integration(post):
            return Integration(post.id)
        if post.create_at < state.horizon or state.is_known(post.id):
            return Ignored("handled already, or from before the bridge's horizon")
        root = post.root_id or post.id
        if _ID.fullmatch(root) is None:
            return Ignored(f"post {post.id!r} has a root id the bridge cannot use", noted=True)
        parsed = entries.parse_command(post.message, "!")
        if not isinstance(parsed, entries.ForModel):
            return Command(parsed, post)
        confirmations = board.confirmations_in(root)
        for confirmation in confirmations:
            answer = parse_decision(post.message, decision_code(confirmation.id))
            if answer is not None:
                return Confirms(confirmation.id, answer, "a reply", post)
        waiting = board.waiting_in(root)
        if waiting is not None:
            revised = parse_revision(post.message, decision_code(waiting.id))
            if revised is not None:
                return Revises(waiting.id, revised, post)
            answer = parse_decision(post.message, decision_code(waiting.id))
            if answer is not None:
                return Answers(waiting.id, answer, "a reply", post)
        if (waiting is not None or confirmations) and bare_decision(post.message):
            codes = [decision_code(c.id) for c in confirmations]
            if waiting is not None:
                codes.append(decision_code(waiting.id))
            return Unconfirmed(tuple(codes), post)
        if not post.message.strip():
            return Empty(post)
        inflight = Inflight(
            post_id=post.id,
            channel_id=post.channel_id,
            root_id=root,
            session=session_of(root),
            text=parsed.text,
            create_at=post.create_at,
        )
        return ForSession(inflight, approval_waiting=waiting is not None)

    def edit(self, post: Post) -> Ignored:
        """An edit is never a new message: boxmaker answers what was first said."""
        if post.user_id == self.owner_id and post.channel_id in self.channels:
            return Ignored(
                f"the owner edited post {post.id}; boxmaker answers what was first said",
                noted=True,
            )
        return Ignored("an edit")

    def reaction(self, reaction: Reaction, board: Board) -> Meaning:
        """What a reaction means: only the owner's ✅ or ❌ on a waiting card's post."""
        if reaction.user_id == self.bot_id:
            return Ignored("the bridge's own reaction")
        confirmation = board.confirmation_of_post(reaction.post_id)
        approval = board.of_post(reaction.post_id)
        if confirmation is None and approval is None:
            return Ignored("not on a card's post")
        if reaction.user_id != self.owner_id:
            return Stranger(reaction.user_id, "a reaction")
        answer = _emoji_answer(reaction.emoji_name)
        if answer is None:
            return Ignored("a reaction that is not a decision")
        if confirmation is not None:
            return Confirms(confirmation.id, answer, "a reaction")
        assert approval is not None
        match approval.status:
            case DecidedInMattermost():
                return Ignored("the approval was decided already")
            case Undecided():
                pass
            case _:
                assert_never(approval.status)
        return Answers(approval.id, answer, "a reaction")


def _emoji_answer(emoji: str) -> OwnerAnswer | None:
    if emoji in APPROVE_EMOJI:
        return OwnerApproves()
    if emoji in DENY_EMOJI:
        return OwnerDenies()
    return None
