"""`bxctl sessions`: the sessions under a home, read from loopd's files.

Which sessions there are comes from loopd's catalog (`proto.CATALOG_FILE`), newest first
and a page at a time; only the page's logs are read. Nothing here opens every session's
folder, so an old home (65,000 sessions at three years) lists and resolves as fast as a
new one, bar reading the catalog itself.
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
import sys
from pathlib import Path

import msgspec

import entries
import proto
from proto import AssistantRecord, UserRecord

from ._common import CommandError, inline, print_json

__all__ = [
    "AROUND",
    "LIST_LIMIT",
    "catalogued",
    "resolve_session",
    "session_block",
    "session_window",
    "sessions_list",
    "sessions_show",
]


LIST_LIMIT = 50
"""How many sessions `bxctl sessions list` shows at once (newest first)."""


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One line of `bxctl sessions list`."""

    session: str
    created: str
    records: int
    """The log's whole lines (a damaged line counts: `sessions show` names it)."""
    last: str | None


class _Timed(msgspec.Struct, frozen=True):
    """The one field of a record a listing needs."""

    time: str


_timed = msgspec.json.Decoder(_Timed)


def resolve_session(home: Path, given: str) -> str:
    """The session `given` names: its whole id, or a start no other session shares.

    Like git's short hashes: recall shows `chat-k6m5…`, and `chat-k6m5` (or `chat-k6m5…`,
    as pasted) is enough. An id nothing starts with is a `CommandError` pointing at
    `bxctl sessions list`, never a new session under a mistyped name.

    A whole id is looked up directly and a start in the catalog: neither lists sessions/
    (65,000 folders in an old home) unless the catalog knows no session so starting.
    """
    from ._common import bxctl, clipped

    text = given.strip().rstrip("…").rstrip(".")
    root = home / "sessions"
    if _SESSION_ID.fullmatch(text) and (root / text).is_dir():
        return text
    read = proto.read_catalog(root)
    catalog = [] if read is None else read.entries
    matches = sorted({e.session for e in catalog if text and e.session.startswith(text)})
    if not matches:  # a session the catalog lacks (a home older than it): by name only
        matches = sorted(name for name in _session_names(root) if text and name.startswith(text))
    if len(matches) == 1:
        return matches[0]
    listing = f"`{bxctl('sessions list')}` shows them"
    if not matches:
        raise CommandError(f"no session {clipped(given)} in {home}; {listing}")
    shown = ", ".join(matches[:3]) + (", …" if len(matches) > 3 else "")
    raise CommandError(
        f"{clipped(given)} is the start of {len(matches)} sessions ({shown}); give more of it"
    )


_SESSION_ID = re.compile(proto.SESSION_ID_PATTERN)


def _folder_names(root: Path) -> list[str]:
    """Every name under sessions/ but loopd's own: one directory read, no `stat` each.

    loopd's own entries (`.forget`, its forget plans, the catalog) start with a dot, which
    no session id does.
    """
    try:
        return [name for name in os.listdir(root) if not name.startswith(".")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _session_names(root: Path) -> list[str]:
    """Every name under sessions/ that is a session id."""
    return [name for name in _folder_names(root) if _SESSION_ID.fullmatch(name)]


def catalogued(root: Path) -> list[proto.CatalogEntry]:
    """Every session, newest first, from the catalog; what it lacks written in once.

    sessions/ is read (names only) when the catalog has a damaged line (a crash tore
    loopd's append), or when sessions/ changed after the catalog did: loopd appends
    to the catalog after it makes a session's folder, so a catalog older than its
    directory may lack a session (one made before the catalog existed, or by a copy).
    A session it lacks has its baseline read for its `created`, and the catalog is
    completed so that the next listing reads only the catalog. A completion that cannot
    be written (a home shared with a group, read by another user) is a slower next
    listing, nothing worse.
    """
    read = proto.read_catalog(root)
    catalog = [] if read is None else read.entries
    missing = []
    if read is None or read.damaged or _maybe_behind(root):
        known = {entry.session for entry in catalog}
        for name in sorted(set(_folder_names(root)) - known):
            if not _SESSION_ID.fullmatch(name):
                if (root / name).is_dir():  # someone's folder, never loopd's: say so
                    print(f"note: skipped {inline(name)}: not a session id", file=sys.stderr)
                continue
            try:
                baseline = proto.read_baseline(root / name)
            except FileNotFoundError:
                continue  # being created (loopd catalogues it next), or not a session
            except (OSError, ValueError) as exc:
                print(f"note: skipped {inline(name)}: {inline(str(exc))}", file=sys.stderr)
                continue
            missing.append(proto.CatalogEntry(session=name, created=baseline.created))
        with contextlib.suppress(OSError):
            proto.complete_catalog(root, missing)
    # One line per session, its last (loopd writes a session taken back again under its
    # id; a crash in between can leave the old line); ordered by the catalog's own order
    # where `created` ties (stable sort).
    once = {entry.session: entry for entry in [*catalog, *missing]}
    return sorted(once.values(), key=_created, reverse=True)


_created = operator.attrgetter("created")


def _maybe_behind(root: Path) -> bool:
    """Whether sessions/ changed since its catalog did (or either is missing)."""
    try:
        catalog = os.stat(root / proto.CATALOG_FILE).st_mtime_ns
        directory = os.stat(root).st_mtime_ns
    except FileNotFoundError:
        return root.is_dir()
    # Not `>`: a clock tick holds many writes, and a folder made in the catalog's own
    # tick may be one it lacks. A catalog that ties is completed, and so made newer.
    return directory >= catalog


def _summary(root: Path, entry: proto.CatalogEntry) -> SessionSummary | None:
    """One listed session, from its log's bytes (no record decoded but the last); None: gone."""
    try:
        data = (root / entry.session / proto.LOG_FILE).read_bytes()
    except FileNotFoundError:
        if not (root / entry.session).is_dir():
            return None  # catalogued, then removed by hand
        data = b""
    whole = data[: data.rfind(b"\n") + 1]
    last = None
    for line in reversed(whole.splitlines()):
        try:
            last = _timed.decode(line).time
            break
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    return SessionSummary(
        session=entry.session, created=entry.created, records=whole.count(b"\n"), last=last
    )


def sessions_list(
    home: Path, *, as_json: bool, limit: int = LIST_LIMIT, before: str | None = None
) -> int:
    """The newest `limit` sessions (older than `before`): id, created, records, last activity."""
    from ._common import bxctl

    if limit < 1:
        raise CommandError(f"--limit is how many sessions to show, at least 1; {limit} is not")
    root = home / "sessions"
    everyone = catalogued(root)
    start = 0
    if before is not None:
        older_than = resolve_session(home, before)
        found = [i for i, e in enumerate(everyone) if e.session == older_than]
        if not found:
            raise CommandError(f"session {older_than} has no baseline in {root}")
        start = found[0] + 1
    page = everyone[start : start + limit]
    summaries = [s for s in (_summary(root, entry) for entry in page) if s is not None]
    if as_json:
        print_json(summaries)
    elif not summaries:
        print(f"no sessions in {root}" if before is None else f"no sessions before {before}")
    for s in [] if as_json else summaries:
        print(
            f"{inline(s.session)}  created {inline(s.created)}  {s.records:>5,} records  "
            f"last {inline(s.last or '-')}"
        )
    rest = len(everyone) - start - len(page)
    if rest > 0 and page:
        print(
            f"{rest:,} older: `{bxctl(f'sessions list --before {page[-1].session}')}`",
            file=sys.stderr,
        )
    return 0


def _records(directory: Path) -> list[proto.SessionRecord]:
    read = proto.SESSION_LOG.read(directory / proto.LOG_FILE)
    if problems := read.problems():
        print(f"note: {inline(problems)}", file=sys.stderr)
    return read.records


def _session_dir(home: Path, session: str) -> Path:
    """A session's folder, refused when it has no baseline (no session by that name)."""
    try:
        directory = home / "sessions" / proto.check_session_id(session)
    except proto.BadSessionId as exc:
        raise CommandError(str(exc)) from None
    if not (directory / proto.BASELINE_FILE).is_file():
        raise CommandError(f"there is no session {session} in {home / 'sessions'}")
    return directory


def _heading(directory: Path, session: str) -> str:
    try:
        baseline = proto.read_baseline(directory)
    except (OSError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    return f"session {session}, created {inline(baseline.created)}, model {inline(baseline.model)}"


RESULT_SHOWN = 2000
"""How much of a tool result `sessions show` prints (then how much it left out)."""


def _shown(r: proto.SessionRecord) -> list[str]:
    """A record as `sessions show` prints it: a block for each thing said or called."""
    when = inline(r.time)
    if isinstance(r, UserRecord):
        return [f"[{when}] owner:\n{proto.for_terminal(r.content)}"]
    if isinstance(r, AssistantRecord):
        blocks = [f"[{when}] assistant:\n{proto.for_terminal(r.content)}"] if r.content else []
        return blocks + [
            f"[{when}] assistant called {inline(call.name)} {inline(call.arguments)}"
            for call in r.tool_calls
        ]
    untrusted = " · untrusted" if r.untrusted else ""
    left = len(r.content) - RESULT_SHOWN
    more = f"\n… ({left:,} more characters)" if left > 0 else ""
    return [
        f"[{when}] {inline(r.name)} result · {r.class_}{untrusted}:\n"
        f"{proto.for_terminal(r.content[:RESULT_SHOWN])}{more}"
    ]


def sessions_show(home: Path, session: str, *, as_json: bool) -> int:
    """One session's conversation, as the model saw it (tool results with their labels)."""
    directory = _session_dir(home, session)
    records = _records(directory)
    if as_json:
        print_json(records)
        return 0
    print(_heading(directory, session))
    for r in records:
        for block in _shown(r):
            print(f"\n{block}")
    return 0


AROUND = 3
"""How many records `sessions show --at` shows before and after the one asked for."""


class WindowLine(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A line of a session log in `sessions show --at --json`: its record, or why it is none."""

    record: int
    """Its place in the log, from 0: what `--at` names."""
    at: bool = False
    """Whether it is the record asked for."""
    entry: proto.SessionRecord | None = None
    problem: str | None = None
    """Why the line is not a record (damage), when it is not."""


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """`sessions show --at --json`: one record of a session log and the records around it."""

    session: str
    epoch: int
    at: int
    records: int
    """How many the log holds (records and damaged lines)."""
    lines: list[WindowLine]


def _window(directory: Path, epoch: int, at: int, around: int) -> tuple[list[WindowLine], int]:
    """The lines `around` either side of line `at` (from 0) of the epoch's log, and its count."""
    lo, hi = at - around, at + around
    shown: list[WindowLine] = []
    count = 0
    try:
        for line in proto.SESSION_LOG.lines(directory / f"{epoch}.jsonl"):
            count = line.number
            number = line.number - 1
            if lo <= number <= hi:
                shown.append(
                    WindowLine(
                        record=number, at=number == at, entry=line.record, problem=line.problem
                    )
                )
    except OSError as exc:
        raise CommandError(f"cannot read {directory / f'{epoch}.jsonl'}: {exc}") from None
    return shown, count


def _epochs(directory: Path) -> list[int]:
    return sorted(
        int(p.name.partition(".")[0])
        for p in directory.iterdir()
        if re.fullmatch(r"(0|[1-9][0-9]{0,8})\.jsonl", p.name)
    )


def session_window(home: Path, session: str, at: str, around: int, as_json: bool) -> int:
    """Record `at` of a session (`RECORD` or `EPOCH:RECORD`), marked, with `around` either side."""
    from ._common import clipped

    try:
        epoch, record = entries.parse_at(at)
    except ValueError as exc:
        raise CommandError(f"--at {clipped(at)} names no record: {exc}") from None
    if around < 0:
        raise CommandError(f"--around is how many records either side, 0 or more; {around} is not")
    directory = _session_dir(home, session)
    epochs = _epochs(directory)
    if epoch not in epochs and (epoch or epochs):  # epoch 0 before its first record: empty
        logs = ", ".join(str(e) for e in epochs) or "none yet"
        raise CommandError(f"session {session} has no epoch {epoch}; its epochs: {logs}")
    name = f"{epoch}:" if epoch else ""
    shown, count = _window(directory, epoch, record, around) if epochs else ([], 0)
    if record >= count:
        held = f"records {name}0 to {name}{count - 1}" if count else "no records yet"
        raise CommandError(f"session {session} has no record {name}{record}: it has {held}")
    if as_json:
        print_json(Window(session=session, epoch=epoch, at=record, records=count, lines=shown))
        return 0
    print(_heading(directory, session))
    first, last = shown[0].record, shown[-1].record
    of = f"{count:,} in epoch {epoch}" if epoch else f"{count:,}"
    print(f"records {name}{first} to {name}{last} (of {of}, from 0); > marks {name}{record}")
    for line in shown:
        margin = "> " if line.at else "  "
        if line.entry is None:
            problem = inline(line.problem or "")
            blocks = [f"(line {line.record + 1} is not a session record: {problem})"]
        else:
            blocks = _shown(line.entry)
        for n, block in enumerate(blocks):
            print(margin.rstrip() if n else "")
            text = f"#{name}{line.record} {block}" if n == 0 else block
            print("\n".join(margin + row for row in text.split("\n")))
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
