"""The owner's commands on the roles' admin sockets, and reads of the home's files."""

from __future__ import annotations

import contextlib
import difflib
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import assert_never

import msgspec

import entries
import proto
from proto import (
    AppliedEdit,
    ApprovalDecide,
    Approvals,
    ApprovalsList,
    Approve,
    AuditRecord,
    AuditVerified,
    AuditVerify,
    Deny,
    Grants,
    GrantsList,
    HandChange,
    HistoryEdit,
    JournalLine,
    MemoryBlock,
    MemoryBlockReply,
    MemoryHistory,
    MemoryHistoryReply,
    Ok,
    OwnerRecall,
    OwnerRecalled,
    PendingApproval,
    RecallHit,
    Reindex,
    Reindexed,
)

from ._common import CommandError, Sockets, ask, bxctl, inline, plural, print_json

__all__ = [
    "approvals_decide",
    "approvals_list",
    "approve_with_text",
    "audit_tail",
    "audit_verify",
    "describe_approval",
    "grants_list",
    "journal",
    "memory_history",
    "memory_show",
    "open_command",
    "pending_approvals",
    "recall",
    "reindex",
    "reindexed_line",
    "with_text",
]

REINDEX_DEADLINE_S = 3600.0


def describe_approval(approval: PendingApproval) -> str:
    r"""An approval as the owner reads it before deciding: the arguments exactly.

    The arguments are rendered for the terminal (every invisible or live code point
    shown as `\u{…}`), one indented line per line of the text.
    """
    lines = [
        f"approval {inline(approval.id)}: {inline(approval.tool)} in session "
        f"{inline(approval.session)} ({inline(approval.time)})",
    ]
    if approval.taint.untrusted:
        lines.append("  ! this session has seen untrusted content")
    lines.append("  arguments:")
    lines.extend("    " + line for line in proto.for_terminal(approval.arguments).split("\n"))
    return "\n".join(lines)


def approvals_list(home: Path, *, as_json: bool) -> int:
    """Print the pending approvals."""
    pending = pending_approvals(home)
    if as_json:
        print_json(pending)
    elif not pending:
        print("no approvals pending")
    else:
        print("\n\n".join(describe_approval(a) for a in pending))
    return 0


def approvals_decide(home: Path, approval: str, *, approve: bool, reason: str | None) -> int:
    """Approve or deny one pending approval."""
    path = Sockets(home).path(proto.OWNER_BROKER)
    verdict: Approve | Deny = Approve(note=reason) if approve else Deny(reason=reason)
    ask(path, proto.OWNER_BROKER, ApprovalDecide.deciding(approval, verdict), Ok)
    print(f"{'approved' if approve else 'denied'} {inline(approval)}")
    return 0


def pending_approvals(home: Path) -> list[PendingApproval]:
    """Every pending approval, a frame's worth at a time."""
    path = Sockets(home).path(proto.OWNER_BROKER)
    reply = ask(path, proto.OWNER_BROKER, ApprovalsList(), Approvals)
    pending = reply.pending
    while reply.more:  # one settled meanwhile is not sent
        reply = ask(path, proto.OWNER_BROKER, ApprovalsList(ids=reply.more), Approvals)
        pending += reply.pending
    return pending


def with_text(approval: PendingApproval, text: str) -> str:
    """The arguments of a pending memory add or replace, with the owner's `text` instead.

    Raises:
        CommandError: It is not a memory add or replace (their arguments have no one text
            to change), or the text is empty.
    """
    if not text.strip():
        raise CommandError("the new text is empty; to refuse the call, deny it")
    arguments = entries.with_text(approval.arguments, text) if approval.tool == "memory" else None
    if arguments is None:
        raise CommandError(
            f"approval {inline(approval.id)} is not a memory add or replace, so it has no "
            "text to change; approve it as it is, or deny it with a reason"
        )
    return arguments


def approve_with_text(home: Path, approval: str, text: str) -> int:
    """Approve a pending memory add or replace with the owner's own text (edit before approve)."""
    found = [a for a in pending_approvals(home) if a.id == approval]
    if not found:
        raise CommandError(
            f"no approval {inline(approval)} is pending; `{bxctl('approvals list')}` shows them"
        )
    arguments = with_text(found[0], text)
    request = ApprovalDecide.deciding(
        approval, Approve(version=arguments), surface=proto.Surface(via="bxctl")
    )
    ask(Sockets(home).path(proto.OWNER_BROKER), proto.OWNER_BROKER, request, Ok)
    print(f"approved {inline(approval)} with your text:")
    print(entries.to_terminal(entries.describe_edit(proto.parse_memory_args(arguments))))
    return 0


def reindexed_line(reply: Reindexed) -> str:
    """`reindexed: 42 logs, 1,208 records, 7 archive entries`."""
    return (
        f"reindexed: {plural(reply.logs, 'log')}, {plural(reply.records, 'record')}, "
        f"{plural(reply.archive, 'archive entry', 'archive entries')}"
    )


@contextlib.contextmanager
def _working(what: str) -> Iterator[None]:
    """A spinner with the elapsed seconds on a terminal's stderr, else one plain line.

    rich redraws it from its own thread while the call blocks this one; the spinner is
    cleared when the block ends, however it ends.
    """
    if not sys.stderr.isatty():
        print(f"{what}…", file=sys.stderr)
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    columns = (SpinnerColumn(), TextColumn(f"{what}… {{task.elapsed:5.1f}} s", markup=False))
    # Whether to animate was decided by isatty above, as for the plain line.
    console = Console(stderr=True, force_terminal=True)
    with Progress(*columns, console=console, transient=True) as progress:
        progress.add_task(what, total=None)
        yield


def reindex(home: Path, admin_socket: Path | None) -> int:
    """Rebuild the recall index, showing progress while memoryd works."""
    path = admin_socket or Sockets(home).path(proto.OWNER_MEMORY)
    started = time.monotonic()
    with _working("reindexing"):
        reply = ask(path, proto.OWNER_MEMORY, Reindex(), Reindexed, deadline_s=REINDEX_DEADLINE_S)
    print(reindexed_line(reply))  # the spec's line, alone on stdout for scripts
    print(f"took {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


class OpenHit(msgspec.Struct, frozen=True, kw_only=True):
    """A hit of `bxctl recall --json`: memoryd's, and the command that opens it."""

    source: proto.HitSource
    label: proto.Label
    snippet: str
    open: str


class Recalled(msgspec.Struct, frozen=True, kw_only=True):
    """`bxctl recall --json`: the query, the answer's label, the hits best first."""

    query: str
    label: proto.Label
    hits: list[OpenHit]


def open_command(hit: RecallHit) -> str:
    """The command that opens a hit: its record in its session, or its archived entry's story."""
    source = hit.source
    if source.kind == "archive":
        return bxctl(f"memory why {shlex.quote(entries.archive_part(hit.snippet))}")
    return bxctl(f"sessions show {source.session} --at {entries.at_text(source)}")


def recall(home: Path, query: str, k: int, *, as_json: bool = False) -> int:
    """The owner's own search: each hit whole, with the command that opens it."""
    path = Sockets(home).path(proto.OWNER_MEMORY)
    reply = ask(path, proto.OWNER_MEMORY, OwnerRecall(query=query, k=k), OwnerRecalled)
    if as_json:
        hits = [
            OpenHit(source=h.source, label=h.label, snippet=h.snippet, open=open_command(h))
            for h in reply.hits
        ]
        print_json(Recalled(query=query, label=reply.label, hits=hits))
    else:
        print(entries.to_terminal(entries.recall_answer(query, reply.hits, open_command)))
    return 0


def memory_show(home: Path) -> int:
    """The memory block a new session would get now, exactly (memoryd's owner socket)."""
    path = Sockets(home).path(proto.OWNER_MEMORY)
    reply = ask(path, proto.OWNER_MEMORY, MemoryBlock(), MemoryBlockReply)
    print(proto.for_terminal(reply.text))
    return 0


def _diff(line: JournalLine) -> list[str]:
    out: list[str] = []
    moved = set(line.moved) if isinstance(line, AppliedEdit) else set()
    for row in difflib.ndiff(line.before, line.after):
        tag, text = row[:1], row[2:]
        if tag == "?":
            continue
        marker = {"-": "-", "+": "+", " ": " "}[tag]
        if tag == "-" and text in moved:
            marker = ">"  # moved to archive.md
        out.extend(f"    {marker} {part}" for part in proto.for_terminal(text).split("\n"))
    return out


HISTORY_LIMIT = 20
"""How many edits `memory history` shows unless told (the newest; `--all` shows every one)."""


def journal(
    home: Path, file: proto.MemoryFile | None = None, limit: int | None = None
) -> tuple[list[HistoryEdit], int]:
    """The newest `limit` edits (every one when None), newest first; and how many are older.

    memoryd reads the journal from its end, a frame's worth a page: only the pages that
    hold them are asked for, so an old journal costs no more than a young one.
    """
    path = Sockets(home).path(proto.OWNER_MEMORY)
    edits: list[HistoryEdit] = []
    before: int | None = None
    while before != 0 and (limit is None or len(edits) < limit):
        request = MemoryHistory(file=file, before=before)
        reply = ask(path, proto.OWNER_MEMORY, request, MemoryHistoryReply)
        edits += reversed(reply.edits)
        before = reply.older if reply.edits else 0
    older = before or 0
    if limit is not None and len(edits) > limit:
        older += len(edits) - limit
        edits = edits[:limit]
    return edits, older


def _by_a_forget(change: HandChange) -> bool:
    """Whether a journal line is a forget's own: entries holding the marker taken out."""
    if isinstance(change.forgotten, msgspec.UnsetType):
        return False
    gone = [entry for entry in change.before if entry not in change.after]
    added = [entry for entry in change.after if entry not in change.before]
    return bool(gone) and not added and all(proto.MARKER in entry for entry in gone)


def _forgotten_since(plan: str | msgspec.UnsetType) -> str:
    if isinstance(plan, msgspec.UnsetType):
        return ""
    return f"  (a forgotten text taken out by {inline(plan)}; cannot be undone)"


def memory_history(
    home: Path, file: proto.MemoryFile | None, *, as_json: bool, limit: int | None
) -> int:
    """The newest `limit` edits (None: all), newest first, each with its id, as a diff."""
    if limit is not None and limit < 1:
        raise CommandError(f"--limit is how many edits to show, at least 1; {limit} is not")
    edits, older = journal(home, file, limit)
    shown = _show_history(edits, as_json=as_json)
    if older:
        more = f"memory history{'' if file is None else f' --file {file}'} --limit "
        more += str(min(older + len(edits), 10 * len(edits)))
        print(f"{older:,} older: `{bxctl(more)}`, or `--all`", file=sys.stderr)
    return shown


def _show_history(edits: list[HistoryEdit], *, as_json: bool) -> int:
    if as_json:
        print_json([{"id": edit.id, **msgspec.to_builtins(edit.line)} for edit in edits])
        return 0
    if not edits:
        print("no memory edits yet")
        return 0
    for edit in edits:
        match edit.line:
            case HandChange(time=time, file=changed) as hand if _by_a_forget(hand):
                print(
                    f"{inline(edit.id)}  {inline(time)}  {changed}: the owner's forget "
                    f"{inline(str(hand.forgotten))} took out the entries holding the text"
                )
            case HandChange(time=time, file=changed) as hand:
                print(
                    f"{inline(edit.id)}  {inline(time)}  {changed} changed outside an applied "
                    "edit (by hand, or an edit applied just before a crash); found at "
                    f"memoryd's start{_forgotten_since(hand.forgotten)}"
                )
            case AppliedEdit() as applied:
                undoes = (
                    f"  (undoes {inline(applied.decided.undoes)})"
                    if isinstance(applied.decided, proto.OwnerEdit) and applied.decided.undoes
                    else ""
                )
                where = (
                    "outside any session"
                    if applied.session == proto.OWNER_SESSION
                    else f"session {inline(applied.session)}"
                )
                print(
                    f"{inline(edit.id)}  {inline(applied.time)}  {applied.action} "
                    f"{applied.file}  {where}  "
                    f"approval {inline(applied.approval or '-')}{undoes}"
                    f"{_forgotten_since(applied.forgotten)}"
                )
            case _:
                assert_never(edit.line)
        print("\n".join(_diff(edit.line)))
    print(f"\n(- removed, + added, > moved to archive.md; `{bxctl('memory undo ID')}` undoes one)")
    return 0


VERIFY_DEADLINE_S = 600.0
"""How long `audit verify` waits for brokerd's walk: at the walk's rate, a log of
decades (the everyday deadline, 30 s, would cut a long-lived home's verify short)."""


@contextlib.contextmanager
def _walking() -> Iterator[None]:
    """A spinner with the elapsed seconds on a terminal's stderr while brokerd walks.

    brokerd answers once, at the end, so the seconds are what there is to show; nothing
    is drawn on a pipe, and rich's own thread draws it, so the blocking call is not held.
    """
    if not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}… {task.elapsed:.1f} s", markup=False),
        console=Console(stderr=True, force_terminal=True),
        transient=True,
    ) as progress:
        progress.add_task("brokerd is checking every audit record", total=None)
        yield


def audit_verify(home: Path) -> int:
    """Walk the audit log's hash chain."""
    path = Sockets(home).path(proto.OWNER_BROKER)
    began = time.monotonic()
    with _walking():
        reply = ask(
            path, proto.OWNER_BROKER, AuditVerify(), AuditVerified, deadline_s=VERIFY_DEADLINE_S
        )
    seconds = time.monotonic() - began
    rate = f"{reply.records / seconds:,.0f} records/s" if seconds > 0 else "-"
    print(f"checked in {seconds:.2f} s ({rate})", file=sys.stderr)
    if reply.ok:
        print(f"audit log intact: {plural(reply.records, 'record')}")
    else:
        broken_at = inline(str(reply.broken_at))
        print(f"audit log BROKEN at {broken_at} (after {plural(reply.records, 'record')})")
    for forget in reply.forgets:
        print(_forget_line(forget))
    return 0 if reply.ok else 1


def _forget_line(forget: proto.ForgetOnRecord) -> str:
    """`forgotten on 2026-12-06 by the owner (bxctl): 3 records`."""
    where = "" if forget.surface is None else f" ({forget.surface.via})"
    day = inline(forget.time[:10])
    return f"forgotten on {day} by the owner{where}: {plural(forget.records, 'record')}"


def _tail_line(r: AuditRecord) -> str:
    """One audit record of `audit tail`, by its kind."""
    match r:
        case proto.AuditRecordV1() | proto.AuditRecordV2() | proto.AuditRecordV3():
            untrusted = " untrusted" if r.label.untrusted else ""
            return (
                f"{inline(r.time)}  {r.decision:8} {inline(r.tool):10} {r.status:7} "
                f"session {inline(r.session)}  grant {inline(r.grant or '-')}  "
                f"{r.label.class_}{untrusted}"
            )
        case proto.AuditForget():
            counts = ", ".join(f"{inline(k)} {n:,}" for k, n in r.counts.items())
            return (
                f"{inline(r.time)}  forget by the owner ({r.surface.via})  "
                f"plan {inline(r.plan)}  {counts}"
            )
        case proto.AuditRedaction():
            return (
                f"{inline(r.time)}  redacted {plural(len(r.places), 'record')} "
                f"(plan {inline(r.plan)})"
            )
        case proto.AuditMigration():
            return (
                f"{inline(r.time)}  moved {plural(r.old_records, 'record')} to v3 "
                f"(old head's last MAC {inline(r.old_last)})"
            )
        case _:
            assert_never(r)


def audit_tail(home: Path, count: int, *, as_json: bool) -> int:
    """The last `count` audit records, oldest first."""
    audit = home / "audit"
    files = sorted(audit.glob("*.jsonl")) if audit.is_dir() else []
    lines: list[proto.Line[AuditRecord]] = []
    for path in reversed(files):
        lines = list(proto.AUDIT_LOG.lines(path)) + lines
        if len(lines) >= count:
            break
    lines = lines[-count:] if count > 0 else []
    for line in lines:
        if line.record is None:
            problem = inline(line.problem or "")
            print(f"note: audit line {line.number} is not a record ({problem})", file=sys.stderr)
    records = [line.record for line in lines if line.record is not None]
    if as_json:
        print_json(records)
        return 0
    if not records:
        print("the audit log is empty")
    for r in records:
        print(_tail_line(r))
    return 0


def grants_list(home: Path, *, as_json: bool) -> int:
    """The grants brokerd loaded (the built-in ones included) and the files it refused."""
    path = Sockets(home).path(proto.OWNER_BROKER)
    reply = ask(path, proto.OWNER_BROKER, GrantsList(), Grants)
    if as_json:
        print_json({"grants": reply.grants, "problems": reply.problems})
        return 0
    for grant in reply.grants:
        flags = [grant.mode, f"max_taint {grant.max_taint}", f"result {grant.result_class}"]
        if grant.untrusted:
            flags.append("untrusted")
        origin = "built in" if grant.builtin else f"sha256 {grant.grant_sha256[:12]}"
        origin = inline(origin)
        print(f"{inline(grant.name):<20} {inline(grant.tool):<11} {', '.join(flags)}  ({origin})")
    for problem in reply.problems:
        shown = f"{inline(problem.file)}: {inline(problem.message)}"
        print(f"REFUSED {shown} (runbook: grants-invalid)")
    return 1 if reply.problems else 0
