"""Applying an approved memory edit: one writer, nothing half-done.

The order of writes is chosen so that a crash at any point loses nothing:
moved entries are appended to archive.md first, then memory.md (or user.md) is
replaced atomically, then the journal line is appended. A crash between the first two
leaves a moved entry in both files (found twice, never lost); a crash before the
journal line leaves an applied edit without its line (the journal never claims an
edit that did not happen). A failed write undoes the archive append.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable
from typing import Literal

import msgspec
import trio

import entries
import proto
from proto import AppliedEdit, HandChange, JournalLine, MemoryArgs, ToolRequest, ToolResponse

from ._files import MemoryDir, MemoryUnavailable

__all__ = ["EditApplier", "history_page", "read_history", "reconcile"]

log = logging.getLogger("memoryd.edits")

_encoder = msgspec.json.Encoder()


def _response(request: ToolRequest, status: Literal["ok", "error"], content: str) -> ToolResponse:
    return ToolResponse(call_id=request.call.id, status=status, content=content)


class EditApplier:
    """Applies `memory` tool calls one at a time, re-reading the file each time.

    A call is applied only with brokerd's proof that the owner approved exactly it: an
    approval id, and a token that is the HMAC of that id, the session, the call id, the
    tool and the exact arguments under the approval key (`proto.approval_token`), which
    only brokerd and memoryd can read. A missing, forged or mismatched token is refused
    and logged, and so is an approval used before (in this run, or in the edit journal).
    """

    def __init__(self, memory: MemoryDir, approval_key: bytes) -> None:
        self._memory = memory
        self._key = approval_key
        self._lock = trio.Lock()
        self._used: set[str] | None = None

    @property
    def lock(self) -> trio.Lock:
        """Held while an edit is applied; a forget holds it too (no edit meanwhile)."""
        return self._lock

    async def apply(self, request: ToolRequest) -> ToolResponse:
        """Apply one approved `memory` call; the reply's content is the sentence for the model."""
        try:
            args = proto.parse_memory_args(request.call.arguments)
        except proto.ToolArgsError as exc:
            return _response(request, "error", f"{exc}; nothing was changed")
        authority = request.authority
        if authority is None:
            return _response(
                request,
                "error",
                "memory edits need the owner's approval, and this request carries none; "
                "nothing was changed",
            )
        async with self._lock:
            refusal = await trio.to_thread.run_sync(self._check_approval, request, authority)
            if refusal is not None:
                return _response(request, "error", f"{refusal}; nothing was changed")
            # Not cancellable once started: a half-applied edit is worse than a late reply.
            return await trio.to_thread.run_sync(self.apply_now, request, authority, args)

    def _check_approval(self, request: ToolRequest, authority: proto.Authority) -> str | None:
        """Why the call's approval cannot be trusted, or None; a trusted one is used up."""
        approval = authority.approval
        expected = proto.approval_token(
            self._key,
            approval=approval,
            session=request.session,
            call=request.call.id,
            tool=request.call.name,
            arguments=request.call.arguments,
        )
        if not hmac.compare_digest(expected, authority.token):
            why = "has a token that is not brokerd's for this exact call"
            log.warning(
                "refused memory call %r in session %s: approval %r %s",
                request.call.id,
                request.session,
                approval,
                why,
            )
            return f"the approval {approval!r} could not be verified (it {why})"
        if self._used is None:
            self._used = {
                line.approval
                for line in read_history(self._memory, None)
                if isinstance(line, AppliedEdit) and line.approval
            }
        if approval in self._used:
            log.warning(
                "refused memory call %r in session %s: approval %r was used before",
                request.call.id,
                request.session,
                approval,
            )
            return f"the approval {approval!r} was used before"
        self._used.add(approval)
        return None

    def apply_now(
        self, request: ToolRequest, authority: proto.Authority, args: MemoryArgs
    ) -> ToolResponse:
        """Apply one parsed edit the owner decided, blocking; the caller holds the writer lock."""
        now = proto.utc_now()
        name = entries.file_name(args.file)
        try:
            current = self._memory.read_entries(args.file)
        except MemoryUnavailable as exc:
            return _response(request, "error", f"{exc}; nothing was changed")
        try:
            outcome = entries.apply_edit(current, args)
        except entries.EditRefused as exc:
            return _response(request, "error", str(exc))

        archive = self._memory.path("archive.md")
        records = "".join(
            entries.archive_record(entry, name=name, session=request.session, moved_at=now)
            for entry in outcome.moved
        )
        size_before = archive.stat().st_size if records else 0
        try:
            self._memory.append_archive(records)
            self._memory.write_entries(args.file, outcome.entries)
        except OSError as exc:
            if records:
                _truncate_quietly(archive, size_before)
            log.error("edit of %s by call %s failed: %s", name, request.call.id, exc)
            reason = exc.strerror or str(exc)
            return _response(
                request, "error", f"{name} could not be written ({reason}); nothing was changed"
            )

        record = AppliedEdit(
            time=proto.utc_stamp(now),
            session=request.session,
            call=request.call.id,
            approval=authority.approval,
            action=args.action,
            file=name,
            before=list(current),
            after=list(outcome.entries),
            moved=list(outcome.moved),
            arguments=request.call.arguments,
            taint=request.taint,
            decided=authority.decided,
        )
        try:
            self._memory.append_journal(_encoder.encode(record).decode(), now)
        except OSError as exc:
            # The edit is applied and stays applied; only its history line is missing.
            log.error(
                "applied edit of %s (call %s) has no journal line: %s", name, request.call.id, exc
            )
        size, limit = entries.chars(outcome.entries), entries.limit_for(args.file)
        log.info("applied %s to %s (%d of %d characters)", record.action, name, size, limit)
        return _response(request, "ok", entries.updated(name, size, limit))


def reconcile(memory: MemoryDir) -> list[HandChange]:
    """Journal what changed in memory.md and user.md since their last journal line.

    An edit applied just before a crash (renamed, but killed before its journal line), or
    a hand edit, leaves a file that is not what the journal last says. At start memoryd
    records the difference as a `HandChange` line, so the journal accounts for every
    state each file has been in. Files it cannot read are left to the memory block's
    refusal. Blocking: call it at start.
    """
    found: list[HandChange] = []
    recorded = _last_recorded(memory)
    for file in ("memory", "user"):
        name = entries.file_name(file)
        try:
            current = memory.read_entries(file)
        except MemoryUnavailable:
            continue
        last = recorded.get(name, [])
        if list(current) == list(last):
            continue
        now = proto.utc_now()
        record = HandChange(
            time=proto.utc_stamp(now), file=name, before=list(last), after=list(current)
        )
        memory.append_journal(_encoder.encode(record).decode(), now)
        log.warning(
            "%s is not what its journal last recorded (an edit applied just before a crash, "
            "or a hand edit); journalled the difference",
            name,
        )
        found.append(record)
    return found


def _truncate_quietly(path: os.PathLike[str], size: int) -> None:
    try:
        os.truncate(path, size)
    except OSError as exc:
        log.error("could not undo the archive append to %s: %s", path, exc)


def _last_recorded(memory: MemoryDir) -> dict[str, list[str]]:
    """What the journal last records of each file, by file name.

    The month files are read newest first, and no further once memory.md and user.md are
    both found: a start reads a month of edits, not a home's years (25 MB at three).
    """
    last: dict[str, list[str]] = {}
    if not memory.edits.is_dir():
        return last
    names = {entries.file_name("memory"), entries.file_name("user")}
    for path in sorted(memory.edits.glob("*.jsonl"), reverse=True):
        read = proto.EDIT_JOURNAL.read(path)
        if problems := read.problems():
            log.warning("%s", problems)
        for record in reversed(read.records):
            last.setdefault(record.file, list(record.after))
        if names <= last.keys():
            break
    return last


def read_history(memory: MemoryDir, file: proto.MemoryFile | None) -> list[JournalLine]:
    """Every journal record, oldest first, optionally of one file ("memory" or "user")."""
    wanted = None if file is None else entries.file_name(file)
    records: list[JournalLine] = []
    if not memory.edits.is_dir():
        return records
    for path in sorted(memory.edits.glob("*.jsonl")):
        read = proto.EDIT_JOURNAL.read(path)
        if problems := read.problems():
            log.warning("%s", problems)
        records += [r for r in read.records if wanted is None or r.file == wanted]
    return records


HISTORY_PAGE_BYTES = proto.MAX_FRAME - 4096
"""What the edits of one `memory_history_reply` may take: a frame, less its envelope."""


def history_page(
    records: list[proto.HistoryEdit], before: int | None, budget: int = HISTORY_PAGE_BYTES
) -> tuple[list[proto.HistoryEdit], int]:
    """The newest of `records[:before]` that fit in `budget` bytes, and how many are older.

    A journal grows with every edit (each line holds the file before and after), so
    after a few hundred edits of a full memory.md it no longer fits in one frame: the
    owner pages through it, newest first. At least one edit is always given.
    """
    return page_from_end(len(records), records.__getitem__, before, budget)


def page_from_end(
    count: int,
    edit: Callable[[int], proto.HistoryEdit],
    before: int | None,
    budget: int = HISTORY_PAGE_BYTES,
) -> tuple[list[proto.HistoryEdit], int]:
    """`history_page` over `count` edits that `edit(i)` gives, asking only for the page's."""
    end = count if before is None else min(before, count)
    start, size = end, 0
    page: list[proto.HistoryEdit] = []
    while start > 0:
        older = edit(start - 1)
        size += len(_encoder.encode(older)) + 1  # and its comma
        if size > budget and start < end:
            break
        page.append(older)
        start -= 1
    page.reverse()
    return page, start
