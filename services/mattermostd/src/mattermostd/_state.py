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
  says whether its `say` may have reached loopd (`said`) and which reply post is its
  (`reply_id`, or `pending_post_id` while it is being created).
* `approvals`: approval posts made and not yet settled.
"""

from __future__ import annotations

import logging
from pathlib import Path

import msgspec

import proto

__all__ = [
    "HANDLED_DAYS",
    "Inflight",
    "OpenApproval",
    "State",
    "StateStore",
    "session_of",
    "thread_of",
]

log = logging.getLogger("mattermostd.state")

HANDLED_DAYS = 7
"""How long a handled post's id is kept (a post older than that is before the horizon)."""
SESSION_PREFIX = "mm-"


def session_of(root_id: str) -> str:
    """The session of a thread: `mm-` and its root post's id (ARCHITECTURE §3)."""
    return f"{SESSION_PREFIX}{root_id}"


def thread_of(session: str) -> str | None:
    """The root post id of a Mattermost session, or None for a session of elsewhere."""
    return session.removeprefix(SESSION_PREFIX) if session.startswith(SESSION_PREFIX) else None


class Inflight(msgspec.Struct, kw_only=True):
    """An owner post accepted for its session, until its reply is final."""

    post_id: str
    channel_id: str
    root_id: str
    session: str
    text: str
    create_at: int
    said: bool = False
    """Set (and saved) before the `say` is sent: it may have reached loopd."""
    pending_post_id: str = ""
    """Set (and saved) before the reply post is created."""
    reply_id: str = ""


class OpenApproval(msgspec.Struct, kw_only=True):
    """An approval the bridge posted, until its call's outcome is shown."""

    id: str
    session: str
    channel_id: str
    root_id: str
    call_id: str = ""
    """The tool call it decides: the call's `tool_result` settles it."""
    post_ids: list[str] = msgspec.field(default_factory=list)
    """The approval's posts (one per announcement), each edited to say what was decided."""
    part_ids: list[str] = msgspec.field(default_factory=list)
    """Posts with the rest of arguments too long for one post; a reaction on one counts."""
    message: str = ""
    """The approval post's text, to which the outcome is added."""
    decided: str = ""
    """What the owner decided from Mattermost, as the post will say it."""
    arguments: str = ""
    """The call's arguments as brokerd asked (the owner's `edit CODE:` starts from them)."""
    revised: str = ""
    """The owner's version (`edit CODE: …`), as brokerd would run it; a yes applies it."""


class State(msgspec.Struct, kw_only=True):
    """The whole state file."""

    version: int = 1
    horizon: int = 0
    channels: dict[str, int] = msgspec.field(default_factory=dict)
    handled: dict[str, int] = msgspec.field(default_factory=dict)
    inflight: list[Inflight] = msgspec.field(default_factory=list)
    approvals: dict[str, OpenApproval] = msgspec.field(default_factory=dict)
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


_DECODER = msgspec.json.Decoder(State)


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
            return _DECODER.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            aside = self.path.with_name(f"{self.path.name}.damaged-{now_ms}")
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

    def save(self, state: State) -> None:
        """Write the state atomically (mode 0600)."""
        proto.write_atomically(self.path, msgspec.json.encode(state))
