"""The owner's memory commands in the terminal: run by `entries`, shown and confirmed here.

`bxctl memory add|replace|remove|why|undo|show` and the chat's `/remember`, `/forget`,
`/why`, `/undo` and `/memory` are one thing: an `entries.OwnerCommand`, run by
`entries.run_command` exactly as the Mattermost bridge runs `!remember` and friends. Its
meaning is memoryd's (which entry a part names, what an undo does) and every change is
the owner's own edit at brokerd. What is bxctl's is the client (the blocking one, `ask`;
the chat runs a command in a worker thread), the terminal rendering
(`entries.to_terminal`: every hidden or live code point revealed) and the y/N.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import entries
import proto

from ._common import CommandError, Sockets, ask, failure_sentence

__all__ = [
    "BXCTL",
    "Confirm",
    "drive",
    "memory_why_json",
    "run_owner_command",
    "terminal_confirm",
]

T = TypeVar("T")

Confirm = Callable[[entries.Answer], bool]
"""Shows the owner what would change and asks y/N; True only for yes."""

BXCTL = proto.Surface(via="bxctl")
"""Where these edits are made; brokerd fills in the uid from the socket itself."""

_SOCKETS = {"memoryd": proto.OWNER_MEMORY, "brokerd": proto.OWNER_BROKER}


def drive(home: Path, steps: entries.Steps[T]) -> T:
    """Run a command's steps: each request to its role's owner socket, the reply sent back.

    Raises:
        CommandError: a role could not be asked, refused, or answered with the wrong kind.
    """
    sockets = Sockets(home)
    try:
        step = next(steps)
        while True:
            spec = _SOCKETS[step.role]
            reply = ask(sockets.path(spec), spec, step.request, proto.Message)
            try:
                step = steps.send(reply)
            except proto.CallFailed as exc:  # a reply of another kind than asked
                raise CommandError(failure_sentence(spec.server, sockets.path(spec), exc)) from None
    except StopIteration as done:
        result: T = done.value
        return result


def run_owner_command(
    home: Path,
    command: entries.OwnerCommand,
    *,
    confirm: Confirm,
    session: str | None = None,
    where: entries.Where = "cli",
) -> int:
    """Run `command`, print its answer for the terminal; 1 when it did not do what it asked.

    An edit that needs the owner's yes is shown and asked with `confirm`; what is applied
    is exactly what was shown.
    """
    result = drive(home, entries.run_command(command, surface=BXCTL, session=session, where=where))
    if isinstance(result, entries.Confirm):
        if not confirm(result.question):
            result = entries.DECLINED
        else:
            result = drive(
                home, entries.apply_proposal(result.proposal, surface=BXCTL, session=session)
            )
    print(entries.to_terminal(result))
    return 0 if result.ok else 1


def terminal_confirm(what: str) -> Confirm:
    """y/N on the terminal for a command line (`--yes` confirms without asking).

    With no terminal to ask on, nothing is changed: the command says so.
    """

    def confirm(question: entries.Answer) -> bool:
        if not sys.stdin.isatty():
            raise CommandError(
                f"{what} needs a y/N answer and standard input is not a terminal; "
                "nothing was changed. Run it on a terminal, or add --yes to confirm in a script"
            )
        print(entries.to_terminal(question))
        return input("change it? [y/N] ").strip().lower() in ("y", "yes")

    return confirm


def memory_why_json(home: Path, part: str) -> list[proto.WhyEntry]:
    """The entries holding `part` and their stories, as memoryd tells them (`--json`)."""
    path = Sockets(home).path(proto.OWNER_MEMORY)
    reply = ask(path, proto.OWNER_MEMORY, proto.MemoryWhy(part=part), proto.MemoryWhyReply)
    return reply.entries
