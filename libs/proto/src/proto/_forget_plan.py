"""A forget's plans: the edits that take a text out of files, and the files that keep them.

A plan names, per file, what to change: a `LinesEdit` (lines by number, each with a hash
of the line as it is and the line as it will be, already redacted) or a `WholeEdit` (a
whole file, its hash and its text after). Applying one is idempotent: a line that hashes
to `old` is replaced, one that is `new` already is skipped, anything else is a conflict
to report, never overwritten. A plan never holds the text, so a role killed half-way
finishes from the plan alone. A store's own steps besides file edits (memoryd's index
rows) ride in the plan's `steps`, typed by the store.

`ForgetFiles` keeps one part's plans in its `.forget/` directory, one file a plan, and
`ended.jsonl` beside them: a line for each plan that ended, applied or aborted, so that
"finished here" and "never heard of here" are different answers. `StructFiles` is the one
way a Struct is kept in a file of its own (plans here, brokerd's ledgers).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Generic, Literal, TypeVar

import msgspec

from ._durable import append_line, fsync_dir, write_atomically
from ._forget import redact_line
from ._jsonl import JsonLines
from ._time import utc_stamp

__all__ = [
    "ENDED_FILE",
    "Ended",
    "FileEdit",
    "ForgetFiles",
    "ForgetPlan",
    "LineEdit",
    "LinesEdit",
    "NoSteps",
    "PlanId",
    "Stage",
    "StructFiles",
    "WholeEdit",
    "apply_file_edits",
    "is_plan_id",
    "line_edits",
    "new_plan_id",
    "verify_file_edit",
    "whole_edit",
]

_PLAN_ID = r"^fg-[0-9a-z]{6,40}$"
PlanId = Annotated[str, msgspec.Meta(pattern=_PLAN_ID)]
"""A forget's id: `fg-` and 6 to 40 lowercase letters and digits; it names files."""
_plan_id = re.compile(_PLAN_ID)

S = TypeVar("S")
T = TypeVar("T", bound=msgspec.Struct)


def is_plan_id(text: str) -> bool:
    """Whether `text` is a plan id (so it may name a file)."""
    return _plan_id.match(text) is not None


def new_plan_id() -> str:
    """A fresh plan id: `fg-` and 12 random lowercase letters and digits."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    return "fg-" + "".join(alphabet[b % 36] for b in os.urandom(12))


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class LineEdit(msgspec.Struct, frozen=True, kw_only=True):
    """Line `line` (0-based) of a file: its hash now, and its redacted text."""

    line: Annotated[int, msgspec.Meta(ge=0)]
    old: str
    new: str


class LinesEdit(msgspec.Struct, frozen=True, kw_only=True, tag="lines"):
    """Change some lines of a file; its line count and order are kept."""

    path: str
    """Relative to the part's own root (never absolute, never `..`)."""
    lines: list[LineEdit]


class WholeEdit(msgspec.Struct, frozen=True, kw_only=True, tag="whole"):
    """Replace a whole file: its hash now, and its content after."""

    path: str
    old: str
    new: str


FileEdit = LinesEdit | WholeEdit

Stage = Literal["prepared", "committed"]
"""A plan is `prepared` (nothing changed; the forget is not decided) until the coordinator
decides it; `committed` from then on, until it ends."""


class NoSteps(msgspec.Struct, frozen=True):
    """The steps of a store whose plan is file edits alone."""


class ForgetPlan(msgspec.Struct, Generic[S], frozen=True, kw_only=True, omit_defaults=True):
    """One part's plan of one forget: written before anything changes; no text in it."""

    plan: PlanId
    stage: Stage = "prepared"
    edits: list[FileEdit] = msgspec.field(default_factory=list)
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    """What it changes, by store (for the reply and the audit record): no text."""
    steps: S | None = None
    """The store's own steps besides file edits, if it has any."""
    committed: bool = False
    """How a plan written before `stage` said it was committed (read as `stage`)."""


class Ended(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A line of `ended.jsonl`: a plan that ended here, and how; no text."""

    plan: PlanId
    end: Literal["applied", "aborted"]
    time: str
    counts: dict[str, int] = msgspec.field(default_factory=dict)


ENDED_FILE = "ended.jsonl"
_ENDED: JsonLines[Ended] = JsonLines(Ended)


def _inside(root: Path, relative: str) -> Path:
    path = (root / relative).resolve()
    if (
        relative.startswith("/")
        or ".." in Path(relative).parts
        or not path.is_relative_to(root.resolve())
    ):
        raise ValueError(f"a plan names a path outside its root: {relative!r}")
    return root / relative


def line_edits(lines: Iterable[bytes], needle: str, kinds: Sequence[object] = ()) -> list[LineEdit]:
    """The edits that take `needle` out of a JSON-lines file's `lines` (no newlines).

    One per line that holds it, redacted as its record kind says (`redact_line`).
    """
    edits: list[LineEdit] = []
    for number, line in enumerate(lines):
        new = redact_line(line, needle, kinds)
        if new is not None:
            edits.append(LineEdit(line=number, old=_hash(line), new=new.decode()))
    return edits


def whole_edit(path: str, old: bytes, new: bytes) -> WholeEdit:
    """The edit that replaces a whole file (`old` as it is now) by `new`."""
    return WholeEdit(path=path, old=_hash(old), new=new.decode())


def apply_file_edits(root: Path, edits: Iterable[FileEdit]) -> list[str]:
    """Apply a plan's file edits, idempotently; the conflicts (places left as they were).

    A file is rewritten atomically (line count and order kept) only if a line changed.
    """
    conflicts: list[str] = []
    for edit in edits:
        try:
            conflicts += _apply(_inside(root, edit.path), edit)
        except ValueError as exc:
            conflicts.append(str(exc))
    return conflicts


def _apply(path: Path, edit: FileEdit) -> list[str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [f"{edit.path}: the file is gone"]
    if isinstance(edit, WholeEdit):
        now = _hash(data)
        if now == _hash(edit.new.encode()):
            return []
        if now != edit.old:
            return [f"{edit.path}: changed since the plan was made"]
        write_atomically(path, edit.new.encode())
        return []
    lines = data.split(b"\n")
    changed = False
    conflicts: list[str] = []
    for step in edit.lines:
        new = step.new.encode()
        if step.line >= len(lines):
            conflicts.append(f"{edit.path}:{step.line + 1}: the line is gone")
        elif _hash(lines[step.line]) == step.old:
            lines[step.line], changed = new, True
        elif lines[step.line] != new:
            conflicts.append(f"{edit.path}:{step.line + 1}: changed since the plan was made")
    if changed:
        write_atomically(path, b"\n".join(lines))
    return conflicts


def verify_file_edit(root: Path, edit: FileEdit) -> list[str]:
    """The places where an applied edit is not in the file (empty: all done)."""
    path = _inside(root, edit.path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [f"{edit.path}: the file is gone"]
    if isinstance(edit, WholeEdit):
        ok = _hash(data) == _hash(edit.new.encode())
        return [] if ok else [f"{edit.path}: not as planned"]
    lines = data.split(b"\n")
    return [
        f"{edit.path}:{step.line + 1}: not as planned"
        for step in edit.lines
        if step.line >= len(lines) or lines[step.line] != step.new.encode()
    ]


class StructFiles(Generic[T]):
    """Structs of one type, each in a file `<plan id><suffix>` of `directory`, written whole.

    The one way forget keeps its notes: a part's plans, brokerd's ledgers.
    """

    def __init__(self, directory: Path, kind: type[T], suffix: str = ".json") -> None:
        self.directory = directory
        self.suffix = suffix
        self._decoder = msgspec.json.Decoder(kind)

    def path(self, plan: str) -> Path:
        """The file of `plan`.

        Raises:
            ValueError: `plan` is not a plan id (it would name another file).
        """
        if not is_plan_id(plan):
            raise ValueError(f"not a forget id: {plan!r}")
        return self.directory / f"{plan}{self.suffix}"

    def read(self, plan: str) -> T | None:
        """The struct kept for `plan`, or None.

        Raises:
            ValueError: the file is damaged (it does not decode), or `plan` is no plan id.
        """
        try:
            data = self.path(plan).read_bytes()
        except FileNotFoundError:
            return None
        try:
            return self._decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise ValueError(f"{self.path(plan)} is damaged: {exc}") from None

    def write(self, plan: str, value: T) -> None:
        """Write (or rewrite) `plan`'s file atomically; the directory is made if missing."""
        self.directory.mkdir(mode=0o700, exist_ok=True)
        write_atomically(self.path(plan), msgspec.json.encode(value))

    def remove(self, plan: str) -> None:
        """Delete `plan`'s file, durably; nothing if there is none."""
        try:
            self.path(plan).unlink()
        except FileNotFoundError:
            return
        fsync_dir(self.directory)

    def ids(self) -> list[str]:
        """The plan ids that have a file here, sorted."""
        if not self.directory.is_dir():
            return []
        found = (p.name.removesuffix(self.suffix) for p in self.directory.glob(f"*{self.suffix}"))
        return sorted(plan for plan in found if is_plan_id(plan))


class ForgetFiles(Generic[S]):
    """One part's `.forget/` directory: its plans, and the plans that ended (`ended.jsonl`)."""

    def __init__(self, directory: Path, steps: type[S]) -> None:
        self.directory = directory
        self.plans: StructFiles[ForgetPlan[S]] = StructFiles(directory, ForgetPlan[steps])  # type: ignore[valid-type]

    def ended(self, plan: str) -> Ended | None:
        """How `plan` ended here, or None if it has not (or was never heard of)."""
        path = self.directory / ENDED_FILE
        if not path.exists():
            return None
        found = None
        for line in _ENDED.lines(path):
            if line.record is not None and line.record.plan == plan:
                found = line.record
        return found

    def end(self, plan: str, end: Literal["applied", "aborted"], counts: dict[str, int]) -> Ended:
        """Record that `plan` ended here, durably, then delete its plan file."""
        ended = Ended(plan=plan, end=end, time=utc_stamp(), counts=counts)
        self.directory.mkdir(mode=0o700, exist_ok=True)
        append_line(self.directory / ENDED_FILE, msgspec.json.encode(ended))
        self.plans.remove(plan)
        return ended
