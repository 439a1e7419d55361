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
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from proto import AssistantRecord, SessionRecord, ToolCall, ToolResultRecord

__all__ = ["pair", "unanswered"]


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
