"""A session's files, written by loopd and read by memoryd (ARCHITECTURE §4).

`sessions/<id>/0.baseline.json` is written once and replayed byte for byte;
`sessions/<id>/0.jsonl` holds one record per line, tagged on `type`, appended and
flushed per record, never rewritten.
"""

from __future__ import annotations

import msgspec

from ._label import Class
from ._messages import ToolCall

__all__ = [
    "AssistantRecord",
    "Baseline",
    "SessionRecord",
    "ToolResultRecord",
    "UserRecord",
]


class _Record(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of a session log record; `type` carries the tag."""

    time: str


class UserRecord(_Record, frozen=True, kw_only=True, tag="user"):
    """What the owner said."""

    content: str


class AssistantRecord(_Record, frozen=True, kw_only=True, tag="assistant"):
    """What the model answered: text, reasoning, and the tool calls it made."""

    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    tokens: int | None = None
    """The server's count of the conversation up to and including this message, if given."""


class ToolResultRecord(_Record, frozen=True, kw_only=True, tag="tool_result"):
    """A tool's result and its label."""

    call_id: str
    name: str
    content: str
    class_: Class = msgspec.field(default=Class.private, name="class")
    untrusted: bool = False


SessionRecord = UserRecord | AssistantRecord | ToolResultRecord


class Baseline(msgspec.Struct, frozen=True, kw_only=True):
    """`<epoch>.baseline.json`: the system prompt and tool schemas a session started with."""

    session: str
    epoch: int
    created: str
    model: str
    system: str
    tools: list[dict[str, object]]
