"""`bxctl sessions`: the sessions under a home, read from loopd's files."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

import proto
from proto import AssistantRecord, ToolResultRecord, UserRecord

from ._common import CommandError, print_json

__all__ = ["sessions_list", "sessions_show"]


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One line of `bxctl sessions list`."""

    session: str
    created: str
    records: int
    last: str | None


def _records(directory: Path) -> list[proto.SessionRecord]:
    read = proto.SESSION_LOG.read(directory / proto.LOG_FILE)
    if problems := read.problems():
        print(f"note: {problems}", file=sys.stderr)
    return read.records


def sessions_list(home: Path, *, as_json: bool) -> int:
    """Every session, oldest first: id, created, records, last activity."""
    root = home / "sessions"
    summaries = []
    for directory in sorted(root.iterdir()) if root.is_dir() else []:
        if not directory.is_dir():
            continue
        try:
            baseline = proto.read_baseline(directory)
        except (OSError, ValueError) as exc:
            print(f"note: skipped {directory.name}: {exc}", file=sys.stderr)
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
        print(f"{s.session}  created {s.created}  {s.records:>5,} records  last {s.last or '-'}")
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
    print(f"session {session}, created {baseline.created}, model {baseline.model}")
    for r in records:
        if isinstance(r, UserRecord):
            print(f"\n[{r.time}] owner:\n{proto.escape(r.content)}")
        elif isinstance(r, AssistantRecord):
            if r.content:
                print(f"\n[{r.time}] assistant:\n{proto.escape(r.content)}")
            for call in r.tool_calls:
                print(f"\n[{r.time}] assistant called {call.name} {proto.escape(call.arguments)}")
        elif isinstance(r, ToolResultRecord):
            untrusted = " · untrusted" if r.untrusted else ""
            print(
                f"\n[{r.time}] {r.name} result · {r.class_}{untrusted}:\n"
                f"{proto.escape(r.content[:2000])}"
            )
    return 0
