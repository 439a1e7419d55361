"""loopd's part of a forget: the text taken out of every session's log and baseline.

In a log line only what was said is text: a message's content and reasoning, a tool
call's arguments (a JSON string, redacted inside), a tool result's content. Each
occurrence becomes `proto.MARKER`; the record's type, time, ids, call ids, refs, tool
names and label stay exactly, so the session keeps its shape: its calls still pair with
their results and its label (the join over the log) is what it was. A line that is not a
record (torn by a crash, damaged) is redacted as text and stays a line. In a baseline
only the system text is; the tool schemas are loopd's own.

A baseline is written once and replayed byte for byte: a forget is the one exception
(the owner's decision), since the model must never be sent the text again.

Plans live in `sessions/.forget/` (a name no session id can take, skipped by every
listing); the functions here are blocking and run in a worker thread.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import msgspec

import proto
from proto import Holding, LineEdit, LinesEdit, WholeEdit

__all__ = [
    "BASELINES",
    "PLAN_DIR",
    "SESSIONS",
    "STALE_PLAN_S",
    "FileEdit",
    "Found",
    "applied_sessions",
    "apply_session",
    "changed_since",
    "find",
    "holdings",
    "leftovers",
    "plan_session",
    "plan_sessions",
    "recover",
    "redact_baseline",
    "redact_log_line",
    "session_of",
]

log = logging.getLogger("loopd.forget")

PLAN_DIR = ".forget"
"""`sessions/.forget/`: a session id starts with a letter, so no session is named so."""
SESSIONS = "sessions"
BASELINES = "baselines"
STALE_PLAN_S = 3600.0
"""An uncommitted plan older than this was never decided: deleted at start."""

FileEdit = LinesEdit | WholeEdit
_RECORD_TYPES = frozenset({"user", "assistant", "tool_result"})


def _redact_text(text: str, needle: str) -> str:
    """`text` with `needle` out of it, judged as JSON inside and as the string the model sees."""
    redacted = proto.redact_value(text, needle)
    if isinstance(redacted, str) and proto.holds(redacted, needle):
        # A JSON string judged by what it decodes to can still hold the needle in its
        # escapes (a needle with a quote or a backslash): the model is sent the string.
        redacted = proto.redact(redacted, needle)
    assert isinstance(redacted, str)
    return redacted


def _redact_record(record: dict[str, Any], needle: str) -> dict[str, Any]:
    changed = dict(record)
    for key in ("content", "reasoning_content"):
        value = record.get(key)
        if isinstance(value, str):
            changed[key] = _redact_text(value, needle)
    calls = record.get("tool_calls")
    if isinstance(calls, list):
        changed["tool_calls"] = [
            {**call, "arguments": _redact_text(call["arguments"], needle)}
            if isinstance(call, dict) and isinstance(call.get("arguments"), str)
            else call
            for call in calls
        ]
    return changed


def redact_log_line(line: bytes, needle: str) -> bytes | None:
    """A log line with `needle` out of its text; None if its text does not hold it.

    A record keeps every field but its text; any other line (torn, damaged, not a
    record) is redacted by `proto.redact_line`, as text if it is not JSON.
    """
    if not proto.may_hold(line, needle):
        return None
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError):
        value = None
    if not isinstance(value, dict) or value.get("type") not in _RECORD_TYPES:
        return proto.redact_line(line, needle)
    redacted = _redact_record(value, needle)
    if redacted == value:
        return None
    return msgspec.json.encode(redacted)


def redact_baseline(data: bytes, needle: str) -> bytes | None:
    """A baseline with `needle` out of its system text; None if that does not hold it.

    Every other byte stays: the fields in their order, the tool schemas as written. A
    file that is not a baseline's JSON is redacted as text.
    """
    try:
        value = msgspec.json.decode(data)
    except (msgspec.DecodeError, ValueError, RecursionError):
        value = None
    if not isinstance(value, dict) or not isinstance(value.get("system"), str):
        text = data.decode("utf-8", errors="replace")
        return proto.redact(text, needle).encode() if proto.holds(text, needle) else None
    system = _redact_text(value["system"], needle)
    if system == value["system"]:
        return None
    return msgspec.json.encode({**value, "system": system})


def _hash(line: bytes) -> str:
    # The hash `proto.apply_edit` compares a line's `old` with.
    return hashlib.sha256(line).hexdigest()


def session_of(edit: FileEdit) -> str:
    """The session an edit's path (`<id>/<file>`, relative to sessions/) belongs to."""
    return edit.path.split("/", 1)[0]


def _session_ids(root: Path) -> list[str]:
    """Every session directory's id, sorted; `.forget` and anything else not a session left out."""
    if not root.is_dir():
        return []
    ids: list[str] = []
    for entry in os.scandir(root):
        try:
            proto.check_session_id(entry.name)
        except proto.BadSessionId:
            continue
        if entry.is_dir(follow_symlinks=False):
            ids.append(entry.name)
    return sorted(ids)


def plan_session(root: Path, session: str, needle: str) -> list[FileEdit]:
    """The edits that take `needle` out of one session's log and baseline."""
    directory = root / proto.check_session_id(session)
    edits: list[FileEdit] = []
    try:
        data = (directory / proto.LOG_FILE).read_bytes()
    except FileNotFoundError:
        data = b""
    if not proto.may_hold(data, needle):
        data = b""  # most logs of a large home: nothing to decode
    # Split as `apply_edit` splits: a final line without its newline (torn) is a line.
    lines = [
        LineEdit(line=number, old=_hash(line), new=new.decode("utf-8", errors="replace"))
        for number, line in enumerate(data.split(b"\n"))
        if (new := redact_log_line(line, needle)) is not None
    ]
    if lines:
        edits.append(LinesEdit(path=f"{session}/{proto.LOG_FILE}", lines=lines))
    try:
        baseline = (directory / proto.BASELINE_FILE).read_bytes()
    except FileNotFoundError:
        baseline = None
    if baseline is not None and (redacted := redact_baseline(baseline, needle)) is not None:
        edits.append(proto.whole_edit(f"{session}/{proto.BASELINE_FILE}", baseline, redacted))
    return edits


def plan_sessions(root: Path, needle: str, only: Collection[str] | None = None) -> list[FileEdit]:
    """The edits that take `needle` out of every session under `root` (or those `only`)."""
    sessions = _session_ids(root) if only is None else sorted(only)
    return [edit for session in sessions for edit in plan_session(root, session, needle)]


def changed_since(root: Path, since_ns: int) -> set[str]:
    """The sessions whose folder, log or baseline changed at or after `since_ns`.

    What a plan made at `since_ns` may have missed: a turn that ended since, a session
    opened since. A stat per file, so a forget's second look costs nothing in a large home.
    """
    changed: set[str] = set()
    for session in _session_ids(root):
        directory = root / session
        for path in (directory, directory / proto.LOG_FILE, directory / proto.BASELINE_FILE):
            try:
                if path.stat().st_mtime_ns >= since_ns:
                    changed.add(session)
                    break
            except FileNotFoundError:
                continue
    return changed


@dataclasses.dataclass(frozen=True)
class Found:
    """What a plan's edits change: messages per session, and the baselines."""

    messages: dict[str, int]
    baselines: list[str]

    @property
    def counts(self) -> dict[str, int]:
        """The plan's counts, by store (no text)."""
        return {SESSIONS: sum(self.messages.values()), BASELINES: len(self.baselines)}


def find(edits: list[FileEdit]) -> Found:
    """Count what `edits` change."""
    messages: dict[str, int] = {}
    baselines: list[str] = []
    for edit in edits:
        match edit:
            case LinesEdit():
                session = session_of(edit)
                messages[session] = messages.get(session, 0) + len(edit.lines)
            case WholeEdit():
                baselines.append(session_of(edit))
    return Found(messages=messages, baselines=baselines)


def _newest_first(root: Path, sessions: list[str]) -> list[str]:
    """Sessions by when they were made (their baseline's `created`), newest first, then by id.

    Not by the files' times: the forget's own rewrite changes those.
    """

    def created(session: str) -> str:
        try:
            return proto.read_baseline(root / session).created
        except (OSError, ValueError):
            return ""

    return sorted(sorted(sessions), key=created, reverse=True)


def holdings(root: Path, found: Found) -> list[Holding]:
    """Loopd's holdings: `sessions` (messages, naming them) and `baselines` (sessions)."""
    return [
        Holding(
            store=SESSIONS,
            count=sum(found.messages.values()),
            unit="messages",
            names=_newest_first(root, list(found.messages)),
        ),
        Holding(
            store=BASELINES,
            count=len(found.baselines),
            unit="sessions",
            names=_newest_first(root, found.baselines),
        ),
    ]


def apply_session(root: Path, edits: list[FileEdit]) -> list[str]:
    """Apply one session's edits (idempotent); the conflicts, and what is not as planned."""
    problems: list[str] = []
    for edit in edits:
        outcome = proto.apply_edit(root, edit)
        problems += outcome.conflicts or proto.verify_edit(root, edit)
    return problems


def applied_sessions(edits: list[FileEdit]) -> dict[str, list[FileEdit]]:
    """A plan's edits grouped by session, in the plan's order."""
    by_session: dict[str, list[FileEdit]] = {}
    for edit in edits:
        by_session.setdefault(session_of(edit), []).append(edit)
    return by_session


def leftovers(root: Path, needle: str, only: Collection[str] | None = None) -> list[str]:
    """Where a file under sessions/ (of the sessions `only`) still holds `needle`, decoded.

    What a forget keeps (a type, an id, a time, a tool name, a tool schema) can hold a
    text the owner chose: those places are reported, never changed.
    """
    found: list[str] = []
    for session in _session_ids(root) if only is None else sorted(only):
        directory = root / session
        try:
            data = (directory / proto.LOG_FILE).read_bytes()
        except FileNotFoundError:
            data = b""
        if not proto.may_hold(data, needle):
            data = b""
        for number, line in enumerate(data.split(b"\n")):
            if proto.redact_line(line, needle) is not None:
                found.append(f"{session}/{proto.LOG_FILE}:{number + 1}: still holds it")
        try:
            baseline = (directory / proto.BASELINE_FILE).read_bytes()
        except FileNotFoundError:
            continue
        if proto.holds(baseline.decode("utf-8", errors="replace"), needle) or (
            proto.redact_line(baseline, needle) is not None
        ):
            found.append(f"{session}/{proto.BASELINE_FILE}: still holds it")
    return found


def recover(root: Path, *, now: float | None = None) -> list[str]:
    """Finish every committed plan in `sessions/.forget/`; delete undecided stale ones.

    Runs before loopd serves anything, so no turn holds a session. Returns the sessions
    whose files were changed (memoryd is told about each). A plan that cannot be read
    is left for the owner, and said so.
    """
    plans = root / PLAN_DIR
    now = time.time() if now is None else now
    changed: list[str] = []
    for path in list(proto.plan_paths(plans)):
        try:
            plan = proto.read_plan(plans, path.stem)
        except (OSError, ValueError) as exc:
            log.error("forget plan %s cannot be read, left as it is: %s", path, exc)
            continue
        if plan is None:
            continue
        if not plan.committed:
            if now - path.stat().st_mtime > STALE_PLAN_S:
                log.info("forget plan %s was never decided; deleted", plan.plan)
                proto.remove_plan(plans, plan.plan)
            continue
        sessions = applied_sessions(plan.edits)
        for edits in sessions.values():
            for problem in apply_session(root, edits):
                log.warning("forget plan %s: %s", plan.plan, problem)
        changed += sessions
        proto.remove_plan(plans, plan.plan)
        log.info("forget plan %s finished at start (%d sessions)", plan.plan, len(sessions))
    return sorted(set(changed))
