"""memoryd's part of a forget: which of its files hold a text, and the plan that takes it out.

Blocking; run in a worker thread under the edit lock (no memory edit and no recall-log
line is written meanwhile).

- memory.md and user.md: the entries holding the text are removed whole (a `WholeEdit`
  of the file), and the journal gets a line of its own for the change (`HandChange`
  marked `forgotten`, its `before` the file's entries with the text replaced by the
  marker, its `after` the file as it now is), so the journal's last line still says what
  the file holds and the next start's `reconcile` sees no hand change.
- archive.md: the records whose entry holds it are removed whole (a `WholeEdit`); it is
  otherwise append-only.
- the journal (`edits/*.jsonl`): every line keeps its place, its ids and its approval id;
  its text fields (`before`, `after`, `moved`, `arguments`, `proposed`) are redacted and
  the line is marked `forgotten` with the plan's id (a `LinesEdit`).
- the recall log (`recalls/*.jsonl`): each line's `query` is redacted (a `LinesEdit`).

The journal lines to append and the index's part (`IndexSteps`, see `_index`) live in a
file of their own beside the plan (`<plan>.steps.json`): the plan's Struct is proto's,
the same for every role. Neither file holds the text.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

import entries
import proto
from proto import ForgetPlan, HandChange, LinesEdit, WholeEdit

from ._files import MemoryDir

__all__ = [
    "PLAN_DIR",
    "FilesPlan",
    "ForgetSteps",
    "RowStep",
    "append_journal_lines",
    "holding_entries",
    "plan_files",
    "raw_holders",
    "read_steps",
    "remove_steps",
    "text_hash",
    "write_steps",
]

log = logging.getLogger("memoryd.forget")

PLAN_DIR = ".forget"
"""The plan directory, under memory/ (memoryd's root for plan paths)."""

UNDECIDED_AFTER_S = 3600.0
"""An uncommitted plan older than this was never decided: deleted at start."""

_JOURNAL_TEXT = ("before", "after", "moved", "arguments", "proposed")
"""A journal line's fields that hold text; the others are ids and are kept."""
_DECIDED_TEXT = ("proposed",)
_RECALL_TEXT = ("query",)

_encoder = msgspec.json.Encoder()
_FILES: tuple[proto.MemoryFile, ...] = ("memory", "user")


def text_hash(text: str) -> str:
    """The hash a row step keeps of a row's text (never the text)."""
    return hashlib.sha256(text.encode()).hexdigest()


class RowStep(msgspec.Struct, frozen=True, kw_only=True):
    """One index row to put back redacted: its rowid, its text's hash now, its text after."""

    rowid: int
    old: str
    new: str


class ForgetSteps(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a plan does besides its file edits: no text in it either."""

    journal: list[str] = msgspec.field(default_factory=list)
    """Journal lines to append once the file edits are applied (one per memory file whose
    entries the forget removed); each is appended once (found by its `forgotten` id)."""
    rows: list[RowStep] = msgspec.field(default_factory=list)
    """Index rows of session logs to put back redacted, under the same rowid and source."""
    archive: bool = False
    """Whether the index's archive rows are read again from archive.md (rewritten)."""


def _steps_path(directory: Path, plan: str) -> Path:
    return directory / f"{plan}.steps.json"


def write_steps(directory: Path, plan: str, steps: ForgetSteps) -> None:
    """Write a plan's steps atomically beside it (before the plan itself)."""
    directory.mkdir(mode=0o700, exist_ok=True)
    proto.write_atomically(_steps_path(directory, plan), _encoder.encode(steps))


def read_steps(directory: Path, plan: str) -> ForgetSteps:
    """A plan's steps; none when the file is missing (a plan with nothing besides edits)."""
    try:
        data = _steps_path(directory, plan).read_bytes()
    except FileNotFoundError:
        return ForgetSteps()
    return msgspec.json.decode(data, type=ForgetSteps)


def remove_steps(directory: Path, plan: str) -> None:
    """Delete a plan's steps (after the plan), if present."""
    _steps_path(directory, plan).unlink(missing_ok=True)


def stale_plans(directory: Path, now_s: float | None = None) -> Iterator[str]:
    """The ids of uncommitted plans older than an hour (forgets never decided)."""
    now = time.time() if now_s is None else now_s
    for path in proto.plan_paths(directory):
        plan = proto.read_plan(directory, path.stem)
        if (
            plan is not None
            and not plan.committed
            and now - path.stat().st_mtime > UNDECIDED_AFTER_S
        ):
            yield plan.plan


# -- what holds it --------------------------------------------------------------------


def _redact_fields(value: Any, fields: tuple[str, ...], needle: str) -> bool:
    """Redact `fields` of a decoded JSON object in place; whether any held `needle`."""
    changed = False
    for key in fields:
        if key in value and proto.holds_value(value[key], needle):
            value[key] = proto.redact_value(value[key], needle)
            changed = True
    return changed


def redact_journal_line(line: bytes, needle: str, plan: str) -> bytes | None:
    """A journal line with its text fields redacted and marked forgotten; None if untouched.

    A line that is not a JSON object (torn, damaged) is redacted as text, so damage never
    hides a copy.
    """
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        return proto.redact_line(line, needle)
    changed = _redact_fields(value, _JOURNAL_TEXT, needle)
    decided = value.get("decided")
    if isinstance(decided, dict):
        changed = _redact_fields(decided, _DECIDED_TEXT, needle) or changed
    if not changed:
        return None
    value["forgotten"] = plan
    return _encoder.encode(value)


def redact_recall_line(line: bytes, needle: str) -> bytes | None:
    """A recall-log line with its query redacted; None if it does not hold `needle` there."""
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        return proto.redact_line(line, needle)
    return _encoder.encode(value) if _redact_fields(value, _RECALL_TEXT, needle) else None


def _lines_edit(root: Path, path: Path, redact: Any) -> LinesEdit | None:
    lines = path.read_bytes().split(b"\n")
    steps = []
    for number, line in enumerate(lines):
        new = redact(line)
        if new is not None and new != line:
            steps.append(
                proto.LineEdit(line=number, old=hashlib.sha256(line).hexdigest(), new=new.decode())
            )
    if not steps:
        return None
    return LinesEdit(path=path.relative_to(root).as_posix(), lines=steps)


def holding_entries(memory: MemoryDir, needle: str) -> list[proto.ForgetEntry]:
    """The entries of memory.md, user.md and archive.md holding `needle` (removed whole)."""
    found: list[proto.ForgetEntry] = []
    for file in _FILES:
        name = entries.file_name(file)
        found += [
            proto.ForgetEntry(file=file, entry=entry)
            for entry in _entries_of(memory, name)
            if proto.holds(entry, needle)
        ]
    text = _read_text(memory.path("archive.md"))
    archived, _ = entries.parse_archive(text)
    found += [
        proto.ForgetEntry(file="archive", entry=a.text)
        for a in archived
        if proto.holds(a.text, needle)
    ]
    return found


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _entries_of(memory: MemoryDir, name: str) -> tuple[str, ...]:
    try:
        return entries.parse(_read_text(memory.path(name)), name=name)
    except entries.ParseError:
        return ()


def near_entries(memory: MemoryDir, needle: str) -> list[str]:
    """Entries of the three files holding every word of `needle` but not `needle`."""
    texts = [e for name in ("memory.md", "user.md") for e in _entries_of(memory, name)]
    archived, _ = entries.parse_archive(_read_text(memory.path("archive.md")))
    texts += [a.text for a in archived]
    return [t for t in texts if proto.is_near(t, needle)]


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
    kept: list[str] = []
    preamble, *records = chunks
    kept += [proto.redact(line, needle) for line in preamble]
    for record in records:
        entry = "\n".join(record[1:])
        if not proto.holds(entry, needle):
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
    now = proto.utc_now()
    for file in _FILES:
        name = entries.file_name(file)
        path = memory.path(name)
        try:
            data = path.read_bytes()
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
            time=proto.utc_stamp(now),
            file=name,
            before=[proto.redact(e, needle) for e in current],
            after=list(kept),
            forgotten=plan,
        )
        journal.append(_encoder.encode(line).decode())
    archive = memory.path("archive.md")
    try:
        data = archive.read_bytes()
    except FileNotFoundError:
        data = b""
    text = data.decode("utf-8", errors="replace")
    if proto.holds(text, needle):
        before, _ = entries.parse_archive(text)
        after = _archive_without(text, needle)
        edits.append(proto.whole_edit("archive.md", data, after.encode()))
        counts["archive.md"] = len(before) - len(entries.parse_archive(after)[0])
    for store, directory, redact in (
        ("journal", memory.edits, lambda line: redact_journal_line(line, needle, plan)),
        ("recall log", memory.recalls, lambda line: redact_recall_line(line, needle)),
    ):
        for path in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
            edit = _lines_edit(root, path, redact)
            if edit is not None:
                edits.append(edit)
                counts[store] = counts.get(store, 0) + len(edit.lines)
    return FilesPlan(edits=edits, journal=journal, counts=counts)


def apply_plan_files(memory: MemoryDir, plan: ForgetPlan, steps: ForgetSteps) -> list[str]:
    """Apply a plan's file edits and append its journal lines, idempotently; the conflicts."""
    conflicts: list[str] = []
    for edit in plan.edits:
        try:
            outcome = proto.apply_edit(memory.root, edit)
        except ValueError as exc:
            conflicts.append(str(exc))
            continue
        conflicts += outcome.conflicts
    append_journal_lines(memory, steps.journal)
    return conflicts


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


def raw_holders(paths: list[Path], needle: str) -> list[str]:
    """The files among `paths` whose bytes hold `needle` as given or lowered (utf-8)."""
    import mmap

    wanted = {needle.encode(), needle.lower().encode()}
    found: list[str] = []
    for path in paths:
        try:
            with path.open("rb") as f:
                if path.stat().st_size == 0:
                    continue
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    if any(data.find(w) >= 0 for w in wanted):
                        found.append(str(path))
        except FileNotFoundError:
            continue
    return found


def memory_files(memory: MemoryDir) -> list[Path]:
    """Every file memoryd writes under memory/ that may hold a text (and the plan dir)."""
    paths = [memory.path(name) for name in ("memory.md", "user.md", "archive.md")]
    for directory in (memory.edits, memory.recalls, memory.root / PLAN_DIR):
        if directory.is_dir():
            paths += sorted(p for p in directory.iterdir() if p.is_file())
    return paths
