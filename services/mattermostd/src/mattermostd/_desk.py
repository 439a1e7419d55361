"""The owner's desk: runs the owner's `!` commands and answers them in their thread.

The commands are the terminal's `/remember` and friends written with `!`, and they run
the same way: `entries.run_command` decides what each means (memoryd finds entries and
plans undos; every change is the owner's own edit at brokerd, audited with the post that
asked). What is the bridge's is its client (trio, `proto.call`), the Markdown rendering
(`entries.to_markdown`: outside text only inside code spans and blocks) and how the
owner confirms a change in a thread.
"""

from __future__ import annotations

import logging
from typing import TypeVar, assert_never

import entries
import proto
from proto import Surface

from ._api import Post
from ._config import Settings
from ._outbound import Outbound
from ._state import session_of

__all__ = ["Desk", "DeskCommand"]

log = logging.getLogger("mattermostd")

T = TypeVar("T")

DeskCommand = entries.OwnerCommand | entries.NotACommand | entries.Usage
"""What an owner's `!` post asks of the desk."""


class Desk:
    """Runs the owner's commands for one bridge."""

    def __init__(self, settings: Settings, out: Outbound) -> None:
        self.s = settings
        self.out = out

    async def run(self, command: DeskCommand, post: Post) -> None:
        """Run `command`, asked by the owner's `post`, and answer in its thread."""
        try:
            answer = await self._answer(command, post)
        except proto.CallFailed as exc:
            answer = f"**That did not work:** {proto.code_span(str(exc))}. Try again in a moment."
        await self.out.post(post.channel_id, post.root_id or post.id, answer)

    async def _answer(self, command: DeskCommand, post: Post) -> str:
        help_text = entries.to_markdown(entries.Answer((entries.Table(_help()),)))
        match command:
            case entries.NotACommand(word=word):
                return f"There is no command {proto.code_span('!' + word)}.\n\n{help_text}"
            case entries.Usage(problem=problem):
                return f"{_sentence(problem)}\n\n{help_text}"
            case _:
                surface = Surface(via="mattermost", user=self.s.owner_name, post=post.id)
                session = session_of(post.root_id or post.id)
                steps = entries.run_command(
                    command, surface=surface, session=session, where="mattermost"
                )
                result = await self._drive(steps)
                match result:
                    case entries.Answer():
                        if isinstance(command, entries.Remember | entries.Forget | entries.Undo):
                            log.info(
                                "the owner's %s from Mattermost (post %s)", _name(command), post.id
                            )
                        return entries.to_markdown(result)
                    case entries.Confirm(question=question):
                        return entries.to_markdown(question) + "\n\n" + _how_to_confirm(command)
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


def _help() -> tuple[tuple[str, str], ...]:
    return tuple(entries.help_rows("!"))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _name(command: entries.OwnerCommand) -> str:
    return type(command).__name__.lower()


def _how_to_confirm(command: entries.OwnerCommand) -> str:
    match command:
        case entries.Forget(part=part, file=file):
            flag = f" --{file}" if file is not None else ""
            return (
                f"To do it, post `!forget{flag} --yes` and the same words: {proto.code_span(part)}."
            )
        case entries.Undo(edit=edit):
            shown = f" {edit}" if edit else ""
            return f"To do it, post `!undo{shown} --yes`."
        case _:
            return ""
