"""memoryd's part of a forget: its files and its index, as one `proto.ForgetStore`.

The part itself (prepare, apply, abort, recovery, and their answers) is `proto.ForgetPart`;
this module says what memoryd's stores hold and how a text is taken out of them:

- memory.md and user.md: the entries holding the text are removed whole (a `WholeEdit`),
  and the journal gets a line of its own for the change (a `HandChange` marked
  `forgotten`, its `before` the entries with the text replaced by the marker), so the
  journal's last line still says what the file holds and `reconcile` sees no hand change.
- archive.md: the records whose entry holds it are removed whole; it is otherwise
  append-only.
- the journal (`edits/*.jsonl`) and the recall log (`recalls/*.jsonl`): each line holding
  the text is redacted as its record kind says (`proto.redact_line`); a journal line is
  marked `forgotten` with the plan's id (its edit can no longer be undone).
- the index: each session row holding it is put back redacted under the same rowid, the
  archive's rows are read again from archive.md, and the WAL is truncated (`_index`).

The journal lines to append and the index rows ride in the plan's `steps`. Every request
holds the edit lock (no memory edit meanwhile), the recall log's lock while files are
rewritten (no line lost to a rewrite), and the whole index (`Index.forgetting`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import trio

import entries
import proto
from proto import ForgetLooked, HandChange, Holding, LinesEdit, ServiceError, WholeEdit

from ._edits import EditApplier
from ._files import MemoryDir
from ._index import RUNBOOK, Index, IndexDamaged

__all__ = ["NEAR_MAX", "SNIPPET_CHARS", "MemoryForget", "MemorySteps"]

log = logging.getLogger("memoryd.forget")

NEAR_MAX = 10
SNIPPET_CHARS = 160

_ENTRY_FILES = ("memory.md", "user.md", "archive.md")
_FILES: tuple[proto.MemoryFile, ...] = ("memory", "user")
_encoder = msgspec.json.Encoder()


class MemorySteps(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What memoryd's plan does besides its file edits: no text in it either."""

    journal: list[str] = msgspec.field(default_factory=list)
    """Journal lines to append once the file edits are applied (one per memory file whose
    entries the forget removed); each is appended once (known by its bytes)."""
    rows: list[proto.LineEdit] = msgspec.field(default_factory=list)
    """Index rows of session logs to put back redacted: `line` is the rowid."""
    archive: bool = False
    """Whether the index's archive rows are read again from archive.md."""


def holdings_of(counts: dict[str, int]) -> list[Holding]:
    """The counts of a plan as the owner reads them (no text); stores holding nothing left out."""
    found: list[Holding] = []
    removed = {name: counts[name] for name in _ENTRY_FILES if counts.get(name)}
    if removed:
        found.append(
            Holding(
                store="memory files",
                count=sum(removed.values()),
                unit="entries",
                names=list(removed),
            )
        )
    for store, unit in (("journal", "lines"), ("recall log", "lines"), ("index", "rows")):
        if counts.get(store):
            found.append(Holding(store=store, count=counts[store], unit=unit))
    return found


def snippet(text: str, needle: str) -> str:
    """At most `SNIPPET_CHARS` of `text` on one line, around the first of `needle`'s words."""
    flat = " ".join(text.split())
    if len(flat) <= SNIPPET_CHARS:
        return flat
    folded = proto.fold(flat)
    starts = [at for word in proto.words(needle) if (at := folded.find(word)) >= 0]
    start = max(0, min(starts, default=0) - 40)
    width = SNIPPET_CHARS - 2
    start = max(0, min(start, len(flat) - width))
    piece = flat[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")


class MemoryForget:
    """memoryd's files and index as a part of every forget (`proto.ForgetPart` drives it)."""

    name = "memoryd"
    steps = MemorySteps

    def __init__(self, memory: MemoryDir, edits: EditApplier, index: Index) -> None:
        self.memory = memory
        self.root = memory.root
        self.edits = edits
        self.index = index
        self.files_lock = threading.Lock()
        """Held while the recall log gets a line, and while a forget rewrites files."""
        self.starting: bool | None = None
        """While the committed plans of a start are finished (before the index serves):
        whether the index was built anew at that start, from files the forget redacted
        already (then their rows' part has nothing to do). None once memoryd serves."""

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """The edit lock and the whole index, once the start-up work is done.

        The recovery at start is part of that work: it holds them before the catch-up.
        """
        if self.starting is None:
            await self.index.caught_up.wait()
        async with self.edits.lock, self.index.forgetting():
            yield

    async def look(self, text: str) -> ForgetLooked:
        """What of memoryd's stores holds `text`: counts, entries, near matches."""

        def files() -> tuple[list[proto.ForgetEntry], dict[str, int]]:
            return _all_entries(self.memory), plan_files(self.memory, text, "fg-look00").counts

        every, counts = await trio.to_thread.run_sync(files)
        found = [e for e in every if proto.holds(e.entry, text)]
        near = [e.entry for e in every if proto.is_near(e.entry, text)]
        try:
            counts["index"], near_rows = await self.index.look(text)
        except IndexDamaged as exc:
            raise ServiceError("memory-index-damaged", str(exc), runbook=RUNBOOK) from None
        shown: list[str] = []
        for near_text in [*near, *near_rows]:
            piece = snippet(near_text, text)
            if piece not in shown:
                shown.append(piece)
        return ForgetLooked(
            holdings=[h for h in holdings_of(counts) if h.store != "memory files"],
            entries=found,
            near=shown[:NEAR_MAX],
        )

    async def plan(
        self, plan: str, text: str, stored: proto.ForgetPlan[MemorySteps] | None
    ) -> proto.ForgetPlan[MemorySteps]:
        """The plan for files and index as they are now."""

        def make() -> proto.ForgetPlan[MemorySteps]:
            with self.files_lock:
                files = plan_files(self.memory, text, plan)
            counts = dict(files.counts)
            rows: list[proto.LineEdit] = []
            archive = "archive.md" in counts  # its records move: its rows are read again
            if self.index.is_open:
                forgetting = self.index.plan_forget(text)
                rows, archive = forgetting.rows, archive or forgetting.archive
                if forgetting.held:
                    counts["index"] = forgetting.held
            steps = MemorySteps(journal=files.journal, rows=rows, archive=archive)
            return proto.ForgetPlan(plan=plan, edits=files.edits, counts=counts, steps=steps)

        return await trio.to_thread.run_sync(make)

    async def apply(
        self,
        plan: proto.ForgetPlan[MemorySteps],
        text: str | None,
        keep: proto.Keep[MemorySteps],
    ) -> list[str]:
        """Apply the file edits, append the journal lines, then the index's part."""
        steps = plan.steps or MemorySteps()
        conflicts = await trio.to_thread.run_sync(self.apply_files, plan)
        if self.starting:
            return conflicts
        if not self.index.is_open:
            raise ServiceError(
                "index-unavailable",
                f"memoryd's files are done; its index is not open, so forget {plan.plan} "
                "finishes there once it is (memoryd's next start, or brokerd asking again)",
                runbook=RUNBOOK,
            )
        try:
            rows, vacuum = await trio.to_thread.run_sync(
                self.index.apply_forget, plan.plan, steps.rows, steps.archive
            )
            self.index.recount()
            if vacuum:
                log.info("vacuuming %s once: it was built before secure-delete", self.index.path)
                await trio.to_thread.run_sync(self.index.vacuum)
        except IndexDamaged as exc:
            raise ServiceError("memory-index-damaged", str(exc), runbook=RUNBOOK) from None
        if not await self.index.truncate_wal():
            rows.append("index: readers kept its WAL from being truncated")
        return conflicts + rows

    async def verify(self, plan: proto.ForgetPlan[MemorySteps], text: str | None) -> list[str]:
        """Where a file is not as planned; given the text, every file and row still holding it."""

        def files() -> list[str]:
            problems = [p for edit in plan.edits for p in proto.verify_file_edit(self.root, edit)]
            if text is not None:
                again = plan_files(self.memory, text, plan.plan)
                problems += [f"{edit.path}: still holds it" for edit in again.edits]
            return problems

        problems = await trio.to_thread.run_sync(files)
        if text is not None and self.index.is_open:
            problems += await trio.to_thread.run_sync(self.index.verify_forget, text)
        return problems

    def holdings(
        self, counts: dict[str, int], plan: proto.ForgetPlan[MemorySteps] | None
    ) -> list[Holding]:
        """The plan's counts as the owner reads them."""
        return holdings_of(counts)

    def apply_files(self, plan: proto.ForgetPlan[MemorySteps]) -> list[str]:
        """Apply a plan's file edits and journal lines, idempotently; blocking.

        At start too, before `reconcile` and any socket: a forget's own journal lines
        first, so no hand change is found where the forget removed entries.
        """
        steps = plan.steps or MemorySteps()
        with self.files_lock:
            conflicts = proto.apply_file_edits(self.root, plan.edits)
            append_journal_lines(self.memory, steps.journal)
        return conflicts


# -- what holds it --------------------------------------------------------------------


def _marked(line: proto.LineEdit, plan: str) -> proto.LineEdit:
    """A journal line's edit, the line marked forgotten by `plan` (its edit not undoable).

    A line that is not a journal record (torn, damaged) is redacted as text, unmarked.
    """
    try:
        value = msgspec.json.decode(line.new)
    except msgspec.DecodeError:
        return line
    if not isinstance(value, dict):
        return line
    return msgspec.structs.replace(line, new=_encoder.encode({**value, "forgotten": plan}).decode())


def _all_entries(memory: MemoryDir) -> list[proto.ForgetEntry]:
    """Every entry of memory.md, user.md and archive.md (a file that does not parse: none)."""
    found: list[proto.ForgetEntry] = []
    for file in _FILES:
        name = entries.file_name(file)
        try:
            parsed = entries.parse(_read_text(memory.path(name)), name=name)
        except entries.ParseError:
            continue
        found += [proto.ForgetEntry(file=file, entry=entry) for entry in parsed]
    archived, _ = entries.parse_archive(_read_text(memory.path("archive.md")))
    return found + [proto.ForgetEntry(file="archive", entry=a.text) for a in archived]


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _archive_without(text: str, needle: str) -> str:
    """archive.md without the records whose entry holds `needle`.

    Text before the first record is not an entry: it is redacted where it holds it.
    """
    chunks: list[list[str]] = [[]]
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if entries.is_archive_header(line):
            chunks.append([line])
        else:
            chunks[-1].append(line)
    preamble, *records = chunks
    kept = [proto.redact(line, needle) for line in preamble]
    for record in records:
        if not proto.holds("\n".join(record[1:]), needle):
            kept += record
    return "\n".join(kept)


class FilesPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The file edits of one forget, its extra journal lines, and what they change."""

    edits: list[LinesEdit | WholeEdit]
    journal: list[str]
    counts: dict[str, int]


def plan_files(memory: MemoryDir, needle: str, plan: str) -> FilesPlan:
    """Work out the edits that take `needle` out of memoryd's files (changing nothing)."""
    root = memory.root
    edits: list[LinesEdit | WholeEdit] = []
    journal: list[str] = []
    counts: dict[str, int] = {}
    now = proto.utc_stamp()
    for file in _FILES:
        name = entries.file_name(file)
        try:
            data = memory.path(name).read_bytes()
        except FileNotFoundError:
            continue
        text = data.decode("utf-8", errors="replace")
        try:
            current = entries.parse(text, name=name)
        except entries.ParseError:
            # Not a file of entries any more (a hand edit): take the text out where it is.
            if proto.holds(text, needle):
                edits.append(proto.whole_edit(name, data, proto.redact(text, needle).encode()))
                counts[name] = 1
            continue
        kept = tuple(e for e in current if not proto.holds(e, needle))
        if len(kept) == len(current):
            continue
        edits.append(proto.whole_edit(name, data, entries.render(kept).encode()))
        counts[name] = len(current) - len(kept)
        line = HandChange(
            time=now,
            file=name,
            before=[proto.redact(e, needle) for e in current],
            after=list(kept),
            forgotten=plan,
        )
        journal.append(_encoder.encode(line).decode())
    archive = memory.path("archive.md")
    data = archive.read_bytes() if archive.exists() else b""
    text = data.decode("utf-8", errors="replace")
    if proto.holds(text, needle):
        before, _ = entries.parse_archive(text)
        after = _archive_without(text, needle)
        edits.append(proto.whole_edit("archive.md", data, after.encode()))
        counts["archive.md"] = len(before) - len(entries.parse_archive(after)[0])
    for store, directory, kinds in (
        ("journal", memory.edits, proto.JOURNAL_KINDS),
        ("recall log", memory.recalls, (proto.RecallRecord,)),
    ):
        for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
            lines = proto.line_edits(path.read_bytes().split(b"\n"), needle, kinds)
            if store == "journal":
                lines = [_marked(line, plan) for line in lines]
            if lines:
                edits.append(LinesEdit(path=path.relative_to(root).as_posix(), lines=lines))
                counts[store] = counts.get(store, 0) + len(lines)
    return FilesPlan(edits=edits, journal=journal, counts=counts)


def append_journal_lines(memory: MemoryDir, lines: list[str]) -> None:
    """Append each of a forget's own journal lines that is not in the journal yet.

    A line is known by its bytes (its time is the plan's), not by its `forgotten` mark:
    a line the forget redacted carries the same mark.
    """
    if not lines:
        return
    there: set[bytes] = set()
    if memory.edits.is_dir():
        for path in memory.edits.glob("*.jsonl"):
            there.update(path.read_bytes().split(b"\n"))
    for raw in lines:
        if raw.encode() not in there:
            memory.append_journal(raw, proto.utc_now())
