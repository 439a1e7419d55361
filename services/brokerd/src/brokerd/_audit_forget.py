"""brokerd's own part of a forget: the audit log, as a `proto.ForgetStore` like the roles'.

A V3 call record keeps its MAC when a text field is redacted (the MAC covers the field's
keyed commitment, not its text), so a line is redacted as its record kind says
(`proto.redact_line` with `proto.AUDIT_KINDS`): `verify` then finds a text that does not
match its commitment, which it accepts where a redaction record lists the record
(`redaction_places`, appended by `Audit.redact` before any line changes). A V1 or V2
line is left only in a log brokerd found broken (a sound one is moved to V3 at start):
it is redacted as JSON, and stays broken, as the log already was. A line that is not a
record is redacted as text: damage never hides a copy. The forget's own records hold no
text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

import proto
from proto import ForgetLooked, Holding, NoSteps

from ._audit_files import month_files

if TYPE_CHECKING:
    from ._audit import Audit

__all__ = ["AuditLogForget", "plan_edits", "redaction_places"]

STORE = "audit"


def plan_edits(directory: Path, text: str) -> list[proto.LinesEdit]:
    """The edits that take `text` out of every month file of `directory`; blocking."""
    edits: list[proto.LinesEdit] = []
    for path in month_files(directory):
        lines = proto.line_edits(path.read_bytes().split(b"\n"), text, proto.AUDIT_KINDS)
        if lines:
            edits.append(proto.LinesEdit(path=path.name, lines=lines))
    return edits


def redaction_places(commit_key: bytes, edits: list[proto.FileEdit]) -> list[proto.Redacted]:
    """The V3 call records the edits redact, each with the fields whose text they change.

    Read from the redacted lines alone (the plan holds no old text): a field whose new
    text does not match its commitment is one the forget changes.
    """
    places: list[proto.Redacted] = []
    for edit in edits:
        if not isinstance(edit, proto.LinesEdit):
            continue
        for step in edit.lines:
            try:
                record = proto.AUDIT_LOG.decode(step.new.encode())
            except ValueError:
                continue
            if not isinstance(record, proto.AuditRecordV3):
                continue
            fields = proto.unmatched_texts(commit_key, record)
            if fields:
                places.append(proto.Redacted(file=edit.path, line=step.line + 1, fields=fields))
    return places


def _records(edits: list[proto.LinesEdit]) -> dict[str, int]:
    return {STORE: sum(len(edit.lines) for edit in edits)}


class AuditLogForget:
    """The audit log as a part of every forget (`proto.ForgetPart` drives it)."""

    name = "brokerd"
    steps = NoSteps

    def __init__(self, audit: Audit) -> None:
        self.audit = audit
        self.root = audit.directory

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """No record is appended meanwhile."""
        async with self.audit.lock:
            yield

    async def look(self, text: str) -> ForgetLooked:
        """How many records hold `text`."""
        edits = await trio.to_thread.run_sync(plan_edits, self.root, text)
        return ForgetLooked(holdings=self.holdings(_records(edits), None))

    async def plan(
        self, plan: str, text: str, stored: proto.ForgetPlan[NoSteps] | None
    ) -> proto.ForgetPlan[NoSteps]:
        """The lines of every month file that hold `text`, redacted."""
        edits = await trio.to_thread.run_sync(plan_edits, self.root, text)
        return proto.ForgetPlan(plan=plan, edits=list(edits), counts=_records(edits))

    async def apply(
        self, plan: proto.ForgetPlan[NoSteps], text: str | None, keep: proto.Keep[NoSteps]
    ) -> list[str]:
        """List the redactions (signed), then redact the lines."""
        return await trio.to_thread.run_sync(self.audit.redact, plan)

    async def verify(self, plan: proto.ForgetPlan[NoSteps], text: str | None) -> list[str]:
        """Where a line is not as planned; given the text, each record still holding it."""

        def problems() -> list[str]:
            found = [p for e in plan.edits for p in proto.verify_file_edit(self.root, e)]
            if text is not None:
                for edit in plan_edits(self.root, text):
                    found += [f"{edit.path}:{s.line + 1}: still holds it" for s in edit.lines]
            return found

        return await trio.to_thread.run_sync(problems)

    def holdings(
        self, counts: dict[str, int], plan: proto.ForgetPlan[NoSteps] | None
    ) -> list[Holding]:
        """`audit`, in records."""
        return [Holding(store=STORE, count=counts.get(STORE, 0), unit="records")]
