"""A tool call's outcome, and the `tool_result` record that keeps it.

The log keeps no status field: a result's status is written into its content (`error: …`,
`denied: …`, and an `ok` result as it is). `ToolOutcome.content` writes it and
`recorded_status` reads it back, for a finished turn's events rebuilt from its records.
"""

from __future__ import annotations

from dataclasses import dataclass

import proto
from proto import Class, Label, Status, ToolCall, ToolResultRecord

__all__ = ["LOCAL", "ToolOutcome", "recorded_status"]

LOCAL = Label(class_=Class.public, untrusted=False)
"""The label of what loopd itself says: the time, the tools it knows, its own errors."""


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call's result: its status, the words of whoever answered, and their label."""

    status: Status
    text: str
    label: Label = LOCAL

    @property
    def content(self) -> str:
        """What the log records and the model reads: anything but `ok` says its status first."""
        return self.text if self.status == "ok" else f"{self.status}: {self.text}"

    def record(self, call: ToolCall) -> ToolResultRecord:
        """The `tool_result` record of `call` with this outcome."""
        return ToolResultRecord(
            time=proto.utc_stamp(),
            call_id=call.id,
            name=call.name,
            content=self.content,
            class_=self.label.class_,
            untrusted=self.label.untrusted,
        )


def recorded_status(content: str) -> Status:
    """A recorded result's status, read back from its `content`."""
    if content.startswith("error: "):
        return "error"
    if content.startswith("denied: "):
        return "denied"
    return "ok"
