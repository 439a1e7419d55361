"""A session's records as the model must see them: every tool call answered, right after it.

OpenAI's API (and servers that follow it strictly) refuse a request in which an
assistant message's tool calls are not followed, at once, by one `tool` message per call.
A log does not always look like that: a crash, a kill or a shutdown can leave a call
without its result, and later turns then append the owner's next messages after it (and,
with a lenient server, the model's answers too). So:

* a result answers the nearest call before it with its id that has no result yet (models
  reuse ids such as `call_0` from turn to turn);
* `History.unanswered` gives the calls no result answers; loopd records a result for each
  (`interrupted`) before it asks the model again, at the end of the log, as everything;
* `History.paired` gives the records in the order the model must see them: an assistant
  message, then the results of its calls in the order of the calls, wherever in the log
  they are; a result that answers no call is left out.

For a log written without interruptions that order is the log's own, so every request a
server accepted stays a byte-wise prefix of the next. A session repaired once sends its
early records in the new order from then on.

`History` keeps all of that for a session as loopd appends to it, one record at a time:
which result answers which call, the calls still unanswered, the ids used, and the
messages encoded once each. A record that lands at the end of the pairing order (every
record of a log written without interruption) costs only its own encoding; one that lands
before the end (a result recorded after the owner's next message: a session being
repaired) has the messages encoded again from the records. Either way they are exactly
what the rule gives: `tests/loopd/test_kept.py` holds it written as a walk over the whole
log, the oracle the kept history is checked against.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal, assert_never

import msgspec

from proto import AssistantRecord, SessionRecord, ToolCall, ToolResultRecord, UserRecord

__all__ = ["History", "message"]

_encoder = msgspec.json.Encoder()
Placed = Literal["end", "earlier", "nowhere"]
"""Where a new record's message goes among the messages so far."""
Spot = tuple[int, int]
"""A tool call: the index of its assistant record, and its position among that one's calls."""


def message(record: SessionRecord, *, null_content: bool) -> dict[str, Any]:
    """One record as a chat message."""
    match record:
        case UserRecord():
            return {"role": "user", "content": record.content}
        case AssistantRecord():
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
        case ToolResultRecord():
            return {"role": "tool", "tool_call_id": record.call_id, "content": record.content}
        case unexpected:
            assert_never(unexpected)


class History:
    """A session's records and its messages as JSON, kept up one record at a time."""

    def __init__(
        self, system: str, records: Iterable[SessionRecord] = (), *, null_content: bool
    ) -> None:
        self.system = system
        self.null_content = null_content
        self.records: list[SessionRecord] = []
        self.call_ids: set[str] = set()
        """Every tool-call id of the session's assistant messages."""
        self._waiting: dict[str, list[Spot]] = {}
        """The calls without a result so far, by id, in the log's order."""
        self._answered: dict[Spot, int] = {}
        """The calls with a result: the index of the record that answers each."""
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
        """Every tool call that no result answers, in the log's order."""
        waiting = sorted(spot for spots in self._waiting.values() for spot in spots)
        calls = []
        for i, position in waiting:
            record = self.records[i]
            assert isinstance(record, AssistantRecord)  # a spot is always an assistant's
            calls.append(record.tool_calls[position])
        return calls

    def paired(self) -> Iterator[SessionRecord]:
        """The records, each assistant message's results moved right after it, in call order."""
        for i, record in enumerate(self.records):
            match record:
                case UserRecord():
                    yield record
                case AssistantRecord():
                    yield record
                    for position in range(len(record.tool_calls)):
                        result = self._answered.get((i, position))
                        if result is not None:
                            yield self.records[result]
                case ToolResultRecord():
                    pass  # yielded after its call, or answering none
                case unexpected:
                    assert_never(unexpected)

    def body(self, head: bytes) -> bytes:
        """`head` followed by the messages as a JSON array and the body's closing `}`."""
        return b"".join((head, self._messages, b"]}"))

    def _track(self, record: SessionRecord) -> Placed:
        """Note `record`; say where its message goes: at the end, earlier, or nowhere."""
        i = len(self.records)
        self.records.append(record)
        match record:
            case ToolResultRecord():
                spots = self._waiting.get(record.call_id)
                if not spots:
                    return "nowhere"  # it answers no call
                spot = spots.pop()  # the nearest one before it
                if not spots:
                    del self._waiting[record.call_id]
                self._answered[spot] = i
                assistant, position = spot
                if assistant != self._last_assistant:
                    return "earlier"  # right after an earlier assistant message
                at_end = self._only_results_since and position > self._last_position
                self._last_position = max(self._last_position, position)
                return "end" if at_end else "earlier"
            case AssistantRecord():
                for position, call in enumerate(record.tool_calls):
                    self._waiting.setdefault(call.id, []).append((i, position))
                    self.call_ids.add(call.id)
                self._last_assistant, self._last_position = i, -1
                self._only_results_since = True
                return "end"
            case UserRecord():
                self._only_results_since = False
                return "end"
            case unexpected:
                assert_never(unexpected)

    def _encode_all(self) -> None:
        system = {"role": "system", "content": self.system}
        every = (message(record, null_content=self.null_content) for record in self.paired())
        encoded = (_encoder.encode(m) for m in (system, *every))
        self._messages = bytearray(b"[") + b",".join(encoded)
