"""The owner's desk: runs the owner's `!` commands and answers them in their thread.

Reads go to memoryd's owner socket (`memory_why`, `memory_history`) and loopd
(`baseline_preview`, for `!memory`); every write is the owner's own memory edit, sent to
brokerd (`memory_edit`), which decides it `owner`, audits it with the post that asked, and
has memoryd apply it with the spec's rules and sentences. Everything outside the bridge's
own words (entries, sentences, ids) reaches a post only inside a code span or block.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import assert_never

import msgspec

import entries
import proto
from proto import (
    BaselinePreview,
    BaselinePreviewReply,
    EditRecord,
    MemoryEdit,
    MemoryHistory,
    MemoryHistoryReply,
    MemoryWhy,
    MemoryWhyReply,
    Surface,
    ToolResponse,
    WhyEdit,
    WhyEntry,
)

from ._api import Post
from ._commands import (
    COMMANDS_HELP,
    Forget,
    Help,
    OwnerCommand,
    Remember,
    ShowMemory,
    Undo,
    Unknown,
    Why,
)
from ._config import Settings
from ._outbound import Outbound
from ._state import session_of

__all__ = ["Desk"]

log = logging.getLogger("mattermostd")

WHY_LIMIT = 10
"""How many entries `!why` tells the story of in one answer."""


class Desk:
    """Runs the owner's commands for one bridge."""

    def __init__(self, settings: Settings, out: Outbound) -> None:
        self.s = settings
        self.out = out

    async def run(self, command: OwnerCommand, post: Post) -> None:
        """Run `command`, asked by the owner's `post`, and answer in its thread."""
        try:
            answer = await self._answer(command, post)
        except proto.CallFailed as exc:
            answer = f"**That did not work:** {proto.code_span(str(exc))}. Try again in a moment."
        await self.out.post(post.channel_id, post.root_id or post.id, answer)

    async def _answer(self, command: OwnerCommand, post: Post) -> str:
        match command:
            case Remember(text=text, file=file):
                args = {"action": "add", "file": file, "text": text}
                return await self._edit(args, post, done="Remembered")
            case Forget():
                return await self._forget(command, post)
            case Why(part=part):
                return _why(await self._why(part), part)
            case Undo():
                return await self._undo(command, post)
            case ShowMemory():
                preview = await proto.call(
                    self.s.loop_socket,
                    BaselinePreview(),
                    BaselinePreviewReply,
                    deadline_s=self.s.call_timeout_s,
                )
                block = entries.memory_block_of(preview.system) or "(no memory block)"
                return "What a new session gets now:\n" + proto.code_block(block, info="md")
            case Help():
                return COMMANDS_HELP
            case Unknown(problem=problem):
                return f"{problem}.\n\n{COMMANDS_HELP}"
            case _:
                assert_never(command)

    async def _edit(
        self, args: Mapping[str, object], post: Post, *, done: str, undoes: str | None = None
    ) -> str:
        request = MemoryEdit(
            arguments=msgspec.json.encode(args).decode(),
            surface=Surface(via="mattermost", user=self.s.owner_name, post=post.id),
            session=session_of(post.root_id or post.id),
            undoes=undoes,
        )
        reply = await proto.call(
            self.s.broker_socket, request, ToolResponse, deadline_s=self.s.call_timeout_s
        )
        said = proto.code_span(reply.content)
        if reply.status != "ok":
            return f"**Not done:** {said}"
        log.info("the owner's own edit from Mattermost (post %s): %s", post.id, args["action"])
        return f"**{done}:** {said}"

    async def _why(self, part: str) -> list[WhyEntry]:
        reply = await proto.call(
            self.s.memory_socket,
            MemoryWhy(part=part[:2000]),
            MemoryWhyReply,
            deadline_s=self.s.call_timeout_s,
        )
        return reply.entries

    async def _forget(self, command: Forget, post: Post) -> str:
        found = [
            e
            for e in await self._why(command.part)
            if e.file != "archive" and command.file in (None, e.file)
        ]
        if not found:
            return f"No entry of memory.md or user.md holds {proto.code_span(command.part)}."
        if len(found) > 1:
            listed = "\n".join(f"- {e.file}.md: {proto.code_span(e.entry)}" for e in found)
            return (
                f"{len(found)} entries hold {proto.code_span(command.part)}; name more of "
                f"the one to remove:\n{listed}"
            )
        [entry] = found
        if not command.confirmed:
            flag = " --user" if entry.file == "user" else ""
            return (
                f"This removes from {entry.file}.md:\n{proto.code_block(entry.entry)}\n"
                f"To remove it, post `!forget{flag} --yes` and the same words."
            )
        args = {"action": "remove", "file": entry.file, "old": entry.entry}
        return await self._edit(args, post, done="Forgotten")

    async def _undo(self, command: Undo, post: Post) -> str:
        reply = await proto.call(
            self.s.memory_socket,
            MemoryHistory(),
            MemoryHistoryReply,
            deadline_s=self.s.call_timeout_s,
        )
        edits = [e for e in reply.edits if e.decision is not None or e.approval]
        if command.edit is not None:
            edits = [e for e in edits if proto.edit_id(e) == command.edit]
        if not edits:
            wanted = f" {proto.code_span(command.edit)}" if command.edit else ""
            return f"There is no edit{wanted} to undo (`bxctl memory history` lists them)."
        edit = edits[-1]
        ident = proto.edit_id(edit)
        file: proto.MemoryFile
        if edit.file == "memory.md":
            file = "memory"
        elif edit.file == "user.md":
            file = "user"
        else:
            return f"Edit {proto.code_span(ident)} is not an edit of memory.md or user.md."
        inverse = msgspec.json.encode(entries.inverse(file, edit.before, edit.after)).decode()
        shown = proto.code_block(inverse, info="json")
        if not command.confirmed:
            return (
                f"Edit {proto.code_span(ident)} ({_edit_line(edit)}) is undone by:\n{shown}\n"
                f"To undo it, post `!undo {ident} --yes`."
            )
        return await self._edit(
            msgspec.json.decode(inverse), post, done=f"Undone {ident}", undoes=ident
        )


def _edit_line(edit: EditRecord) -> str:
    return f"{edit.action} of {edit.file}, {edit.time}"


def _who(edit: WhyEdit) -> str:
    surface = edit.surface
    if edit.decision == "owner":
        made = "your own edit"
    elif edit.proposed is not None:
        made = "approved by you with your changes"
    elif edit.decision == "approved" or edit.approval:
        made = "approved by you"
    else:
        made = "applied"
    if surface is None:
        return made
    if surface.via == "mattermost":
        where = "in Mattermost" + (
            f" (post {proto.code_span(surface.post)})" if surface.post else ""
        )
    else:
        where = "in the terminal" + (f" (uid {surface.uid})" if surface.uid is not None else "")
    return f"{made}, {where}"


def _why(found: list[WhyEntry], part: str) -> str:
    if not found:
        return f"No entry of memory.md, user.md or archive.md holds {proto.code_span(part)}."
    blocks = []
    for entry in found[:WHY_LIMIT]:
        lines = [f"**{entry.file}.md**: {proto.code_span(entry.entry)}"]
        if not entry.edits:
            lines.append("- written by hand in the file (no edit recorded)")
        for edit in entry.edits:
            lines.append(
                f"- {proto.code_span(edit.id)} {edit.action}, {edit.time}: {_who(edit)}; "
                f"session {proto.code_span(edit.session)}, call {proto.code_span(edit.call)}"
            )
            if edit.taint is not None and edit.taint.untrusted:
                lines.append(
                    "  **Careful:** that session had read untrusted content when it was decided."
                )
            if edit.owner_said:
                lines.append(f"  you had said: {proto.code_span(edit.owner_said)}")
            if edit.previous:
                lines.append(f"  it replaced: {proto.code_span(edit.previous)}")
            if edit.proposed:
                lines.append(f"  boxmaker had proposed: {proto.code_span(edit.proposed)}")
        blocks.append("\n".join(lines))
    more = len(found) - WHY_LIMIT
    if more > 0:
        blocks.append(f"… and {more} more; name more of the entry.")
    return "\n\n".join(blocks)
