"""A session's records as the model must see them: every tool call answered, right after it.

OpenAI's API (and servers that follow it strictly) refuse a request in which an
assistant message's tool calls are not followed, at once, by one `tool` message per call.
A log does not always look like that: a crash, a kill or a shutdown can leave a call
without its result, and later turns then append the owner's next messages after it (and,
with a lenient server, the model's answers too). So:

* a result answers the nearest call before it with its id that has no result yet (models
  reuse ids such as `call_0` from turn to turn);
* `unanswered` finds the calls no result answers; loopd records a result for each
  (`interrupted`) before it asks the model again, at the end of the log, as everything;
* `pair` yields the records in the order the model must see them: an assistant message,
  then the results of its calls in the order of the calls, wherever in the log they are;
  a result that answers no call is left out.

For a log written without interruptions that order is the log's own, so every request a
server accepted stays a byte-wise prefix of the next. A session repaired once sends its
early records in the new order from then on.

`Conversation` keeps all of that for a session as loopd appends to it, one record at a
time: the calls still unanswered, the ids used, and the messages encoded once each. A
record that lands at the end of the pairing order (every record of a log written without
interruption) costs only its own encoding; one that lands before the end (a result
recorded after the owner's next message: a session being repaired) has the messages
encoded again from the records. Either way they are exactly what `messages` gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

import msgspec

from proto import AssistantRecord, SessionRecord, ToolCall, ToolResultRecord, UserRecord

__all__ = ["Conversation", "message", "messages", "pair", "unanswered"]

_encoder = msgspec.json.Encoder()
Placed = Literal["end", "earlier", "nowhere"]
"""Where a new record's message goes among the messages so far."""


def _answers(records: Sequence[SessionRecord]) -> dict[tuple[int, int], int]:
    """(assistant record, call position) -> the index of the result that answers it."""
    waiting: dict[str, list[tuple[int, int]]] = {}
    answered: dict[tuple[int, int], int] = {}
    for i, record in enumerate(records):
        if isinstance(record, AssistantRecord):
            for position, call in enumerate(record.tool_calls):
                waiting.setdefault(call.id, []).append((i, position))
        elif isinstance(record, ToolResultRecord):
            calls = waiting.get(record.call_id)
            if calls:
                answered[calls.pop()] = i  # the nearest one before it
    return answered


def unanswered(records: Sequence[SessionRecord]) -> list[ToolCall]:
    """Every tool call that no result answers, in the log's order."""
    answered = _answers(records)
    return [
        call
        for i, record in enumerate(records)
        if isinstance(record, AssistantRecord)
        for position, call in enumerate(record.tool_calls)
        if (i, position) not in answered
    ]


def pair(records: Sequence[SessionRecord]) -> Iterator[SessionRecord]:
    """The records, each assistant message's results moved right after it, in call order."""
    answered = _answers(records)
    for i, record in enumerate(records):
        if isinstance(record, ToolResultRecord):
            continue  # yielded after its call, or answering none
        yield record
        if isinstance(record, AssistantRecord):
            for position in range(len(record.tool_calls)):
                result = answered.get((i, position))
                if result is not None:
                    yield records[result]


def message(record: SessionRecord, *, null_content: bool) -> dict[str, Any]:
    """One record as a chat message."""
    if isinstance(record, UserRecord):
        return {"role": "user", "content": record.content}
    if isinstance(record, AssistantRecord):
        content = record.content
        if content is None and not null_content:
            content = ""
        said: dict[str, Any] = {"role": "assistant", "content": content}
        if record.tool_calls:
            said["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in record.tool_calls
            ]
        return said
    return {"role": "tool", "tool_call_id": record.call_id, "content": record.content}


def messages(
    system: str, records: Sequence[SessionRecord], *, null_content: bool
) -> list[dict[str, Any]]:
    """The system prompt and every record as chat messages, in `pair`'s order."""
    return [
        {"role": "system", "content": system},
        *(message(record, null_content=null_content) for record in pair(records)),
    ]


class Conversation:
    """A session's records and its messages as JSON, kept up one record at a time."""

    def __init__(
        self, system: str, records: Iterable[SessionRecord] = (), *, null_content: bool
    ) -> None:
        self.system = system
        self.null_content = null_content
        self.records: list[SessionRecord] = []
        self.call_ids: set[str] = set()
        """Every tool-call id of the session's assistant messages."""
        self._waiting: dict[str, list[tuple[int, int]]] = {}
        """`_answers`' calls without a result so far: id -> (assistant record, position)."""
        self._last_assistant = -1
        self._only_results_since = False
        """Whether every record after the last assistant message is a tool result."""
        self._last_position = -1
        """The highest position among the last assistant message's answered calls."""
        self._messages = bytearray()
        for record in records:
            self._track(record)
        self._encode_all()

    def add(self, record: SessionRecord) -> None:
        """Take one more record of the log."""
        placed = self._track(record)
        if placed == "end":
            self._messages += b","
            self._messages += _encoder.encode(message(record, null_content=self.null_content))
        elif placed == "earlier":
            self._encode_all()

    def unanswered(self) -> list[ToolCall]:
        """Every tool call that no result answers, in the log's order (`unanswered`)."""
        waiting = sorted(spot for spots in self._waiting.values() for spot in spots)
        calls = []
        for i, position in waiting:
            record = self.records[i]
            assert isinstance(record, AssistantRecord)
            calls.append(record.tool_calls[position])
        return calls

    def body(self, head: bytes) -> bytes:
        """`head` followed by the messages as a JSON array and the body's closing `}`."""
        return b"".join((head, self._messages, b"]}"))

    def _track(self, record: SessionRecord) -> Placed:
        """Note `record`; say where its message goes: at the end, earlier, or nowhere."""
        i = len(self.records)
        self.records.append(record)
        if isinstance(record, ToolResultRecord):
            spots = self._waiting.get(record.call_id)
            if not spots:
                return "nowhere"  # it answers no call
            assistant, position = spots.pop()  # the nearest one before it, as `_answers`
            if not spots:
                del self._waiting[record.call_id]
            if assistant != self._last_assistant:
                return "earlier"  # right after an earlier assistant message
            at_end = self._only_results_since and position > self._last_position
            self._last_position = max(self._last_position, position)
            return "end" if at_end else "earlier"
        if isinstance(record, AssistantRecord):
            for position, call in enumerate(record.tool_calls):
                self._waiting.setdefault(call.id, []).append((i, position))
                self.call_ids.add(call.id)
            self._last_assistant, self._last_position = i, -1
            self._only_results_since = True
        else:
            self._only_results_since = False
        return "end"

    def _encode_all(self) -> None:
        every = messages(self.system, self.records, null_content=self.null_content)
        self._messages = bytearray(b"[") + b",".join(_encoder.encode(m) for m in every)
