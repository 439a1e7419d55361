"""The owner's memory commands in the terminal: run by `entries`, shown and confirmed here.

`bxctl memory add|replace|remove|forget|why|undo|show` and the chat's `/remember`,
`/remove`, `/forget`, `/why`, `/undo` and `/memory` are one thing: an
`entries.OwnerCommand`, run by `entries.run_command` exactly as the Mattermost bridge runs
`!remember` and friends. Its meaning is memoryd's (which entry a part names, what an undo
does) and every change is the owner's own edit at brokerd. What is bxctl's is the client
(the blocking one, `ask`; the chat runs a command in a worker thread), the terminal
rendering (`entries.to_terminal`: every hidden or live code point revealed), the y/N, and
its own files: a forget asks bxctl about them (`Ask("surface", …)`) as brokerd asks each
role about its stores, and `OwnFiles` answers (the chat's input history).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import entries
import proto
from proto import ForgetApplied, ForgetApply, ForgetLook, ForgetLooked, Holding

from ._common import CommandError, Sockets, ask, failure_sentence
from ._history import HISTORY_FILE, HISTORY_STORE, HISTORY_UNIT, forget_in_file, look_in_file

if TYPE_CHECKING:
    from ._prompt_history import PromptHistory

__all__ = [
    "BXCTL",
    "Confirm",
    "OwnFiles",
    "drive",
    "forget_preview",
    "memory_why_json",
    "run_owner_command",
    "terminal_confirm",
]

T = TypeVar("T")

Confirm = Callable[[entries.Confirm], bool]
"""Shows what a command would do and asks the owner's yes (`entries.yes_no` words it)."""
"""Shows the owner what would change and asks y/N; True only for yes."""

BXCTL = proto.Surface(via="bxctl")
"""Where these edits are made; brokerd fills in the uid from the socket itself."""

_SOCKETS = {"memoryd": proto.OWNER_MEMORY, "brokerd": proto.OWNER_BROKER}


class OwnFiles:
    """bxctl's own files in a home, asked about as a role's stores are: the chat's history.

    `prompt` is the running chat's own history, when the chat runs the command: what it
    keeps loaded is dropped too, so Up never brings a forgotten line back. bxctl writes
    no plan: its part is one atomic rewrite, done whole or not at all, after brokerd's
    part; if bxctl is killed between the two, the owner forgets the text again (a
    `ForgetApply` without a text has nothing here to finish).
    """

    def __init__(self, home: Path, prompt: PromptHistory | None = None) -> None:
        self.path = home / HISTORY_FILE
        self.prompt = prompt

    def answer(self, request: proto.Message) -> proto.Message:
        """The reply to one of `entries`' requests for the surface."""
        match request:
            case ForgetLook(text=text):
                try:
                    count = look_in_file(self.path, text)
                except OSError as exc:
                    raise CommandError(
                        f"cannot read {self.path} to see what of it holds the text: "
                        f"{exc.strerror or exc}; nothing was changed"
                    ) from None
                if self.prompt is not None:
                    count += self.prompt.unsaved_holding(text)
                return ForgetLooked(holdings=[_holding(count)])
            case ForgetApply(plan=plan, text=None):
                return ForgetApplied(plan=plan)
            case ForgetApply(plan=plan, text=str(text)):
                try:
                    count = forget_in_file(self.path, text)
                except OSError as exc:
                    raise CommandError(
                        f"the forget is done everywhere but in {self.path}, which cannot be "
                        f"rewritten ({exc.strerror or exc}); make it writable and forget the "
                        "same text again"
                    ) from None
                if self.prompt is not None:
                    count += self.prompt.forget(text)
                return ForgetApplied(plan=plan, holdings=[_holding(count)])
            case _:
                kind = type(request).__struct_config__.tag
                raise TypeError(f"bxctl answers no {kind!r} about its own files")


def _holding(count: int) -> Holding:
    return Holding(store=HISTORY_STORE, count=count, unit=HISTORY_UNIT)


def drive(home: Path, steps: entries.Steps[T], own: OwnFiles | None = None) -> T:
    """Run a command's steps: each request to its role's owner socket, the reply sent back.

    A request for the surface is answered by `own` (default: the home's own files).

    Raises:
        CommandError: a role could not be asked, refused, or answered with the wrong kind.
    """
    sockets = Sockets(home)
    own = own or OwnFiles(home)
    try:
        step = next(steps)
        while True:
            if step.role == "surface":
                step = steps.send(own.answer(step.request))
                continue
            spec = _SOCKETS[step.role]
            with _status() as status:
                reply = ask(
                    sockets.path(spec), spec, step.request, proto.Message, on_progress=status
                )
            try:
                step = steps.send(reply)
            except proto.CallFailed as exc:  # a reply of another kind than asked
                raise CommandError(failure_sentence(spec.server, sockets.path(spec), exc)) from None
    except StopIteration as done:
        result: T = done.value
        return result


@contextmanager
def _status() -> Iterator[Callable[[proto.Message], None]]:
    """Show a long request's progress (a forget waiting for a role) on standard error.

    On a terminal, one line written over as it changes and cleared at the end; elsewhere,
    a line each time what is waited for changes.
    """
    live, shown, said = sys.stderr.isatty(), [False], [""]

    def show(frame: proto.Message) -> None:
        if not isinstance(frame, proto.ForgetProgress):
            return
        text, now = entries.describe_progress(frame), f"{frame.step} {frame.working} {frame.gone}"
        if live or now != said[0]:
            sys.stderr.write("\r\x1b[K" + text if live else text + "\n")
            sys.stderr.flush()
        shown[0], said[0] = True, now

    yield show
    if live and shown[0]:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def run_owner_command(
    home: Path,
    command: entries.OwnerCommand,
    *,
    confirm: Confirm,
    session: str | None = None,
    where: entries.Where = "cli",
    own: OwnFiles | None = None,
) -> int:
    """Run `command`, print its answer for the terminal; 1 when it did not do what it asked.

    An edit that needs the owner's yes is shown and asked with `confirm`; what is applied
    is exactly what was shown. `own` answers for bxctl's own files (default: the home's).
    """
    steps = entries.run_command(command, surface=BXCTL, session=session, where=where)
    result = drive(home, steps, own)
    if isinstance(result, entries.Confirm):
        if not confirm(result):
            result = entries.DECLINED
        else:
            proposal = result.proposal
            result = drive(
                home, entries.apply_proposal(proposal, surface=BXCTL, session=session), own
            )
    print(entries.to_terminal(result))
    return 0 if result.ok else 1


def terminal_confirm(what: str) -> Confirm:
    """y/N on the terminal for a command line (`--yes` confirms without asking).

    With no terminal to ask on, nothing is changed: the command says so.
    """

    def confirm(ask: entries.Confirm) -> bool:
        if not sys.stdin.isatty():
            raise CommandError(
                f"{what} needs a y/N answer and standard input is not a terminal; "
                "nothing was changed. Run it on a terminal, or add --yes to confirm in a script"
            )
        print(entries.to_terminal(ask.question))
        return input(entries.yes_no(ask.proposal)).strip().lower() in ("y", "yes")

    return confirm


def memory_why_json(home: Path, part: str) -> list[proto.WhyEntry]:
    """The entries holding `part` and their stories, as memoryd tells them (`--json`)."""
    path = Sockets(home).path(proto.OWNER_MEMORY)
    reply = ask(path, proto.OWNER_MEMORY, proto.MemoryWhy(part=part), proto.MemoryWhyReply)
    return reply.entries


def forget_preview(home: Path, text: str) -> proto.ForgetPreviewed:
    """What a forget of `text` would change (`--json`): brokerd's preview and bxctl's part.

    Writes nothing.
    """
    path = Sockets(home).path(proto.OWNER_BROKER)
    request = proto.ForgetPreview(text=text)
    previewed = ask(path, proto.OWNER_BROKER, request, proto.ForgetPreviewed)
    own = OwnFiles(home).answer(ForgetLook(text=text))
    assert isinstance(own, ForgetLooked)
    return proto.ForgetPreviewed(
        holdings=[*previewed.holdings, *own.holdings],
        entries=[*previewed.entries, *own.entries],
        near=[*previewed.near, *own.near],
    )
