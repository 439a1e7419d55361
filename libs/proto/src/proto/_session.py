"""A session's files, written by loopd and read by memoryd and bxctl.

`sessions/<id>/0.baseline.json` is written once and replayed byte for byte;
`sessions/<id>/0.jsonl` holds one record per line, tagged on `type`, appended and
flushed per record, never rewritten.

The session's label is defined here, once, for every role: walking the log in order,
the label so far is the join of the labels of its `tool_result` records, starting at
private (the owner's own words are private). Damage never lowers a label: a
line that is not a record but still reads as a `tool_result` counts with what can be
read of it, and the worst label where that is unreadable; a line that cannot be read at
all counts as the worst label if it mentions `tool_result` at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import msgspec

from ._jsonl import JsonLines, Line, Read
from ._label import Class, Label
from ._messages import ToolCall

__all__ = [
    "BASELINE_FILE",
    "LOG_FILE",
    "SESSION_LOG",
    "SESSION_START",
    "AssistantRecord",
    "Baseline",
    "SessionRecord",
    "ToolResultRecord",
    "UserRecord",
    "damaged_label",
    "label_after",
    "read_baseline",
    "session_label",
]

BASELINE_FILE = "0.baseline.json"
LOG_FILE = "0.jsonl"


class _Record(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of a session log record; `type` carries the tag."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"time"})
    """What a forget keeps of a record (the rest of its strings are what was said)."""

    time: str


class UserRecord(_Record, frozen=True, kw_only=True, tag="user", omit_defaults=True):
    """What the owner said; `ref` is the client's name for it (`Say.ref`), if it gave one."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"time", "ref"})
    """What a forget keeps of the record."""

    content: str
    ref: str | None = None


class AssistantRecord(_Record, frozen=True, kw_only=True, tag="assistant"):
    """What the model answered: text, reasoning, and the tool calls it made."""

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    tokens: int | None = None
    """The server's count of the conversation up to and including this message, if given."""


class ToolResultRecord(_Record, frozen=True, kw_only=True, tag="tool_result"):
    """A tool's result and its label."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"time", "call_id", "name"})
    """What a forget keeps: the pairing with its call, and the tool."""

    call_id: str
    name: str
    content: str
    class_: Class = msgspec.field(default=Class.private, name="class")
    untrusted: bool = False

    @property
    def label(self) -> Label:
        """The result's label."""
        return Label(class_=self.class_, untrusted=self.untrusted)


SessionRecord = UserRecord | AssistantRecord | ToolResultRecord


class Baseline(msgspec.Struct, frozen=True, kw_only=True):
    """`<epoch>.baseline.json`: the system prompt and tool schemas a session started with."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"session", "created", "model", "tools"})
    """A forget redacts the system text only: the tool schemas are loopd's own."""

    session: str
    epoch: int
    created: str
    model: str
    system: str
    tools: list[dict[str, object]]


SESSION_LOG: JsonLines[SessionRecord] = JsonLines(SessionRecord)
"""The reader of `<epoch>.jsonl` files."""

SESSION_START = Label(class_=Class.private, untrusted=False)
"""A session's label before any tool result."""

_WORST = Label(class_=Class.secret, untrusted=True)
_baseline_decoder = msgspec.json.Decoder(Baseline)


def damaged_label(raw: bytes) -> Label:
    """What a line that is not a session record tells the label (never less than it may hold).

    A JSON object of type `tool_result` counts with its class (secret when unreadable)
    and is untrusted unless `untrusted` is a readable false; a line that is not JSON at
    all counts as the worst label if it mentions `tool_result`; anything else, nothing.
    """
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return _WORST if b'"tool_result"' in raw else SESSION_START
    if not isinstance(value, dict) or value.get("type") != "tool_result":
        return SESSION_START
    try:
        class_ = Class(value.get("class", Class.private.value))
    except (ValueError, TypeError):
        class_ = Class.secret
    untrusted = value.get("untrusted", False)
    return Label(class_=class_, untrusted=untrusted if isinstance(untrusted, bool) else True)


def label_after(label: Label, line: Line[SessionRecord]) -> Label:
    """The session's label after one more line of its log."""
    record = line.record
    if record is None:
        return label.join(damaged_label(line.raw))
    if isinstance(record, ToolResultRecord):
        return label.join(record.label)
    return label


def session_label(read: Read[SessionRecord]) -> Label:
    """The label of a whole log read with `SESSION_LOG` (the join is order-free)."""
    label = SESSION_START
    for record in read.records:
        if isinstance(record, ToolResultRecord):
            label = label.join(record.label)
    for line in read.skipped:
        label = label.join(damaged_label(line.raw))
    return label


def read_baseline(directory: Path) -> Baseline:
    """A session's `0.baseline.json`; raises `OSError` or `ValueError` saying why not."""
    path = directory / BASELINE_FILE
    try:
        return _baseline_decoder.decode(path.read_bytes())
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(f"{path} is not a session baseline: {exc}") from None
