"""The owner's desk: runs the owner's `!` commands and answers them in their thread.

The commands are the terminal's `/remember` and friends written with `!`, and they run
the same way: `entries.run_command` decides what each means (memoryd finds entries and
plans undos; every change is the owner's own edit at brokerd, audited with the post that
asked). What is the bridge's is its client (trio, `proto.call`), the Markdown rendering
(`entries.to_markdown`: outside text only inside code spans and blocks) and how the
owner confirms a change in a thread.

A change that needs the owner's yes (`!forget`, `!replace`, `!undo`) is shown as a card
in the thread, with a code as an approval's has: **yes CODE** or a ✅ on the card
applies exactly what it showed, **no CODE** or ❌ drops it. The card is in the bridge's
state file (`OpenConfirmation`) before it is posted, and taken out of it before the change
is applied, so a restart keeps it answerable and one yes applies it at most once.
"""

from __future__ import annotations

import logging
import secrets
from typing import TypeVar, assert_never

import entries
import proto
from proto import Surface

from ._answers import OwnerAnswer, OwnerApproves, OwnerDenies, decision_code
from ._api import Post
from ._board import Board
from ._config import Settings
from ._ledger import Ledger
from ._outbound import Outbound
from ._state import OpenConfirmation, session_of

__all__ = ["Desk", "DeskCommand"]

log = logging.getLogger("mattermostd")

T = TypeVar("T")

DeskCommand = entries.OwnerCommand | entries.NotACommand | entries.Usage
"""What an owner's `!` post asks of the desk."""


class Desk:
    """Runs the owner's commands for one bridge."""

    def __init__(self, settings: Settings, ledger: Ledger, board: Board, out: Outbound) -> None:
        self.s = settings
        self.ledger = ledger
        self.board = board
        self.out = out

    async def run(self, command: DeskCommand, post: Post) -> None:
        """Run `command`, asked by the owner's `post`, and answer in its thread."""
        root = post.root_id or post.id
        try:
            answer = await self._answer(command, post)
        except proto.CallFailed as exc:
            answer = _failed(exc)
        if isinstance(answer, entries.Confirm):
            await self._ask(answer, post.channel_id, root)
        else:
            await self.out.post(post.channel_id, root, answer)

    async def confirm(self, confirmation_id: str, answer: OwnerAnswer, how: str, post: str) -> None:
        """The owner answered a change's card (`post`: the reply, or the card reacted on)."""
        confirmation = self.ledger.confirmation_closed(confirmation_id)
        if confirmation is None:  # answered already (a reaction after the yes)
            return
        match answer:
            case OwnerDenies():
                text = entries.to_markdown(entries.DECLINED)
            case OwnerApproves():
                log.info("the owner confirmed %s from Mattermost (%s)", confirmation.id, how)
                surface = Surface(via="mattermost", user=self.s.owner_name, post=post)
                steps = entries.apply_proposal(
                    confirmation.proposal, surface=surface, session=session_of(confirmation.root_id)
                )
                try:
                    text = entries.to_markdown(await self._drive(steps))
                except proto.CallFailed as exc:
                    text = _failed(exc)
            case _:
                assert_never(answer)
        await self.out.post(confirmation.channel_id, confirmation.root_id, text)

    async def _ask(self, confirm: entries.Confirm, channel: str, root: str) -> None:
        """Show the change as a card, kept in the state file before it is posted."""
        taken = self.board.codes_in(root)
        ident = _confirmation_id()
        while decision_code(ident) in taken:
            ident = _confirmation_id()
        card = OpenConfirmation(
            id=ident, channel_id=channel, root_id=root, proposal=confirm.proposal
        )
        self.ledger.confirmation_opened(card)
        code = decision_code(ident)
        text = (
            entries.to_markdown(confirm.question)
            + f"\n\nReply **yes {code}** to do it or **no {code}** to leave it, or react "
            ":white_check_mark: or :x: on this post."
        )
        posted = await self.out.post(channel, root, text)
        self.ledger.confirmation_post(card, posted.id)

    async def _answer(self, command: DeskCommand, post: Post) -> str | entries.Confirm:
        match command:
            case entries.NotACommand(word=word):
                return f"There is no command {proto.code_span('!' + word)}.\n\n{_help()}"
            case entries.Usage(problem=problem):
                return f"{_sentence(problem)}\n\n{_help()}"
            case _:
                surface = Surface(via="mattermost", user=self.s.owner_name, post=post.id)
                session = session_of(post.root_id or post.id)
                steps = entries.run_command(
                    command, surface=surface, session=session, where="mattermost"
                )
                result = await self._drive(steps)
                match result:
                    case entries.Answer():
                        if isinstance(
                            command,
                            entries.Remember | entries.Remove | entries.Forget | entries.Undo,
                        ):
                            log.info(
                                "the owner's %s from Mattermost (post %s)", _name(command), post.id
                            )
                        return entries.to_markdown(result)
                    case entries.Confirm():
                        return result
                    case _:
                        assert_never(result)

    async def _drive(self, steps: entries.Steps[T]) -> T:
        """Run a command's steps: each request to its role's owner socket, the reply sent in."""
        sockets = {"memoryd": self.s.memory_socket, "brokerd": self.s.broker_socket}
        try:
            step = next(steps)
            while True:
                reply = await proto.call(
                    sockets[step.role],
                    step.request,
                    proto.Message,
                    deadline_s=self.s.call_timeout_s,
                )
                step = steps.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result


def _help() -> str:
    return entries.to_markdown(entries.Answer((entries.Table(tuple(entries.help_rows("!"))),)))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _name(command: entries.OwnerCommand) -> str:
    return type(command).__name__.lower()


def _failed(exc: proto.CallFailed) -> str:
    return f"**That did not work:** {proto.code_span(str(exc))}. Try again in a moment."


_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
"""No l, o, 0 or 1: a code is read off a screen and typed back."""


def _confirmation_id() -> str:
    return "cf-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(6))
