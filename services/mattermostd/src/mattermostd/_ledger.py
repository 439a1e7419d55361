"""The ledger: the bridge's state file, each change of which saves itself.

"Every owner post is answered exactly once" rests on one rule, kept here and nowhere
else: **a step is written down before it is taken**. Each method below changes the
state and writes the file (`StateStore.save`: temporary file, fsync, rename) before it
returns, and the callers call it before the step it records:

1. `accept`: an owner post joins `inflight` before anything is done with it, so a
   bridge killed from then on finds it again at its next start.
2. `said`: marked before the `say` goes to loopd, so a restarted bridge *follows* the
   turn (`turn_follow` by its ref) rather than saying it twice; loopd answers
   `turn-not-found` if it never arrived, and `unsaid` puts it back.
3. `reply_creating`: a reply post's `pending_post_id` is saved before the create, so a
   restarted bridge looks for the post in the thread before making another;
   `reply_made` saves its id once known.
4. `answered`: the post moves from `inflight` to `handled` once its reply is final.
5. `handled`: posts that need no turn (a decision, an empty post) are handled at once.
6. Approvals: `approval_opened` before the first approval post is made, each post's id
   (`approval_post`) as soon as it is known, the owner's decision (`approval_decided`)
   before it is shown, and `approval_closed` before the outcome is shown.
7. The owner's confirmations: `confirmation_opened` before the change is shown, and
   `confirmation_closed` before it is applied, so one yes applies it at most once.
8. A forget: `forget` redacts the state and saves it when the owner's yes is taken,
   before the roles are asked, and again when the bridge's part is asked (copies made
   meanwhile), so a bridge killed between keeps no copy the roles no longer have.

A change that needs no order (the place in a channel, an author logged once) is saved
with it too: the file is small and changes rarely against the turns it protects. Each
save wakes whoever waits in `changed` (a test waiting for a post to be handled).
"""

from __future__ import annotations

import time

import trio

import proto

from ._forget import damaged_holding, holding, scrub_damaged, scrub_state, state_holds
from ._state import (
    HANDLED_DAYS,
    DecidedInMattermost,
    Inflight,
    NoReplyPost,
    OpenApproval,
    OpenConfirmation,
    ReplyCreating,
    ReplyPosted,
    State,
    StateStore,
    Undecided,
)

__all__ = ["HANDLED_DAYS", "Ledger", "now_ms"]


def now_ms() -> int:
    """The wall clock in ms since 1970, as Mattermost counts."""
    return int(time.time() * 1000)


class Ledger:
    """The state of the bridge, read once and written at every change."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self.state = State()
        """Read it freely; change it only through the methods below."""
        self._saved = trio.lowlevel.ParkingLot()

    def load(self) -> None:
        """Read the state file (a new one starts from now), dropping old handled ids."""
        self.state = self._store.load(now_ms=now_ms())
        self.state.prune(now_ms())

    def _save(self) -> None:
        self._store.save(self.state)
        self._saved.unpark_all()

    async def changed(self) -> None:
        """Return at the next change (once it is saved)."""
        await self._saved.park()

    # -- posts ---------------------------------------------------------------------------

    def saw(self, channel_id: str, update_at: int) -> None:
        """A post of `channel_id` changed at `update_at`: the catch-up starts there next time.

        Not saved by itself: a place saved late makes a catch-up read again posts the
        ledger already knows (and skips), never miss one.
        """
        self.state.seen(channel_id, update_at)

    def checkpoint(self) -> None:
        """Save the places in the channels (after a catch-up, and after each event)."""
        self._save()

    def accept(self, inflight: Inflight) -> None:
        """An owner post to answer: in flight from now on."""
        self.state.inflight.append(inflight)
        self._save()

    def handled(self, post_id: str, create_at: int) -> None:
        """A post done with that needed no turn (a decision, an empty post)."""
        self.state.handled[post_id] = create_at
        self._save()

    def stranger(self, user_id: str) -> bool:
        """Note an author who is not the owner; True the first time (to log it once)."""
        if user_id in self.state.strangers:
            return False
        self.state.strangers.append(user_id)
        self._save()
        return True

    # -- a turn --------------------------------------------------------------------------

    def said(self, inflight: Inflight) -> None:
        """The `say` is about to go: from now on it may have reached loopd."""
        inflight.said = True
        self._save()

    def unsaid(self, inflight: Inflight) -> None:
        """Loopd never had the `say` (`turn-not-found`): it is to be said again."""
        inflight.said = False
        self._save()

    def reply_creating(self, inflight: Inflight, pending_post_id: str) -> None:
        """The reply post is about to be created with `pending_post_id`."""
        inflight.reply_post = ReplyCreating(pending_post_id=pending_post_id)
        self._save()

    def reply_made(self, inflight: Inflight, reply_id: str) -> None:
        """The reply post exists: later changes edit `reply_id`."""
        inflight.reply_post = ReplyPosted(reply_id=reply_id)
        self._save()

    def reply_lost(self, inflight: Inflight) -> None:
        """The reply post is gone (deleted in Mattermost): a new one is to be made."""
        inflight.reply_post = NoReplyPost()
        self._save()

    def answered(self, inflight: Inflight) -> None:
        """The reply is final: the post is handled."""
        self.state.done(inflight)
        self._save()

    # -- approvals -----------------------------------------------------------------------

    def approval_opened(self, approval: OpenApproval) -> None:
        """An approval is about to be posted in its thread."""
        self.state.approvals[approval.id] = approval
        self._save()

    def approval_post(self, approval: OpenApproval, post_id: str, *, part: bool) -> None:
        """One of the approval's posts exists (its head, or a part of long arguments)."""
        (approval.part_ids if part else approval.post_ids).append(post_id)
        self._save()

    def approval_decided(self, approval: OpenApproval, text: str) -> None:
        """The owner decided in Mattermost and brokerd took it; `text` says how."""
        approval.status = DecidedInMattermost(text=text)
        self._save()

    def approval_revised(self, approval: OpenApproval, arguments: str) -> None:
        """The owner's version of the call, checked by brokerd: a yes now approves it."""
        approval.status = Undecided(revised=arguments)
        self._save()

    def approval_call(self, approval: OpenApproval, call_id: str, arguments: str) -> None:
        """The call of an approval read from a state file that did not record it."""
        approval.call_id = call_id
        approval.arguments = arguments
        self._save()

    def approval_closed(self, approval_id: str) -> OpenApproval | None:
        """Brokerd no longer waits on the approval: forget it (its posts say the outcome)."""
        approval = self.state.approvals.pop(approval_id, None)
        if approval is not None:
            self._save()
        return approval

    # -- the owner's confirmations -------------------------------------------------------

    def confirmation_opened(self, confirmation: OpenConfirmation) -> None:
        """A change is about to be shown to the owner, to apply on their yes."""
        self.state.confirmations[confirmation.id] = confirmation
        self._save()

    def confirmation_post(self, confirmation: OpenConfirmation, post_id: str) -> None:
        """The post showing the change exists (a reaction on it answers too)."""
        confirmation.post_id = post_id
        self._save()

    def confirmation_closed(self, confirmation_id: str) -> OpenConfirmation | None:
        """The owner answered (taken once: a second yes finds nothing)."""
        confirmation = self.state.confirmations.pop(confirmation_id, None)
        if confirmation is not None:
            self._save()
        return confirmation

    # -- a forget ------------------------------------------------------------------------

    def holding(self, text: str) -> list[proto.Holding]:
        """What of the state file and its damaged copies holds `text` (writes nothing)."""
        copies = damaged_holding(self._store.damaged(), text)
        return holding(state_holds(self.state, text), copies, self._store.path)

    def forget(self, text: str) -> list[proto.Holding]:
        """Take `text` out of the state (saved at once) and its damaged copies."""
        records = scrub_state(self.state, text)
        if records:
            self._save()
        copies = scrub_damaged(self._store.damaged(), text)
        return holding(records, copies, self._store.path)
