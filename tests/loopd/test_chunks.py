"""loopd's joining of streamed chunks into one assistant message (`_model._Partial`).

The properties stream the same calls in each shape servers use: arguments cut anywhere
with an `index` on every delta (OpenAI, llama.cpp, vLLM, Ollama since 0.4.7), each call
whole in a chunk of its own without an `index` (Ollama 0.4.0-0.4.6), and several calls
whole in one delta without an `index`. Every shape must give back exactly the calls.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopd._model import _Failed, _Malformed, _Partial, _Streaming, _words

NAMES = st.sampled_from(["clock", "recall", "memory", "find_tool", "call_tool"])
ARGUMENTS = st.dictionaries(st.text(max_size=4), st.text(max_size=8), max_size=3).map(
    lambda value: json.dumps(value, ensure_ascii=False)
)
CALLS = st.lists(
    st.tuples(st.from_regex(r"call_[a-z0-9]{8}", fullmatch=True), NAMES, ARGUMENTS),
    max_size=4,
    unique_by=lambda call: call[0],
)


def chunk(calls: list[dict[str, Any]]) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}).encode()


def joined(chunks: list[bytes]) -> list[tuple[str, str, str]]:
    partial = _Partial()
    for data in chunks:
        partial.add(data)
    assert partial.state == _Streaming()
    return [(c.id, c.name, c.arguments) for c in partial.reply().tool_calls]


@given(calls=CALLS, data=st.data())
def test_calls_in_pieces_with_an_index_join_exactly(
    calls: list[tuple[str, str, str]], data: st.DataObject
) -> None:
    chunks: list[bytes] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        first = {"index": index, "id": call_id, "type": "function"}
        chunks.append(chunk([{**first, "function": {"name": name, "arguments": ""}}]))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(arguments)), max_size=4)))
        for start, end in zip([0, *cuts], [*cuts, len(arguments)], strict=True):
            piece = {"index": index, "function": {"arguments": arguments[start:end]}}
            chunks.append(chunk([piece]))
    assert joined(chunks) == calls


@given(calls=CALLS)
def test_whole_calls_without_an_index_but_with_their_own_ids_are_never_merged(
    calls: list[tuple[str, str, str]],
) -> None:
    """Ollama 0.4.0-0.4.6 (openai/openai.go's ToolCall had no Index field until 0.4.7)."""
    whole = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        for call_id, name, arguments in calls
    ]
    assert joined([chunk([call]) for call in whole]) == calls
    assert joined([chunk(whole)]) == calls


EVENTS = st.lists(
    st.tuples(st.just("text"), st.text(min_size=1, max_size=5))
    | st.tuples(st.just("malformed"), st.just(""))
    | st.tuples(st.sampled_from(["error chunk", "error field"]), st.text(max_size=5)),
    max_size=8,
)


@given(events=EVENTS)
def test_the_first_failure_or_malformed_chunk_is_the_streams_last_state(
    events: list[tuple[str, str]],
) -> None:
    partial = _Partial()
    expected: _Failed | _Malformed | _Streaming = _Streaming()
    shown: list[str] = []
    for kind, text in events:
        going = expected == _Streaming()
        if kind == "text":
            delta = partial.add(json.dumps({"choices": [{"delta": {"content": text}}]}).encode())
            assert delta == ([text] if going else [])
            shown += delta
        elif kind == "malformed":
            assert partial.add(b'{"choices": [') == []
            if going:
                assert isinstance(partial.state, _Malformed)
                expected = partial.state
        elif kind == "error chunk":
            assert partial.add(json.dumps({"error": {"message": text}}).encode()) == []
            expected = _Failed(_words(text)) if going else expected
        else:  # an SSE `error:` field
            partial.fail(text)
            expected = _Failed(_words(text)) if going else expected
        assert partial.state == expected
    assert partial.content == shown
