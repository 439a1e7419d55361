"""Forget: what holds a text, how it is taken out, and the plans that outlive a crash.

A forget matches case-insensitively on decoded text: a JSON line is decoded first, and a
string that is itself a JSON object or array (a tool call's arguments) is decoded too, so
an escaped copy is found as surely as a plain one. Each occurrence becomes `MARKER`; the
rest of the string stays, so a session keeps its shape.

A plan names, per file, the lines to change: each with a hash of the line as it is and
the line as it will be, already redacted. Applying it is idempotent: a line that hashes
to `old` is replaced, one that hashes to `new`'s hash is already done, anything else is
a conflict to report, never overwritten. The plan never holds the text, so a role killed
half-way finishes from the plan alone.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import msgspec

from ._durable import fsync_dir, write_atomically
from ._ignorable import DEFAULT_IGNORABLE, is_default_ignorable

__all__ = [
    "FORGET_MAX_CHARS",
    "FORGET_MIN_CHARS",
    "MARKER",
    "EditOutcome",
    "ForgetPlan",
    "LineEdit",
    "LinesEdit",
    "PlanId",
    "WholeEdit",
    "apply_edit",
    "digest",
    "forget_problem",
    "holds",
    "holds_value",
    "is_near",
    "line_edits",
    "may_hold",
    "new_plan_id",
    "plan_paths",
    "read_plan",
    "redact",
    "redact_line",
    "redact_value",
    "remove_plan",
    "verify_edit",
    "whole_edit",
    "words",
    "write_plan",
]

MARKER = "[forgotten]"
"""What each occurrence of a forgotten text becomes."""

FORGET_MIN_CHARS = 2
FORGET_MAX_CHARS = 1000
"""A text to forget is 2 to 1000 characters once stripped: one character would wreck
every file, and a longer one is an entry, named by a part of it."""

_WORD = re.compile(r"\w+")


def forget_problem(text: str) -> str | None:
    """Why `text` cannot be forgotten as given, as a sentence; None when it can."""
    stripped = text.strip()
    if len(_fold(stripped)) < FORGET_MIN_CHARS:
        return f"say what to forget: at least {FORGET_MIN_CHARS} characters"
    if len(stripped) > FORGET_MAX_CHARS:
        return (
            f"that is {len(stripped)} characters; name what to forget in at most "
            f"{FORGET_MAX_CHARS} (a part of an entry is enough)"
        )
    if any(unicodedata.category(c) == "Cc" for c in stripped):
        return "what to forget cannot hold control characters (a newline, a tab, an escape)"
    return None


_INVISIBLE = re.compile(
    "[" + "".join(f"\\U{start:08x}-\\U{end:08x}" for start, end in DEFAULT_IGNORABLE) + "]"
)


def _fold(text: str) -> str:
    # Invisible characters (a zero-width space, a joiner) fold away: the owner reads
    # "55\u200b12" as 5512, and a copy they cannot see must not escape a forget.
    return _INVISIBLE.sub("", text).lower()


def holds(text: str, needle: str) -> bool:
    """Whether `text` holds `needle`, ignoring case."""
    return _fold(needle) in _fold(text)


def _spans(text: str, needle: str) -> list[tuple[int, int]]:
    """The non-overlapping spans of `text` whose lowered form is the lowered `needle`.

    `str.lower` can change a character's length (`İ` lowers to two), so the search runs
    on the lowered text and each match is mapped back to the characters it came from.
    """
    folded_needle = _fold(needle)
    starts: list[int] = []  # starts[k]: index in `text` of the k-th lowered character
    pieces: list[str] = []
    for i, c in enumerate(text):
        low = "" if is_default_ignorable(c) else c.lower()
        starts.extend([i] * len(low))
        pieces.append(low)
    folded = "".join(pieces)
    spans: list[tuple[int, int]] = []
    at = folded.find(folded_needle)
    while at >= 0:
        end = at + len(folded_needle)
        spans.append((starts[at], starts[end - 1] + 1))
        at = folded.find(folded_needle, end)
    return spans


def _replace(text: str, needle: str, by: str) -> str:
    out: list[str] = []
    last = 0
    for start, end in _spans(text, needle):
        if start < last:  # two matches mapped onto one character
            start = last
        out.append(text[last:start])
        out.append(by)
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(text: str, needle: str) -> str:
    """`text` with every occurrence of `needle` (any case) replaced by `MARKER`.

    The result never holds `needle`: where the marker itself, or the marker beside what
    is left, would make it again (a needle such as `forgot` or `]]`), occurrences are
    cut out instead, until none is left.
    """
    if not holds(text, needle):
        return text
    result = _replace(text, needle, MARKER)
    while holds(result, needle):
        result = _replace(result, needle, "")
    return result


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def holds_value(value: Any, needle: str, *, data: bool = False) -> bool:
    """Whether any string in a decoded JSON value holds `needle`.

    Keys count, and a string that is itself JSON (an object or an array) is decoded in
    turn and judged by what it decodes to, not by its escapes. Inside such a string
    (`data`: a tool call's arguments) numbers count too, written as JSON writes them: an
    argument `{"code": 7731}` holds "7731". A record's own numbers (counts, positions) are
    its shape, not what anyone said.
    """
    if isinstance(value, str):
        inner = _json_inside(value)
        return holds(value, needle) if inner is None else holds_value(inner, needle, data=True)
    if isinstance(value, dict):
        return any(holds(k, needle) or holds_value(v, needle, data=data) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_value(v, needle, data=data) for v in value)
    if data and _number(value):
        return holds(msgspec.json.encode(value).decode(), needle)
    return False


def redact_value(value: Any, needle: str, *, data: bool = False) -> Any:
    """A decoded JSON value with `needle` taken out of every string in it.

    A string that is JSON (an object or an array) is redacted inside and encoded again,
    so it stays JSON; any other string is redacted as text. Keys are redacted too.
    """
    if isinstance(value, str):
        inner = _json_inside(value)
        if inner is None:
            return redact(value, needle)
        if not holds_value(inner, needle, data=True):
            return value
        return msgspec.json.encode(redact_value(inner, needle, data=True)).decode()
    if isinstance(value, dict):
        return {redact(k, needle): redact_value(v, needle, data=data) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v, needle, data=data) for v in value]
    if data and _number(value) and holds_value(value, needle, data=True):
        return redact(msgspec.json.encode(value).decode(), needle)  # a number said: text now
    return value


def _json_inside(text: str) -> Any | None:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        inner = msgspec.json.decode(text)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    return inner if isinstance(inner, (dict, list)) else None


_ESCAPED = frozenset('"\\/')
"""What a JSON escape other than `\\u` can stand for, besides control characters."""


def may_hold(data: bytes, needle: str) -> bool:
    r"""False when JSON bytes (a line, a whole file) cannot hold `needle` once decoded.

    The quick test that lets a forget skip most of a large home. Without a `\u` escape,
    the only escapes stand for a quote, a backslash, a slash or a control character; a
    needle holding none of those can only be decoded from the same
    characters written plainly, so the raw text, lowered, must hold it. Nested JSON (a tool
    call's arguments) escapes its escapes, and is judged the same way. Anything else may
    hold it, and is decoded.
    """
    if b"\\u" in data or any(c in _ESCAPED or unicodedata.category(c) == "Cc" for c in needle):
        return True
    return holds(data.decode("utf-8", errors="replace"), needle)


def redact_line(line: bytes, needle: str) -> bytes | None:
    """The redacted form of one line of a JSON-lines file; None if it does not hold `needle`.

    A line that decodes as JSON is redacted value by value and encoded again; a line
    that does not (torn by a crash, damaged) is redacted as text, so damage never hides
    a copy.
    """
    if not may_hold(line, needle):
        return None
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError):
        text = line.decode("utf-8", errors="replace")
        if not holds(text, needle):
            return None
        return redact(text, needle).encode()
    if not holds_value(value, needle):
        return None
    return msgspec.json.encode(redact_value(value, needle))


def words(needle: str) -> list[str]:
    """The words of a text to forget, lowered, in order, each once."""
    seen: list[str] = []
    for word in _WORD.findall(_fold(needle)):
        if word not in seen:
            seen.append(word)
    return seen


def is_near(text: str, needle: str) -> bool:
    """A near match: `text` holds every word of `needle` (any case) but not `needle`.

    A preview offers these, so the owner can forget that wording too.
    """
    if holds(text, needle):
        return False
    needle_words = words(needle)
    if not needle_words:
        return False
    have = set(_WORD.findall(_fold(text)))
    return all(w in have for w in needle_words)


def digest(key: bytes, needle: str) -> str:
    """A keyed digest of a forgotten text (its lowered form).

    What a record may keep to say "this was forgotten" without keeping it, and without
    letting a reader of the file test guesses of a short secret.
    """
    import hmac

    return hmac.new(key, b"forget\x00" + _fold(needle).encode(), hashlib.sha256).hexdigest()


# -- plans -----------------------------------------------------------------------------


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
    """Relative to the role's own root (never absolute, never `..`)."""
    lines: list[LineEdit]


class WholeEdit(msgspec.Struct, frozen=True, kw_only=True, tag="whole"):
    """Replace a whole file: its hash now, and its content after."""

    path: str
    old: str
    new: str


FileEdit = LinesEdit | WholeEdit


class ForgetPlan(msgspec.Struct, frozen=True, kw_only=True):
    """One role's part of one forget: written before anything changes, deleted after."""

    plan: str
    committed: bool = False
    """False once prepared (nothing changed yet); true once the forget is decided and
    this role has begun to apply it: a committed plan is finished at the next start."""
    edits: list[LinesEdit | WholeEdit] = msgspec.field(default_factory=list)
    counts: dict[str, int] = msgspec.field(default_factory=dict)
    """What it changes, by store (for the reply and the audit record): no text."""


class EditOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What applying (or verifying) one file's edit found."""

    applied: int = 0
    skipped: int = 0
    conflicts: list[str] = msgspec.field(default_factory=list)


def _inside(root: Path, relative: str) -> Path:
    path = (root / relative).resolve()
    if (
        relative.startswith("/")
        or ".." in Path(relative).parts
        or not path.is_relative_to(root.resolve())
    ):
        raise ValueError(f"a plan names a path outside its root: {relative!r}")
    return root / relative


def line_edits(lines: Iterable[bytes], needle: str) -> list[LineEdit]:
    """The edits that take `needle` out of a JSON-lines file's `lines` (no newlines).

    One per line that holds it.
    """
    edits: list[LineEdit] = []
    for number, line in enumerate(lines):
        new = redact_line(line, needle)
        if new is not None:
            edits.append(LineEdit(line=number, old=_hash(line), new=new.decode()))
    return edits


def whole_edit(path: str, old: bytes, new: bytes) -> WholeEdit:
    """The edit that replaces a whole file (`old` as it is now) by `new`."""
    return WholeEdit(path=path, old=_hash(old), new=new.decode())


def apply_edit(root: Path, edit: LinesEdit | WholeEdit) -> EditOutcome:
    """Apply one file's edit, idempotently.

    The file is rewritten atomically (line count and order kept) only if a line changed.
    """
    path = _inside(root, edit.path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return EditOutcome(conflicts=[f"{edit.path}: the file is gone"])
    if isinstance(edit, WholeEdit):
        now = _hash(data)
        if now == _hash(edit.new.encode()):
            return EditOutcome(skipped=1)
        if now != edit.old:
            return EditOutcome(conflicts=[f"{edit.path}: changed since the plan was made"])
        write_atomically(path, edit.new.encode())
        return EditOutcome(applied=1)
    lines = data.split(b"\n")
    applied = skipped = 0
    conflicts: list[str] = []
    for step in edit.lines:
        if step.line >= len(lines):
            conflicts.append(f"{edit.path}:{step.line + 1}: the line is gone")
            continue
        now = _hash(lines[step.line])
        new = step.new.encode()
        if now == _hash(new):
            skipped += 1
        elif now == step.old:
            lines[step.line] = new
            applied += 1
        else:
            conflicts.append(f"{edit.path}:{step.line + 1}: changed since the plan was made")
    if applied:
        write_atomically(path, b"\n".join(lines))
    return EditOutcome(applied=applied, skipped=skipped, conflicts=conflicts)


def verify_edit(root: Path, edit: LinesEdit | WholeEdit) -> list[str]:
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


_PLAN_NAME = re.compile(r"^fg-[0-9a-z]{6,40}$")
PlanId = Annotated[str, msgspec.Meta(pattern=r"^fg-[0-9a-z]{6,40}$")]


def new_plan_id() -> str:
    """A fresh plan id: `fg-` and 12 random lowercase letters and digits."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    return "fg-" + "".join(alphabet[b % 36] for b in os.urandom(12))


def _plan_path(directory: Path, plan: str) -> Path:
    if not _PLAN_NAME.match(plan):
        raise ValueError(f"not a plan id: {plan!r}")
    return directory / f"{plan}.json"


def write_plan(directory: Path, plan: ForgetPlan) -> None:
    """Write (or rewrite) a plan atomically in `directory`, made if missing."""
    directory.mkdir(mode=0o700, exist_ok=True)
    write_atomically(_plan_path(directory, plan.plan), msgspec.json.encode(plan))


def read_plan(directory: Path, plan: str) -> ForgetPlan | None:
    """The plan `plan` in `directory`, or None if there is none."""
    try:
        data = _plan_path(directory, plan).read_bytes()
    except FileNotFoundError:
        return None
    return msgspec.json.decode(data, type=ForgetPlan)


def plan_paths(directory: Path) -> Iterator[Path]:
    """The plan files in `directory`, oldest first."""
    if not directory.is_dir():
        return iter(())
    found = [p for p in directory.glob("fg-*.json") if _PLAN_NAME.match(p.stem)]
    return iter(sorted(found, key=lambda p: p.stat().st_mtime_ns))


def remove_plan(directory: Path, plan: str) -> None:
    """Delete a finished plan and make the deletion durable."""
    try:
        _plan_path(directory, plan).unlink()
    except FileNotFoundError:
        return
    fsync_dir(directory)
