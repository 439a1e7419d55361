"""The owner's own memory edits, and why an entry is there (ARCHITECTURE §6a).

`bxctl memory add|replace|remove|why|undo` and the chat's `/remember`, `/forget`, `/why`
and `/undo` are the same functions here: each edit goes to brokerd's owner socket as a
`memory_edit` (decided `owner`, applied by memoryd with the spec's rules), and the
answer is memoryd's sentence. An entry is named by any part of it: `memory_why` lists the
entries holding the part, and the owner confirms the whole entry before it changes.
Everything read back (entries, what the owner said, ids) is outside text, shown only
through the terminal rendering.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec

import entries
import proto
from proto import (
    EditRecord,
    MemoryEdit,
    MemoryHistory,
    MemoryHistoryReply,
    MemoryWhy,
    MemoryWhyReply,
    ToolResponse,
    WhyEdit,
    WhyEntry,
)

from ._common import CommandError, Sockets, ask, bxctl, inline, print_json

__all__ = [
    "Confirm",
    "describe_args",
    "describe_why",
    "find_entry",
    "memory_add",
    "memory_remove",
    "memory_replace",
    "memory_undo",
    "memory_why",
    "owner_edit",
    "surface_words",
    "terminal_confirm",
]

Confirm = Callable[[str], Awaitable[bool]]
"""Asks the owner a y/N question (the text already rendered); True only for yes."""

BXCTL = proto.Surface(via="bxctl")
"""Where these edits are made; brokerd fills in the uid from the socket itself."""

_FILES: dict[str, proto.MemoryFile] = {"memory.md": "memory", "user.md": "user"}
_NAMES = {"memory": "memory.md", "user": "user.md", "archive": "archive.md"}


def terminal_confirm(*, yes: bool, what: str) -> Confirm:
    """y/N on the terminal for a command line; `--yes` answers for scripts.

    The change is shown either way.

    With no terminal to ask on and no `--yes`, nothing is changed: the command says so.
    """

    async def confirm(question: str) -> bool:
        if not yes and not sys.stdin.isatty():
            raise CommandError(
                f"{what} needs a y/N answer and standard input is not a terminal; "
                "nothing was changed. Run it on a terminal, or add --yes to confirm in a script"
            )
        print(question)  # with --yes too: what changed stays in the script's log
        if yes:
            return True
        import trio  # here, not at the top: `bxctl approvals list` imports this module

        answer = await trio.to_thread.run_sync(input, "change it? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    return confirm


def _indented(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in proto.for_terminal(text).split("\n"))


def describe_args(args: proto.MemoryArgs) -> str:
    """An edit as the owner reads it before confirming: every entry whole."""
    name = _NAMES[args.file]
    match args:
        case proto.MemoryAdd(text=text):
            return f"add to {name}:\n{_indented(text)}"
        case proto.MemoryReplace(old=old, text=text):
            return f"replace in {name}:\n{_indented(old)}\n  with:\n{_indented(text)}"
        case proto.MemoryRemove(old=old):
            return f"remove from {name}:\n{_indented(old)}"
        case proto.MemoryConsolidate(entries=items):
            lines = [f"rewrite {name} to exactly these entries, in this order:"]
            for item in items:
                if item.fate == "new":
                    lines.append(_indented(item.text or "", "  + "))
                elif item.fate == "keep":
                    lines.append(_indented(item.old or "", "    "))
                else:
                    lines.append(_indented(item.old or "", "  - "))
            return "\n".join(lines)
    raise AssertionError(f"unhandled {args!r}")  # every action is matched above


async def owner_edit(
    home: Path, args: proto.MemoryArgs, *, session: str | None = None, undoes: str | None = None
) -> int:
    """Send one owner's edit to brokerd and print memoryd's sentence; 1 if it was refused."""
    request = MemoryEdit(
        arguments=msgspec.json.encode(args).decode(), surface=BXCTL, session=session, undoes=undoes
    )
    path = Sockets(home).path(proto.OWNER_BROKER)
    reply = await ask(path, proto.OWNER_BROKER, request, ToolResponse)
    print(proto.for_terminal(reply.content))
    if reply.status != "ok":
        return 1
    if "next session" not in reply.content:
        print("it takes effect in the next session")
    return 0


async def _why(home: Path, part: str) -> list[WhyEntry]:
    path = Sockets(home).path(proto.OWNER_MEMORY)
    reply = await ask(path, proto.OWNER_MEMORY, MemoryWhy(part=part), MemoryWhyReply)
    return reply.entries


async def find_entry(
    home: Path, part: str, file: proto.MemoryFile | None
) -> tuple[proto.MemoryFile, str]:
    """The one entry of `file` (of memory.md or user.md when None) holding `part`.

    An entry that is `part` exactly wins over others merely holding it, so a short entry
    inside a longer one can still be named.

    Raises:
        CommandError: No entry holds it, or several do (each shown, to say more of one).
    """
    part = part.strip()
    if not part:
        raise CommandError("say which entry: any part of its text")
    found = [
        e
        for e in await _why(home, part)
        if e.file != "archive" and (file is None or e.file == file)
    ]
    exact = [e for e in found if e.entry == part]
    chosen = exact or found
    where = _NAMES[file] if file is not None else "memory.md or user.md"
    if not chosen:
        raise CommandError(
            f"no entry of {where} holds {inline(part)}; `{bxctl('memory show')}` shows them all"
        )
    if len(chosen) > 1:
        shown = "; ".join(f"{_NAMES[e.file]}: {inline(e.entry)}" for e in chosen)
        raise CommandError(
            f"{len(chosen)} entries of {where} hold {inline(part)}: {shown}. Give more of "
            "the one you mean"
        )
    entry = chosen[0]
    assert entry.file != "archive"
    return entry.file, entry.entry


async def memory_add(
    home: Path, text: str, file: proto.MemoryFile, *, session: str | None = None
) -> int:
    """Add one entry: the owner's own edit, applied as it is typed."""
    if not text.strip():
        raise CommandError("say what to remember: `bxctl memory add 'I prefer answers in UTC'`")
    return await owner_edit(home, proto.MemoryAdd(file=file, text=text), session=session)


async def memory_replace(
    home: Path,
    part: str,
    text: str,
    file: proto.MemoryFile | None,
    *,
    confirm: Confirm,
    session: str | None = None,
) -> int:
    """Replace the entry holding `part` with `text`, once the owner confirms it."""
    if not text.strip():
        raise CommandError("the new text is empty; to remove the entry, use `memory remove`")
    found, old = await find_entry(home, part, file)
    args = proto.MemoryReplace(file=found, old=old, text=text)
    if not await confirm(describe_args(args)):
        print("nothing changed")
        return 1
    return await owner_edit(home, args, session=session)


async def memory_remove(
    home: Path,
    part: str,
    file: proto.MemoryFile | None,
    *,
    confirm: Confirm,
    session: str | None = None,
) -> int:
    """Remove the entry holding `part`, once the owner confirms it."""
    found, old = await find_entry(home, part, file)
    args = proto.MemoryRemove(file=found, old=old)
    if not await confirm(describe_args(args)):
        print("nothing changed")
        return 1
    return await owner_edit(home, args, session=session)


def surface_words(decision: str | None, surface: proto.Surface | None) -> str:
    """Who decided and where: `approved in the terminal (uid 1000)`, `your own edit, …`."""
    where = ""
    if surface is not None and surface.via == "bxctl":
        uid = f" (uid {surface.uid})" if surface.uid is not None else ""
        where = f"in the terminal{uid}"
    elif surface is not None:
        said = ", ".join(
            p
            for p in (
                f"@{inline(surface.user)}" if surface.user else "",
                f"post {inline(surface.post)}" if surface.post else "",
            )
            if p
        )
        where = f"on Mattermost ({said})" if said else "on Mattermost"
    if decision == "owner":
        return "your own edit" + (f", {where}" if where else "")
    if decision is None:
        return "decided before boxmaker recorded who decided"
    return f"{decision} {where}".strip()


def _why_edit(edit: WhyEdit) -> list[str]:
    session = (
        "outside any session"
        if edit.session == proto.OWNER_SESSION
        else f"session {inline(edit.session)}"
    )
    lines = [
        f"  {inline(edit.id)}  {inline(edit.time)}  {inline(edit.action)} "
        f"{inline(edit.file)}  {session}  call {inline(edit.call)}",
        f"    {surface_words(edit.decision, edit.surface)}"
        + (f"  (approval {inline(edit.approval)})" if edit.approval else ""),
    ]
    if edit.taint is not None:
        label = f"{edit.taint.class_}" + (", untrusted" if edit.taint.untrusted else "")
        lines.append(f"    the session's label when decided: {label}")
        if edit.taint.untrusted:
            lines.append(
                "    ! the session had read untrusted content (a web page, a file, a post) "
                "before this call: check the entry says what you mean"
            )
    if edit.owner_said is not None:
        lines.append("    you had said:")
        lines.append(_indented(edit.owner_said, "      "))
    if edit.previous is not None:
        lines.append("    before this edit it read:")
        lines.append(_indented(edit.previous, "      "))
    if edit.proposed is not None:
        lines.append("    approved with your changes; boxmaker had proposed:")
        lines.append(_indented(edit.proposed, "      "))
    return lines


def describe_why(found: list[WhyEntry], part: str) -> str:
    """Each entry holding `part`, and the story of its edits, newest first."""
    if not found:
        return f"no entry of memory.md, user.md or archive.md holds {inline(part)}"
    blocks = []
    for entry in found:
        lines = [f"{_NAMES[entry.file]}:", _indented(entry.entry)]
        if not entry.edits:
            lines.append("  written by hand in the file (no edit recorded)")
        for edit in entry.edits:
            lines.extend(_why_edit(edit))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


async def memory_why(home: Path, part: str, *, as_json: bool = False) -> int:
    """Where each entry holding `part` came from."""
    if not part.strip():
        raise CommandError("say what to look for: any part of an entry's text")
    found = await _why(home, part.strip())
    if as_json:
        print_json(found)
    else:
        print(describe_why(found, part.strip()))
    return 0


async def _journal(home: Path) -> list[EditRecord]:
    """The edit journal, newest first."""
    path = Sockets(home).path(proto.OWNER_MEMORY)
    edits: list[EditRecord] = []
    before: int | None = None
    while before != 0:
        request = MemoryHistory(before=before)
        reply = await ask(path, proto.OWNER_MEMORY, request, MemoryHistoryReply)
        edits += reversed(reply.edits)
        before = reply.older if reply.edits else 0
    return edits


async def memory_undo(
    home: Path, edit: str | None, *, confirm: Confirm, session: str | None = None
) -> int:
    """Undo one applied edit (the last by default) with its inverse, once confirmed."""
    journal = await _journal(home)
    if not journal:
        raise CommandError("there is no memory edit to undo yet")
    if edit is None:
        record = journal[0]
    else:
        wanted = edit.strip()
        matches = [r for r in journal if proto.edit_id(r) == wanted]
        if not matches:
            raise CommandError(
                f"no memory edit {inline(wanted)}; `{bxctl('memory history')}` shows each edit's id"
            )
        record = matches[0]
    shown = inline(proto.edit_id(record))
    file = _FILES.get(record.file)
    if record.action == "unjournalled" or file is None:
        raise CommandError(
            f"{shown} is a change made by hand in {inline(record.file)}, not an edit "
            "boxmaker applied; change the file back with an editor"
        )
    undo = entries.inverse(file, record.before, record.after)
    question = (
        f"edit {shown}: {inline(record.action)} {inline(record.file)} "
        f"({inline(record.time)}, session {inline(record.session)})\n"
        f"its undo would {describe_args(undo)}"
    )
    if record.moved:
        question += "\n  (entries it moved to archive.md stay there too: the archive only grows)"
    if not await confirm(question):
        print("nothing changed")
        return 1
    return await owner_edit(home, undo, session=session, undoes=proto.edit_id(record))
