"""`bxctl sessions`: the sessions under a home, read from loopd's files."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

import entries
import proto
from proto import AssistantRecord, ToolResultRecord, UserRecord

from ._common import CommandError, inline, print_json

__all__ = ["resolve_session", "session_block", "sessions_list", "sessions_show"]


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One line of `bxctl sessions list`."""

    session: str
    created: str
    records: int
    last: str | None


def resolve_session(home: Path, given: str) -> str:
    """The session `given` names: its whole id, or a start no other session shares.

    Like git's short hashes: recall shows `chat-k6m5…`, and `chat-k6m5` (or `chat-k6m5…`,
    as pasted) is enough. An id nothing starts with is a `CommandError` pointing at
    `bxctl sessions list`, never a new session under a mistyped name.
    """
    from ._common import bxctl, clipped

    text = given.strip().rstrip("…").rstrip(".")
    root = home / "sessions"
    names = [p.name for p in _session_dirs(root)]
    if text in names:
        return text
    matches = [name for name in names if text and name.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    listing = f"`{bxctl('sessions list')}` shows them"
    if not matches:
        raise CommandError(f"no session {clipped(given)} in {home}; {listing}")
    shown = ", ".join(matches[:3]) + (", …" if len(matches) > 3 else "")
    raise CommandError(
        f"{clipped(given)} is the start of {len(matches)} sessions ({shown}); give more of it"
    )


def _session_dirs(root: Path) -> list[Path]:
    """The directories of sessions/, sorted; loopd's own (`.forget`, its forget plans) left out."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _records(directory: Path) -> list[proto.SessionRecord]:
    read = proto.SESSION_LOG.read(directory / proto.LOG_FILE)
    if problems := read.problems():
        print(f"note: {inline(problems)}", file=sys.stderr)
    return read.records


def sessions_list(home: Path, *, as_json: bool) -> int:
    """Every session, oldest first: id, created, records, last activity."""
    root = home / "sessions"
    summaries = []
    for directory in _session_dirs(root):
        try:
            baseline = proto.read_baseline(directory)
        except (OSError, ValueError) as exc:
            print(f"note: skipped {inline(directory.name)}: {inline(str(exc))}", file=sys.stderr)
            continue
        records = _records(directory)
        summaries.append(
            SessionSummary(
                session=directory.name,
                created=baseline.created,
                records=len(records),
                last=records[-1].time if records else None,
            )
        )
    summaries.sort(key=lambda s: s.created)
    if as_json:
        print_json(summaries)
    elif not summaries:
        print(f"no sessions in {root}")
    for s in [] if as_json else summaries:
        print(
            f"{inline(s.session)}  created {inline(s.created)}  {s.records:>5,} records  "
            f"last {inline(s.last or '-')}"
        )
    return 0


def sessions_show(home: Path, session: str, *, as_json: bool) -> int:
    """One session's conversation, as the model saw it (tool results with their labels)."""
    try:
        directory = home / "sessions" / proto.check_session_id(session)
    except proto.BadSessionId as exc:
        raise CommandError(str(exc)) from None
    if not (directory / proto.BASELINE_FILE).is_file():
        raise CommandError(f"there is no session {session} in {home / 'sessions'}")
    records = _records(directory)
    if as_json:
        print_json(records)
        return 0
    try:
        baseline = proto.read_baseline(directory)
    except (OSError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    print(f"session {session}, created {inline(baseline.created)}, model {inline(baseline.model)}")
    for r in records:
        when = inline(r.time)
        if isinstance(r, UserRecord):
            print(f"\n[{when}] owner:\n{proto.for_terminal(r.content)}")
        elif isinstance(r, AssistantRecord):
            if r.content:
                print(f"\n[{when}] assistant:\n{proto.for_terminal(r.content)}")
            for call in r.tool_calls:
                print(f"\n[{when}] assistant called {inline(call.name)} {inline(call.arguments)}")
        elif isinstance(r, ToolResultRecord):
            untrusted = " · untrusted" if r.untrusted else ""
            more = (
                f"\n… ({len(r.content) - 2000:,} more characters)" if len(r.content) > 2000 else ""
            )
            print(
                f"\n[{when}] {inline(r.name)} result · {r.class_}{untrusted}:\n"
                f"{proto.for_terminal(r.content[:2000])}{more}"
            )
    return 0


def session_block(home: Path, session: str) -> int:
    """Print the exact memory block `session` started with, from its `0.baseline.json`."""
    try:
        directory = home / "sessions" / proto.check_session_id(session)
        baseline = proto.read_baseline(directory)
    except proto.BadSessionId as exc:
        raise CommandError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read the baseline of {session}: {exc}") from None
    block = entries.memory_block_of(baseline.system)
    if block is None:
        raise CommandError(
            f"session {session}'s baseline has no memory block (it started before boxmaker "
            "had one); `bxctl sessions show` shows its conversation"
        )
    print(proto.for_terminal(block))
    return 0
