"""Forgetting a text in the audit log: which lines hold it, and their redacted form.

A V3 call record keeps its MAC when a text field is redacted (the MAC covers the field's
keyed commitment, not its text), so a line is redacted field by field and encoded again:
`verify` then finds a text that does not match its commitment, which it accepts where a
redaction record lists the record (`redaction_places`). A V1 or V2 line is left only in a
log brokerd found broken (a sound one is moved to V3 at start): it is redacted as JSON,
and stays broken, as the log already was. A line that is not a record is redacted as
text: damage never hides a copy. The forget's own records hold no text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import msgspec

import proto
from proto import (
    AuditForget,
    AuditMigration,
    AuditRecord,
    AuditRecordV1,
    AuditRecordV2,
    AuditRecordV3,
    AuditRedaction,
)

__all__ = ["FORGET_DIR", "month_files", "plan_edits", "redaction_places"]

FORGET_DIR = ".forget"
"""brokerd's plan directory, inside the audit directory (`proto.write_plan`)."""

_MONTH_FILE = re.compile(r"\d{4}-\d{2}\.jsonl")
_encoder = msgspec.json.Encoder()


def month_files(directory: Path) -> list[Path]:
    """The month files of the audit directory, oldest first (never the plan directory)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _MONTH_FILE.fullmatch(p.name))


def _redacted(line: proto.Line[AuditRecord], text: str) -> bytes | None:
    """The line with `text` taken out of it; None when it does not hold it."""
    record = line.record
    match record:
        case None | AuditRecordV1() | AuditRecordV2():
            return proto.redact_line(line.raw, text)
        case AuditRecordV3():
            changed = {
                field: proto.redact_value(value, text)
                for field, value in (
                    ("arguments", record.arguments),
                    ("proposed", record.proposed),
                    ("reason", record.reason),
                )
                if value is not None and proto.holds_value(value, text)
            }
            if not changed:
                return None
            return _encoder.encode(msgspec.structs.replace(record, **changed))
        case AuditRedaction() | AuditForget() | AuditMigration():
            return None  # they hold no text
        case _:
            raise AssertionError(f"not an audit record: {record!r}")


def _edits(path: Path, text: str) -> Iterator[proto.LineEdit]:
    for line in proto.AUDIT_LOG.lines(path):
        new = _redacted(line, text)
        if new is not None:
            old = hashlib.sha256(line.raw).hexdigest()
            yield proto.LineEdit(line=line.number - 1, old=old, new=new.decode())


def plan_edits(directory: Path, text: str) -> list[proto.LinesEdit]:
    """The edits that take `text` out of every month file of `directory`; blocking."""
    edits: list[proto.LinesEdit] = []
    for path in month_files(directory):
        lines = list(_edits(path, text))
        if lines:
            edits.append(proto.LinesEdit(path=path.name, lines=lines))
    return edits


def redaction_places(
    commit_key: bytes, edits: list[proto.LinesEdit | proto.WholeEdit]
) -> list[proto.Redacted]:
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
            if not isinstance(record, AuditRecordV3):
                continue
            fields = proto.unmatched_texts(commit_key, record)
            if fields:
                places.append(proto.Redacted(file=edit.path, line=step.line + 1, fields=fields))
    return places
