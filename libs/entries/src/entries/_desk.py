"""The owner's commands, run the same way on every surface: sans-IO steps and answers.

A command's meaning is decided once: memoryd owns the files and the
journal, so it finds the entry a part names and plans an undo (`memory_find`,
`undo_plan`); every change is the owner's own edit, sent to brokerd (`memory_edit`),
which decides it `owner`, audits it and has memoryd apply it. A forget goes to brokerd
too (`forget_preview`, then `forget`), which asks each role for its part; the surface's
own files (the terminal's input history, the bridge's state) are the surface's part, asked
of it as of a role (`Ask("surface", …)`). What is left for a surface
(the terminal's chat and CLI, the Mattermost bridge) is how it talks to the roles, how it
shows an `Answer` and how it asks the owner to confirm. So this module does no I/O:

- `run_command` is a generator. It yields an `Ask` (a request for a role's owner
  socket); the surface sends it, with its own client, and sends the reply back in. It
  returns an `Answer`, or a `Confirm`: what would change, and the `Proposal` to apply
  once the owner says yes, exactly as shown (`apply_proposal`, also a generator).
- A surface's client failures (a role not running) are the surface's to say.

A reply of another kind than the request's is `proto.BadReply`, raised into the surface.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeVar, assert_never, overload

import msgspec

import proto
from proto import (
    AppliedEdit,
    Decided,
    ForgetApplied,
    ForgetApply,
    ForgetLook,
    ForgetLooked,
    ForgetPreview,
    ForgetPreviewed,
    Forgotten,
    FoundEntry,
    MemoryAmbiguous,
    MemoryArgs,
    MemoryBlock,
    MemoryBlockReply,
    MemoryEdit,
    MemoryFind,
    MemoryFound,
    MemoryNotFound,
    MemoryWhy,
    MemoryWhyReply,
    Message,
    NoSuchEdit,
    ToolResponse,
    UndoHandChange,
    UndoPlan,
    UndoPlanned,
    WhyEdit,
    WhyEntry,
)

from ._answer import Answer, Block, Line, Quote, Table, line
from ._commands import (
    Forget,
    Help,
    OwnerCommand,
    Remember,
    Remove,
    Replace,
    ShowMemory,
    Undo,
    Where,
    Why,
    command_for,
    help_rows,
)
from ._forget import describe_forget, describe_forgotten
from ._limits import file_name

__all__ = [
    "DECLINED",
    "Ask",
    "Confirm",
    "ForgetProposal",
    "Proposal",
    "Steps",
    "apply_proposal",
    "describe_edit",
    "describe_why",
    "run_command",
    "who_decided",
    "yes_no",
]

M = TypeVar("M")
A = TypeVar("A", bound=Message)
B = TypeVar("B", bound=Message)
C = TypeVar("C", bound=Message)

Role = Literal["memoryd", "brokerd", "surface"]
"""Whom a step asks: a role's owner socket, or the surface itself for its own files."""


@dataclass(frozen=True, slots=True)
class Ask:
    """A request for `role`'s owner socket; the surface sends back the reply frame."""

    role: Role
    request: Message


class Proposal(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="edit"):
    """An edit the owner was shown, applied once they say yes: exactly this, nothing else.

    `undoes` is the id of the edit it undoes, for an undo. A Struct, so a surface that
    asks and hears back later (a Mattermost post) can keep it.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"undoes"})
    """An edit's id, kept by a forget; the edit is text."""

    edit: MemoryArgs
    undoes: str | None = None


class ForgetProposal(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="forget"):
    """A forget the owner was shown (store by store), carried out once they say yes."""

    text: str


@dataclass(frozen=True, slots=True)
class Confirm:
    """What a command would change (`question`), waiting for the owner's yes."""

    question: Answer
    proposal: Proposal | ForgetProposal


def yes_no(proposal: Proposal | ForgetProposal) -> str:
    """The terminal's y/N question for what a `Confirm` would do."""
    if isinstance(proposal, ForgetProposal):
        return "forget it everywhere, for good? [y/N] "
    return "change it? [y/N] "


DECLINED = Answer((line("nothing changed"),), ok=False)
"""The answer when the owner says no to a change they were shown."""

Steps = Generator[Ask, Message, M]
"""The requests a command makes, its replies sent in, and what it ends with."""

NAMES: dict[str, str] = {"memory": "memory.md", "user": "user.md", "archive": "archive.md"}


def run_command(
    command: OwnerCommand, *, surface: proto.Surface, session: str | None, where: Where
) -> Steps[Answer | Confirm]:
    """Run one of the owner's commands; `session` is the one it was given in, if any.

    `where` names the other commands the answer suggests as the owner writes them there.
    """
    match command:
        case Remember(text=text, file=file):
            proposal = Proposal(edit=proto.MemoryAdd(file=file, text=text))
            return (yield from apply_proposal(proposal, surface=surface, session=session))
        case Forget(text=text, confirmed=confirmed):
            previewed = yield from _ask("brokerd", ForgetPreview(text=text), ForgetPreviewed)
            own = yield from _ask("surface", ForgetLook(text=text), ForgetLooked)
            question, anything = describe_forget(text, previewed, own)
            if not anything:
                return question  # nothing holds it: nothing to confirm
            ask = Confirm(question, ForgetProposal(text=text))
        case Remove(part=part, file=file, confirmed=confirmed):
            found = yield from _find(part, file, where)
            if isinstance(found, Answer):
                return found
            edit: MemoryArgs = proto.MemoryRemove(file=found.file, old=found.entry)
            ask = Confirm(describe_edit(edit), Proposal(edit=edit))
        case Replace(part=part, text=text, file=file, confirmed=confirmed):
            found = yield from _find(part, file, where)
            if isinstance(found, Answer):
                return found
            edit = proto.MemoryReplace(file=found.file, old=found.entry, text=text)
            ask = Confirm(describe_edit(edit), Proposal(edit=edit))
        case Why(part=part):
            why = yield from _ask("memoryd", MemoryWhy(part=part), MemoryWhyReply)
            return describe_why(why, part)
        case Undo(edit=wanted, confirmed=confirmed):
            plan = yield from _ask(
                "memoryd", UndoPlan(edit=wanted), UndoPlanned, UndoHandChange, NoSuchEdit
            )
            match plan:
                case NoSuchEdit():
                    return _no_such_edit(wanted, where)
                case UndoHandChange(id=ident, change=change):
                    return Answer(
                        (
                            line(
                                Quote(ident),
                                f" is a change made by hand in {change.file} (or an edit "
                                "applied just before a crash), not an edit boxmaker applied; "
                                "change the file back with an editor",
                            ),
                        ),
                        ok=False,
                    )
                case UndoPlanned():
                    ask = Confirm(_undo_question(plan), Proposal(edit=plan.undo, undoes=plan.id))
                case _:
                    assert_never(plan)
        case ShowMemory():
            block = yield from _ask("memoryd", MemoryBlock(), MemoryBlockReply)
            return Answer((Block(block.text, depth=0),))
        case Help():
            return Answer((Table(tuple(help_rows("!" if where == "mattermost" else "/"))),))
        case _:
            assert_never(command)
    if not confirmed:
        return ask
    done = yield from apply_proposal(ask.proposal, surface=surface, session=session)
    return ask.question + done


def _find(part: str, file: proto.MemoryFile | None, where: Where) -> Steps[FoundEntry | Answer]:
    """The one entry `part` names (memoryd's rule), or the answer saying why there is none."""
    found = yield from _ask(
        "memoryd", MemoryFind(part=part, file=file), MemoryFound, MemoryAmbiguous, MemoryNotFound
    )
    match found:
        case MemoryFound(found=entry):
            return entry
        case MemoryNotFound():
            return _not_found(part, file, where)
        case MemoryAmbiguous(entries=entries, omitted=omitted):
            return _ambiguous(part, entries, omitted)
        case _:
            assert_never(found)


def apply_proposal(
    proposal: Proposal | ForgetProposal, *, surface: proto.Surface, session: str | None
) -> Steps[Answer]:
    """Apply the edit the owner said yes to, as their own edit; memoryd's sentence back.

    A forget is brokerd's (every role's part), then the surface's own files.
    """
    if isinstance(proposal, ForgetProposal):
        forgotten = yield from _ask(
            "brokerd",
            proto.Forget(text=proposal.text, surface=surface, session=session),
            Forgotten,
        )
        own = yield from _ask(
            "surface", ForgetApply(plan=forgotten.plan, text=proposal.text), ForgetApplied
        )
        return describe_forgotten(forgotten, own)
    request = MemoryEdit(
        arguments=msgspec.json.encode(proposal.edit).decode(),
        surface=surface,
        session=session,
        undoes=proposal.undoes,
    )
    reply = yield from _ask("brokerd", request, ToolResponse)
    return Answer((line(Quote(reply.content)),), ok=reply.status == "ok")


@overload
def _ask(role: Role, request: Message, expect: type[A], /) -> Steps[A]: ...


@overload
def _ask(
    role: Role, request: Message, a: type[A], b: type[B], c: type[C], /
) -> Steps[A | B | C]: ...


def _ask(role: Role, request: Message, *expect: type[Message]) -> Steps[Message]:
    """Ask `role`; the reply, if it is of a kind in `expect`."""
    reply = yield Ask(role, request)
    if not isinstance(reply, expect):
        got = type(reply).__struct_config__.tag
        asked = type(request).__struct_config__.tag
        raise proto.BadReply(f"{role} answered {asked!r} with {got!r}")
    return reply


# -- what the owner reads ----------------------------------------------------------------


def _where(file: proto.MemoryFile | None) -> str:
    return NAMES[file] if file is not None else "memory.md or user.md"


def _not_found(part: str, file: proto.MemoryFile | None, where: Where) -> Answer:
    return Answer(
        (
            line(
                f"no entry of {_where(file)} holds ",
                Quote(part),
                f"; {command_for(where, 'memory')} shows them all",
            ),
        ),
        ok=False,
    )


def _ambiguous(part: str, found: list[proto.FoundEntry], omitted: int) -> Answer:
    count = len(found) + omitted
    parts: list[Line | Block] = [
        line(f"{count:,} entries hold ", Quote(part), "; give more of the one you mean:")
    ]
    for entry in found:
        parts.append(line(f"{NAMES[entry.file]}:", depth=1))
        parts.append(Block(entry.entry, depth=2))
    if omitted:
        parts.append(line(f"… and {omitted:,} more", depth=1))
    return Answer(tuple(parts), ok=False)


def _no_such_edit(edit: str | None, where: Where) -> Answer:
    if edit is None:
        return Answer((line("there is no memory edit to undo yet"),), ok=False)
    return Answer(
        (
            line(
                "no memory edit ",
                Quote(edit),
                f"; {command_for(where, 'why')} shows the edits of an entry, "
                "`bxctl memory history` all of them",
            ),
        ),
        ok=False,
    )


def describe_edit(edit: MemoryArgs) -> Answer:
    """An edit as the owner reads it before it is applied: every entry whole."""
    name = file_name(edit.file)
    match edit:
        case proto.MemoryAdd(text=text):
            return Answer((line(f"add to {name}:"), Block(text)))
        case proto.MemoryReplace(old=old, text=text):
            return Answer((line(f"replace in {name}:"), Block(old), line("with:"), Block(text)))
        case proto.MemoryRemove(old=old):
            return Answer((line(f"remove from {name}:"), Block(old)))
        case proto.MemoryConsolidate(entries=items):
            parts: list[Line | Block] = [
                line(f"rewrite {name} to exactly these entries, in this order:")
            ]
            for item in items:
                match item.fate:
                    case "new":
                        parts.append(Block(item.text or "", mark="+"))
                    case "keep":
                        parts.append(Block(item.old or ""))
                    case "rewrite":
                        parts.append(Block(item.old or "", mark="-"))
                        parts.append(Block(item.text or "", mark="+"))
                    case "move" | "drop":
                        parts.append(Block(item.old or "", mark="-"))
            return Answer(tuple(parts))
        case _:
            assert_never(edit)


def _undo_question(plan: UndoPlanned) -> Answer:
    edit: AppliedEdit = plan.edit
    head = line(
        "edit ",
        Quote(plan.id),
        f": {edit.action} {edit.file} (",
        Quote(edit.time),
        ", ",
        *_session(edit.session),
        ")",
    )
    question = Answer((head, line("its undo would:"))) + describe_edit(plan.undo)
    if edit.moved:
        note = "(entries it moved to archive.md stay there too: the archive only grows)"
        question += Answer((line(note, depth=1),))
    return question


def _session(session: str) -> tuple[str | Quote, ...]:
    if session == proto.OWNER_SESSION:
        return ("outside any session",)
    return ("session ", Quote(session))


def who_decided(decided: Decided | None) -> tuple[str | Quote, ...]:
    """Who decided an edit and where: `your own edit, in the terminal (uid 1000)`, …."""
    match decided:
        case None:
            return ("decided before boxmaker recorded who decided",)
        case proto.OwnerEdit(surface=surface):
            return ("your own edit, ", *_surface(surface))
        case proto.OwnerApproved(surface=surface):
            return ("approved by you ", *_surface(surface))
        case _:
            assert_never(decided)


def _surface(surface: proto.Surface) -> tuple[str | Quote, ...]:
    if surface.via == "bxctl":
        uid = f" (uid {surface.uid})" if surface.uid is not None else ""
        return (f"in the terminal{uid}",)
    said: list[str | Quote] = []
    if surface.user is not None:
        said += ["@", Quote(surface.user)]
    if surface.post is not None:
        said += [", " if said else "", "post ", Quote(surface.post)]
    return ("on Mattermost", *((" (", *said, ")") if said else ()))


def _why_edit(edit: WhyEdit) -> list[Line | Block]:
    parts: list[Line | Block] = [
        line(
            Quote(edit.id),
            "  ",
            Quote(edit.time),
            f"  {edit.action} {edit.file}  ",
            *_session(edit.session),
            "  call ",
            Quote(edit.call),
            depth=1,
        ),
        line(
            *who_decided(edit.decided),
            *(("  (approval ", Quote(edit.approval), ")") if edit.approval else ()),
            depth=2,
        ),
    ]
    if edit.taint is not None:
        label = str(edit.taint.class_) + (", untrusted" if edit.taint.untrusted else "")
        parts.append(line(f"the session's label when decided: {label}", depth=2))
        if edit.taint.untrusted:
            parts.append(
                line(
                    "! the session had read untrusted content (a web page, a file, a post) "
                    "before this call: check the entry says what you mean",
                    depth=2,
                )
            )
    if edit.owner_said is not None:
        parts += [line("you had said:", depth=2), Block(edit.owner_said, depth=2)]
    if edit.previous is not None:
        parts += [line("before this edit it read:", depth=2), Block(edit.previous, depth=2)]
    if isinstance(edit.decided, proto.OwnerApproved) and edit.decided.proposed is not None:
        parts += [
            line("approved with your changes; boxmaker had proposed:", depth=2),
            Block(edit.decided.proposed, depth=2),
        ]
    return parts


def describe_why(why: MemoryWhyReply, part: str) -> Answer:
    """Each entry holding `part`, and the story of its edits, newest first."""
    found: list[WhyEntry] = why.entries
    if not found:
        return Answer(
            (line("no entry of memory.md, user.md or archive.md holds ", Quote(part)),), ok=False
        )
    parts: list[Line | Block] = []
    for entry in found:
        parts += [line(f"{NAMES[entry.file]}:"), Block(entry.entry)]
        if not entry.edits:
            parts.append(line("written by hand in the file (no edit recorded)", depth=1))
        for edit in entry.edits:
            parts += _why_edit(edit)
    if why.omitted:
        parts.append(
            line(f"… and {why.omitted:,} more entries hold it; give more of the one you mean")
        )
    return Answer(tuple(parts))
