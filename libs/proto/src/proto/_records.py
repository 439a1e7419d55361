"""The records roles write to disk besides session logs, one line of JSON each.

* `EditRecord`: a line of `memory/edits/YYYY-MM.jsonl`, memoryd's journal of applied
  memory edits (spec §3).
* `RecallRecord`: a line of `memory/recalls/YYYY-MM.jsonl`, memoryd's recall log: each
  hit's `HitSource`, stable across a reindex (spec §3, §5).
* `AuditRecord`: a line of `audit/YYYY-MM.jsonl`, brokerd's hash-chained audit log
  (ARCHITECTURE §5).

They live here, not in the role that writes them, because bxctl reads them too and never
imports a role. Each is read with `JsonLines` and written with `append_line`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ._jsonl import JsonLines
from ._label import Label

__all__ = [
    "AUDIT_GENESIS",
    "AUDIT_LOG",
    "EDIT_JOURNAL",
    "RECALL_LOG",
    "AuditRecord",
    "Decision",
    "EditRecord",
    "HitSource",
    "RecallRecord",
    "Status",
]

Status = Literal["ok", "error", "denied"]
"""A tool call's outcome, in a `tool_response` and an audit record."""

Decision = Literal["auto", "approved", "denied", "refused"]
"""How brokerd decided a call: run unasked, approved by the owner, denied, or refused."""

AUDIT_GENESIS = "0" * 64
"""The `prev` of the very first audit record."""


class EditRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One applied memory edit: a line of `edits/YYYY-MM.jsonl`."""

    time: str
    session: str
    call: str
    approval: str | None
    action: str
    file: str
    before: list[str]
    after: list[str]
    moved: list[str] = msgspec.field(default_factory=list)


class HitSource(msgspec.Struct, frozen=True, kw_only=True):
    """Where a recall hit came from: its `sources` row without the rowid (a reindex renumbers).

    Recall shows it as the hit's source line; the recall log records it as it is.
    """

    kind: str
    session: str
    epoch: int | None
    record: int
    time: str
    role: str
    class_: str = msgspec.field(name="class")
    untrusted: bool


class RecallRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One line of `recalls/YYYY-MM.jsonl`; `hits` is empty when nothing was found."""

    time: str
    session: str
    query: str
    k: int
    hits: list[HitSource]


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One decision (ARCHITECTURE §5), plus `reason`: why it was denied or refused.

    `prev` is the sha256 of the previous record's line (its bytes without the newline),
    across month files; the first record's is `AUDIT_GENESIS`.
    """

    time: str
    session: str
    call: str
    tool: str
    arguments: str
    grant: str | None
    grant_sha256: str | None
    decision: Decision
    approval: str | None
    label: Label
    status: Status
    reason: str | None = None
    prev: str = AUDIT_GENESIS


EDIT_JOURNAL: JsonLines[EditRecord] = JsonLines(EditRecord)
"""The reader of `memory/edits/YYYY-MM.jsonl`."""

RECALL_LOG: JsonLines[RecallRecord] = JsonLines(RecallRecord)
"""The reader of `memory/recalls/YYYY-MM.jsonl`."""

AUDIT_LOG: JsonLines[AuditRecord] = JsonLines(AuditRecord)
"""The reader of `audit/YYYY-MM.jsonl`."""
