"""The owner's desk: runs the owner's `!` commands and answers them in their thread.

The commands are the terminal's `/remember` and friends written with `!`, and they run
the same way: `entries.run_command` decides what each means (memoryd finds entries and
plans undos; every change is the owner's own edit at brokerd, audited with the post that
asked). What is the bridge's is its client (trio, `proto.call`), the Markdown rendering
(`entries.to_markdown`: outside text only inside code spans and blocks) and how the
owner confirms a change in a thread.

A change that needs the owner's yes (`!forget`, `!remove`, `!replace`, `!undo`) is shown
as a card in the thread, with a code as an approval's has: **yes CODE** or a ✅ on the
card applies exactly what it showed, **no CODE** or ❌ drops it. The card is in the
bridge's state file (`OpenConfirmation`) before it is posted, and taken out of it before
the change is applied, so a restart keeps it answerable and one yes applies it at most once.

A forget asks the bridge for its own part as it asks a role (`Ask("surface", …)`): its
state file and the damaged copies beside it (`_forget`). Once the roles have done theirs,
the bridge edits its own posts that hold the text, in the channels it knows, and lists
the owner's own, which only the owner can change. What it posts after a forget never
quotes the text.
"""

from __future__ import annotations

import logging
import secrets
from functools import partial
from typing import TypeVar, assert_never

import entries
import proto
from proto import ForgetApplied, ForgetApply, ForgetLook, ForgetLooked, Surface

from ._answers import OwnerAnswer, OwnerApproves, OwnerDenies, decision_code
from ._api import Post, Rejected
from ._board import Board
from ._config import Settings
from ._forget import merged, permalink, post_holds, redacted_post
from ._ledger import Ledger
from ._outbound import Outbound
from ._state import OpenConfirmation, session_of

__all__ = ["SWEEP_PAGES", "SWEEP_PER_PAGE", "Desk", "DeskCommand"]

log = logging.getLogger("mattermostd")

T = TypeVar("T")

SWEEP_PAGES = 25
SWEEP_PER_PAGE = 200
"""After a forget, the newest 25 pages of 200 posts of each channel are read (Mattermost's
largest page): a bound on the requests one forget makes, said in the answer when reached."""
OWN_POSTS_LISTED = 50

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
            await self.out.post(post.channel_id, root, _failed(exc))
            return
        if isinstance(answer, entries.Confirm):
            await self._ask(answer, post.channel_id, root)
            return
        await self.out.post(post.channel_id, root, answer)
        if isinstance(command, entries.Forget) and command.confirmed:
            # `!forget --yes`: the answer quotes the text as the preview does; the sweep
            # edits it with the rest
            await self.out.post(post.channel_id, root, await self._sweep(command.text))

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
                proposal = confirmation.proposal
                steps = entries.apply_proposal(
                    proposal, surface=surface, session=session_of(confirmation.root_id)
                )
                early: list[proto.Holding] = []
                if isinstance(proposal, entries.ForgetProposal):
                    # decided: the state holds no copy from now on, whatever happens next
                    early = self.ledger.forget(proposal.text)
                try:
                    where = (confirmation.channel_id, confirmation.root_id)
                    text = entries.to_markdown(await self._drive(steps, early, where))
                except proto.CallFailed as exc:
                    text = _failed(exc)
                if isinstance(proposal, entries.ForgetProposal):
                    text += "\n" + await self._sweep(proposal.text)
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
                result = await self._drive(steps, where=(post.channel_id, post.root_id or post.id))
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

    async def _drive(
        self,
        steps: entries.Steps[T],
        early: list[proto.Holding] | None = None,
        where: tuple[str, str] | None = None,
    ) -> T:
        """Run a command's steps: each request to its role's owner socket, the reply sent in.

        The bridge answers what is asked of the surface itself (`_own_part`); `early` is
        what a forget already took out of its files when the owner said yes. A forget that
        waits for a role that is not running says so in the thread (`where`), once a role.
        """
        sockets = {"memoryd": self.s.memory_socket, "brokerd": self.s.broker_socket}
        said: set[str] = set()

        async def told(frame: proto.Message) -> None:
            if where is None or not isinstance(frame, proto.ForgetProgress):
                return
            if new := [role for role in frame.gone if role not in said]:
                said.update(new)
                await self.out.post(*where, entries.describe_progress(frame))

        try:
            step = next(steps)
            while True:
                if step.role == "surface":
                    reply = self._own_part(step.request, early or [])
                else:
                    reply = await proto.call(
                        sockets[step.role],
                        step.request,
                        proto.Message,
                        deadline_s=self.s.call_timeout_s,
                        on_progress=told,
                    )
                step = steps.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result

    def _own_part(self, request: proto.Message, early: list[proto.Holding]) -> proto.Message:
        """The bridge's own files' part of a forget, asked of it as of a role."""
        match request:
            case ForgetLook(text=text):
                return ForgetLooked(holdings=self.ledger.holding(text))
            case ForgetApply(plan=plan, text=str() as text):
                return ForgetApplied(plan=plan, holdings=merged(early, self.ledger.forget(text)))
            case ForgetApply(plan=plan):  # a retry without the text: the bridge keeps no plan
                return ForgetApplied(plan=plan, holdings=early)
            case _:
                kind = type(request).__struct_config__.tag
                raise TypeError(f"the bridge has no part in {kind!r}")

    async def _sweep(self, text: str) -> str:
        """Edit the bridge's posts holding `text`; list the owner's (never quoting it)."""
        channels = set(self.ledger.state.channels) | ({self.s.channel} if self.s.channel else set())
        edited = failed = 0
        owners: list[str] = []
        bounded = False
        for channel in sorted(channels):
            posts, whole = await self._channel_posts(channel)
            bounded = bounded or not whole
            for found in posts:
                if found.delete_at or not post_holds(found, text):
                    continue
                if found.user_id == self.out.bot_id:
                    redacted = redacted_post(found, text)
                    try:
                        await self.out.edit(found.id, redacted.message, props=redacted.props)
                        edited += 1
                    except Rejected as exc:
                        failed += 1
                        log.warning("cannot edit post %s after a forget: %s", found.id, exc)
                elif found.user_id == self.s.owner_id:
                    owners.append(found.id)
        log.info(
            "after a forget: %d of the bridge's posts edited, %d not, %d of the owner's listed",
            edited,
            failed,
            len(owners),
        )
        return _swept(self.s.url, edited, failed, owners, bounded)

    async def _channel_posts(self, channel: str) -> tuple[list[Post], bool]:
        """The channel's newest posts, up to `SWEEP_PAGES` pages; whether that was all."""
        seen: dict[str, Post] = {}
        for page in range(SWEEP_PAGES):
            try:
                found = await self.out.retrying(
                    partial(self.out.api.channel_page, channel, page, SWEEP_PER_PAGE)
                )
            except Rejected as exc:  # the channel is gone, or no longer the bot's
                log.warning("cannot read channel %s after a forget: %s", channel, exc)
                return list(seen.values()), True
            seen.update(found.posts)
            if len(found.order) < SWEEP_PER_PAGE:
                return list(seen.values()), True
        return list(seen.values()), False


def _swept(url: str, edited: int, failed: int, owners: list[str], bounded: bool) -> str:
    """What the forget did in Mattermost, in words that never quote the text."""
    parts = [entries.line("in Mattermost:")]
    if edited:
        parts.append(
            entries.line(
                f"{edited:,} of boxmaker's posts held it: edited, each copy now "
                f"{proto.MARKER} (Mattermost keeps their earlier versions in its own storage)",
                depth=1,
            )
        )
    if failed:
        parts.append(
            entries.line(
                f"{failed:,} of boxmaker's posts could not be edited (see its log)", depth=1
            )
        )
    if owners:
        parts.append(
            entries.line(
                f"{len(owners):,} of your own posts still hold it; only you can edit or delete "
                "them:",
                depth=1,
            )
        )
        shown = owners[:OWN_POSTS_LISTED]
        parts += [entries.line(permalink(url, post_id), depth=2) for post_id in shown]
        if len(owners) > len(shown):
            parts.append(entries.line(f"… and {len(owners) - len(shown):,} more", depth=2))
    if not edited and not failed and not owners:
        parts.append(entries.line("no post the bridge can read holds it any more", depth=1))
    if bounded:
        parts.append(
            entries.line(
                f"only the newest {SWEEP_PAGES * SWEEP_PER_PAGE:,} posts of each channel were read",
                depth=1,
            )
        )
    return entries.to_markdown(entries.Answer(tuple(parts)))


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
