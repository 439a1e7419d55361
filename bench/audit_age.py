"""Time brokerd's start (`Audit.open`) and `verify` on an audit log of N records.

    uv run python -m bench.audit_age build DIR N   # once: N records over 36 months
    uv run python -m bench.audit_age time DIR      # open (start), then verify; prints seconds

The log is written by brokerd's own `Audit` (append without durability, flush every
10,000 records), so every record is chained, signed and counted by the head, as the
age bench's homes are (about 15 records a session, `started` + `ok` per call).
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from brokerd._audit import Audit
from proto import AUDIT_GENESIS, AuditRecordV3, Class, Label, TextCommits

MONTHS = 36


def _record(i: int, session: int, started: bool) -> AuditRecordV3:
    label = Label(class_=Class.private if i % 7 == 0 else Class.public, untrusted=i % 11 == 0)
    return AuditRecordV3(
        v=3,
        time="2026-01-01T00:00:00Z",
        session=f"chat-{session:016d}",
        call=f"call-{i // 2:08d}",
        tool="recall",
        arguments='{"query":"water levels in the north basin this week"}',
        grant="builtin-recall",
        grant_sha256="ab" * 32,
        decision="auto",
        label=label,
        status="started" if started else "ok",
        taint=Label(),
        commits=TextCommits(arguments=""),
        prev=AUDIT_GENESIS,
        mac="",
    )


def build(directory: Path, n: int) -> None:
    """Write `n` records into `directory` (its key beside it)."""
    audit = Audit(directory, directory.parent / f"{directory.name}.key")
    audit.open()
    start = datetime(2024, 1, 1, tzinfo=UTC)
    per_month = -(-n // MONTHS)
    for i in range(n):
        month = i // per_month
        moment = start.replace(year=2024 + month // 12, month=1 + month % 12)
        audit._append_now(_record(i, i // 14, i % 2 == 0), moment, False)
        if i % 10_000 == 9_999:
            audit._flush_now()
    audit._flush_now()


def timed(directory: Path) -> None:
    """Print the seconds of a start and of a verify."""
    audit = Audit(directory, directory.parent / f"{directory.name}.key")
    began = time.perf_counter()
    audit.open()
    opened = time.perf_counter() - began
    began = time.perf_counter()
    verdict = audit.verify_now()
    verified = time.perf_counter() - began
    rate = verdict.records / verified if verified else 0.0
    print(
        f"records {verdict.records:,} broken {verdict.broken_at!r}: open {opened:.3f} s, "
        f"verify {verified:.3f} s ({rate:,.0f} records/s)"
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    match sys.argv[1:]:
        case ["build", directory, n]:
            build(Path(directory), int(n))
        case ["time", directory]:
            timed(Path(directory))
        case _:
            sys.exit(__doc__)
