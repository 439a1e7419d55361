"""The bridge's place in the stream, in `{home}/mattermost/state.json`.

What makes "every owner post handled exactly once" survive a dropped stream and a
killed bridge. Written atomically (temp file, fsync, rename) after every change that
matters, and always *before* the step it records is taken:

* `channels`: per channel, the newest `update_at` seen (server time, ms): where the
  catch-up with `?since=` starts after a reconnect.
* `handled`: owner posts done with, by id (with their `create_at`, so old ones can be
  dropped); `horizon`: posts created before it are never handled (the bridge's first
  start, or the oldest dropped entry).
* `inflight`: owner posts accepted and not yet answered, in the order they came; each
  says whether its `say` may have reached loopd (`said`) and where its reply post is
  (`reply_post`: none, being created, or posted).
* `approvals`: approval posts made and not yet settled, each undecided (maybe with the
  owner's own version) or decided in Mattermost.
* `confirmations`: changes the owner's own commands showed (`!remove`, `!undo`,
  `!forget`), each waiting for the owner's yes with the exact change to apply.

The file says its version. Version 1 (before issue 30) wrote `""` for "absent" and
fields that together made a state; version 2 (before issue 31) kept only memory edits in
a confirmation, untagged. Each is read once and written back as version 3.

A damaged file is set aside as `state.json.damaged-<time>` (`StateStore.damaged`): a
forget scrubs those copies too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import ClassVar, assert_never

import msgspec
from msgspec import UNSET, UnsetType

import entries
import proto

__all__ = [
    "HANDLED_DAYS",
    "ApprovalStatus",
    "DecidedInMattermost",
    "Inflight",
    "NoReplyPost",
    "OpenApproval",
    "OpenConfirmation",
    "ReplyCreating",
    "ReplyPost",
    "ReplyPosted",
    "State",
    "StateStore",
    "Undecided",
    "session_of",
    "thread_of",
]

log = logging.getLogger("mattermostd.state")

HANDLED_DAYS = 7
"""How long a handled post's id is kept (a post older than that is before the horizon)."""
SESSION_PREFIX = "mm-"


def session_of(root_id: str) -> str:
    """The session of a thread: `mm-` and its root post's id."""
    return f"{SESSION_PREFIX}{root_id}"


def thread_of(session: str) -> str | None:
    """The root post id of a Mattermost session, or None for a session of elsewhere."""
    return session.removeprefix(SESSION_PREFIX) if session.startswith(SESSION_PREFIX) else None


class NoReplyPost(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="none"):
    """No reply post yet, or the one there was is gone (deleted in Mattermost)."""


class ReplyCreating(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="creating"):
    """The reply post is being created with `pending_post_id` (saved before the create).

    The create may have gone through before the bridge stopped: a restarted bridge looks
    for the post in the thread before making another.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"pending_post_id"})
    """An id, kept by a forget."""

    pending_post_id: str


class ReplyPosted(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="posted"):
    """The reply post exists: later versions of the reply edit it."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"reply_id"})
    """An id, kept by a forget."""

    reply_id: str


ReplyPost = NoReplyPost | ReplyCreating | ReplyPosted
"""Where an in-flight post's reply post is."""


class Inflight(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An owner post accepted for its session, until its reply is final."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"post_id", "channel_id", "root_id", "session"})
    """Ids, kept by a forget; `text` is what the owner said."""

    post_id: str
    channel_id: str
    root_id: str
    session: str
    text: str
    create_at: int
    said: bool = False
    """Set (and saved) before the `say` is sent: it may have reached loopd."""
    reply_post: ReplyPost = msgspec.field(default_factory=NoReplyPost)


class Undecided(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="undecided"):
    """The approval waits for the owner's decision."""

    revised: str | UnsetType = UNSET
    """The owner's version of a memory add or replace (`edit CODE: …`), as brokerd would
    run it: their yes approves it, not the model's."""


class DecidedInMattermost(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="decided"
):
    """The owner decided in Mattermost and brokerd took it: nothing more to revise."""

    text: str
    """What was decided, as the approval's posts say it."""


ApprovalStatus = Undecided | DecidedInMattermost


class OpenApproval(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An approval the bridge posted, until its call's outcome is shown."""

    KEPT: ClassVar[frozenset[str]] = frozenset(
        {"id", "session", "channel_id", "root_id", "call_id", "post_ids", "part_ids"}
    )
    """Ids, kept by a forget; the message, arguments and versions are text."""

    id: str
    session: str
    channel_id: str
    root_id: str
    message: str
    """The approval post's text, to which the outcome is added."""
    arguments: str | UnsetType = UNSET
    """The call's arguments as brokerd asked (the owner's `edit CODE:` starts from them)."""
    call_id: str | UnsetType = UNSET
    """The tool call it decides: the call's `tool_result` settles it.

    `call_id` and `arguments` are UNSET only in an approval read from a state file of a
    bridge that did not record them (version 1 with `""`); both are learnt when brokerd
    lists the approval again (`Ledger.approval_call`).
    """
    post_ids: list[str] = msgspec.field(default_factory=list)
    """The approval's posts (one per announcement), each edited to say what was decided."""
    part_ids: list[str] = msgspec.field(default_factory=list)
    """Posts with the rest of arguments too long for one post; a reaction on one counts."""
    status: ApprovalStatus = msgspec.field(default_factory=Undecided)


class OpenConfirmation(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A change an owner's `!` command showed in its thread, waiting for their yes.

    What is applied on a yes is `proposal`, exactly the change that was shown (never the
    command worked out again: memory may have changed since); a stale one is refused by
    memoryd and changes nothing.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"id", "channel_id", "root_id", "post_id"})
    """Ids; the proposal is text."""

    id: str
    """`cf-` and six characters; its last three are the code the owner names."""
    channel_id: str
    root_id: str
    proposal: entries.Proposal | entries.ForgetProposal
    post_id: str | UnsetType = UNSET
    """The post that shows the change (its ✅ or ❌ answers too), once it exists."""


class State(msgspec.Struct, kw_only=True, omit_defaults=True, tag_field="version", tag=3):
    """The whole state file (version 3; `_StateV2` and `_StateV1` read older ones once)."""

    horizon: int = 0
    channels: dict[str, int] = msgspec.field(default_factory=dict)
    handled: dict[str, int] = msgspec.field(default_factory=dict)
    inflight: list[Inflight] = msgspec.field(default_factory=list)
    approvals: dict[str, OpenApproval] = msgspec.field(default_factory=dict)
    confirmations: dict[str, OpenConfirmation] = msgspec.field(default_factory=dict)
    strangers: list[str] = msgspec.field(default_factory=list)
    """Authors whose posts were ignored and logged once (a user id each)."""

    def is_known(self, post_id: str) -> bool:
        """Whether the post was handled or is being handled."""
        return post_id in self.handled or any(i.post_id == post_id for i in self.inflight)

    def seen(self, channel_id: str, update_at: int) -> None:
        """Move the channel's place forward to `update_at`."""
        if update_at > self.channels.get(channel_id, 0):
            self.channels[channel_id] = update_at

    def done(self, inflight: Inflight) -> None:
        """The post is answered: handled, no longer in flight."""
        self.inflight = [i for i in self.inflight if i.post_id != inflight.post_id]
        self.handled[inflight.post_id] = inflight.create_at

    def prune(self, now_ms: int) -> None:
        """Drop handled ids older than `HANDLED_DAYS`, moving the horizon past them."""
        cutoff = now_ms - HANDLED_DAYS * 86_400_000
        old = [post for post, created in self.handled.items() if created < cutoff]
        for post in old:
            del self.handled[post]
        if old:
            self.horizon = max(self.horizon, cutoff)


# -- version 1, as bridges before issue 30 wrote it: `""` for absent, read once ----------


class _InflightV1(msgspec.Struct, kw_only=True):
    post_id: str
    channel_id: str
    root_id: str
    session: str
    text: str
    create_at: int
    said: bool = False
    pending_post_id: str = ""
    reply_id: str = ""

    def upgraded(self) -> Inflight:
        reply_post: ReplyPost
        if self.reply_id:
            reply_post = ReplyPosted(reply_id=self.reply_id)
        elif self.pending_post_id:
            reply_post = ReplyCreating(pending_post_id=self.pending_post_id)
        else:
            reply_post = NoReplyPost()
        return Inflight(
            post_id=self.post_id,
            channel_id=self.channel_id,
            root_id=self.root_id,
            session=self.session,
            text=self.text,
            create_at=self.create_at,
            said=self.said,
            reply_post=reply_post,
        )


class _OpenApprovalV1(msgspec.Struct, kw_only=True):
    id: str
    session: str
    channel_id: str
    root_id: str
    call_id: str = ""
    post_ids: list[str] = msgspec.field(default_factory=list)
    part_ids: list[str] = msgspec.field(default_factory=list)
    message: str = ""
    decided: str = ""
    arguments: str = ""
    revised: str = ""

    def upgraded(self) -> OpenApproval:
        status: ApprovalStatus
        if self.decided:
            status = DecidedInMattermost(text=self.decided)
        else:
            status = Undecided(revised=self.revised or UNSET)
        return OpenApproval(
            id=self.id,
            session=self.session,
            channel_id=self.channel_id,
            root_id=self.root_id,
            message=self.message,
            arguments=self.arguments or UNSET,
            call_id=self.call_id or UNSET,
            post_ids=self.post_ids,
            part_ids=self.part_ids,
            status=status,
        )


class _StateV1(msgspec.Struct, kw_only=True, tag_field="version", tag=1):
    horizon: int = 0
    channels: dict[str, int] = msgspec.field(default_factory=dict)
    handled: dict[str, int] = msgspec.field(default_factory=dict)
    inflight: list[_InflightV1] = msgspec.field(default_factory=list)
    approvals: dict[str, _OpenApprovalV1] = msgspec.field(default_factory=dict)
    strangers: list[str] = msgspec.field(default_factory=list)

    def upgraded(self) -> State:
        return State(
            horizon=self.horizon,
            channels=self.channels,
            handled=self.handled,
            inflight=[i.upgraded() for i in self.inflight],
            approvals={k: a.upgraded() for k, a in self.approvals.items()},
            strangers=self.strangers,
        )


# -- version 2, as bridges before issue 31 wrote it: a confirmation's edit untagged ------


class _OpenConfirmationV2(msgspec.Struct, kw_only=True):
    id: str
    channel_id: str
    root_id: str
    proposal: entries.Proposal
    """Read alone (not in a union), a tagged Struct takes an object without its tag."""
    post_id: str | UnsetType = UNSET

    def upgraded(self) -> OpenConfirmation:
        return OpenConfirmation(
            id=self.id,
            channel_id=self.channel_id,
            root_id=self.root_id,
            proposal=self.proposal,
            post_id=self.post_id,
        )


class _StateV2(msgspec.Struct, kw_only=True, tag_field="version", tag=2):
    horizon: int = 0
    channels: dict[str, int] = msgspec.field(default_factory=dict)
    handled: dict[str, int] = msgspec.field(default_factory=dict)
    inflight: list[Inflight] = msgspec.field(default_factory=list)
    approvals: dict[str, OpenApproval] = msgspec.field(default_factory=dict)
    confirmations: dict[str, _OpenConfirmationV2] = msgspec.field(default_factory=dict)
    strangers: list[str] = msgspec.field(default_factory=list)

    def upgraded(self) -> State:
        return State(
            horizon=self.horizon,
            channels=self.channels,
            handled=self.handled,
            inflight=self.inflight,
            approvals=self.approvals,
            confirmations={k: c.upgraded() for k, c in self.confirmations.items()},
            strangers=self.strangers,
        )


_DECODER = msgspec.json.Decoder(State | _StateV2 | _StateV1)
DAMAGED_INFIX = ".damaged-"
"""A damaged state file is set aside as `state.json.damaged-<time>`."""


class StateStore:
    """Reads and writes the state file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, *, now_ms: int) -> State:
        """The saved state; a new one (horizon now) if there is none.

        A damaged file is set aside (`state.json.damaged-<time>`) and the bridge starts
        from now: it logs what it cannot know (posts made while it was away are not
        answered) rather than answering everything in the channel's history.
        """
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            state = State(horizon=now_ms)
            self.save(state)
            return state
        try:
            read = _DECODER.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            aside = self.path.with_name(f"{self.path.name}{DAMAGED_INFIX}{now_ms}")
            self.path.rename(aside)
            log.error(
                "the state file %s is damaged (%s); it was moved to %s and the bridge starts "
                "from now: posts made while it was away are not answered "
                "(runbook: mattermost-state-damaged)",
                self.path,
                exc,
                aside.name,
            )
            state = State(horizon=now_ms)
            self.save(state)
            return state
        match read:
            case State():
                return read
            case _StateV2() | _StateV1():
                state = read.upgraded()
                self.save(state)
                old = type(read).__struct_config__.tag
                log.info("the state file %s was upgraded from version %s to 3", self.path, old)
                return state
            case _:
                assert_never(read)

    def save(self, state: State) -> None:
        """Write the state atomically (mode 0600)."""
        proto.write_atomically(self.path, msgspec.json.encode(state))

    def damaged(self) -> list[Path]:
        """The damaged state files set aside so far, oldest first."""
        return sorted(self.path.parent.glob(f"{self.path.name}{DAMAGED_INFIX}*"))
