"""The approval board: the approvals the bridge posted, by id, by post, by thread, by call.

It finds the changes waiting for the owner's yes (`confirmations_in`) the same way.

An approval is settled by its call: brokerd names the call an approval decides
(`PendingApproval.call_id`), and the `tool_result` of that call (in the session's turn,
live or replayed by `turn_follow`) closes it. Nothing is inferred from what came before
or after it. The board holds no I/O; what it knows persists in the ledger.
"""

from __future__ import annotations

from typing import assert_never

import trio

from ._answers import decision_code
from ._ledger import Ledger
from ._state import DecidedInMattermost, OpenApproval, OpenConfirmation, Undecided

__all__ = ["Board"]


class Board:
    """Lookups over the ledger's open approvals, and what is under way for each."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._announcing: dict[str, trio.Event] = {}
        self._deciding: set[str] = set()

    def get(self, approval_id: str) -> OpenApproval | None:
        """The open approval with this id."""
        return self._ledger.state.approvals.get(approval_id)

    def all(self) -> list[OpenApproval]:
        """Every open approval, oldest first."""
        return list(self._ledger.state.approvals.values())

    def of_post(self, post_id: str) -> OpenApproval | None:
        """The open approval one of whose posts (head or part) is `post_id`."""
        for approval in self._ledger.state.approvals.values():
            if post_id in approval.post_ids or post_id in approval.part_ids:
                return approval
        return None

    def waiting_in(self, root_id: str) -> OpenApproval | None:
        """The approval of the thread `root_id` still waiting for the owner's decision."""
        for approval in self._ledger.state.approvals.values():
            if approval.root_id != root_id:
                continue
            match approval.status:
                case Undecided():
                    return approval
                case DecidedInMattermost():
                    pass
                case _:
                    assert_never(approval.status)
        return None

    def of_call(self, session: str, call_id: str) -> OpenApproval | None:
        """The open approval of the call `call_id` in `session`."""
        for approval in self._ledger.state.approvals.values():
            if approval.session == session and approval.call_id == call_id:
                return approval
        return None

    def of_session(self, session: str) -> list[OpenApproval]:
        """The open approvals of one session."""
        return [a for a in self._ledger.state.approvals.values() if a.session == session]

    # -- the owner's confirmations -------------------------------------------------------

    def confirmations_in(self, root_id: str) -> list[OpenConfirmation]:
        """The changes waiting for the owner's yes in the thread `root_id`."""
        return [c for c in self._ledger.state.confirmations.values() if c.root_id == root_id]

    def confirmation_of_post(self, post_id: str) -> OpenConfirmation | None:
        """The waiting change shown by the post `post_id`."""
        for confirmation in self._ledger.state.confirmations.values():
            if confirmation.post_id == post_id:
                return confirmation
        return None

    def codes_in(self, root_id: str) -> set[str]:
        """The codes an answer may name in the thread `root_id` (approvals', changes')."""
        ids = [a.id for a in self.all() if a.root_id == root_id]
        ids += [c.id for c in self.confirmations_in(root_id)]
        return {decision_code(i) for i in ids}

    # -- what is under way ---------------------------------------------------------------

    def announcing(self, approval_id: str) -> trio.Event:
        """Mark the approval as being posted; the event is set once its posts are made."""
        return self._announcing.setdefault(approval_id, trio.Event())

    def announced(self, approval_id: str) -> None:
        """Its posts are made (or could not be)."""
        self._announcing.pop(approval_id, trio.Event()).set()

    async def wait_announced(self, approval_id: str) -> None:
        """Return once the approval is not being posted (a settle waits for its posts)."""
        event = self._announcing.get(approval_id)
        if event is not None:
            await event.wait()

    def start_deciding(self, approval_id: str) -> bool:
        """Claim the sending of a decision; False if one is already on its way.

        A reaction seen twice (from the stream and from a check after a reconnect)
        decides once.
        """
        if approval_id in self._deciding:
            return False
        self._deciding.add(approval_id)
        return True

    def done_deciding(self, approval_id: str) -> None:
        """The decision went (or could not)."""
        self._deciding.discard(approval_id)
