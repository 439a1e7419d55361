"""loopd's event-stream decoder, and the joining of a turn's text events (issue 16).

The decoder reads whole network reads; the properties cut one stream at every kind of
place (inside a line end, a BOM, a field name) and write it with every valid line end,
comments and ignored fields, and expect exactly the events' data. The outbox joins runs of
text events without reordering or losing anything.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from loopd._outbox import joined
from loopd._sse import Event, EventDecoder
from proto import AssistantText, Label, ToolCall, ToolCalled, ToolResult, TurnEvent

LINE_TEXT = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12
)
ENDS = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[Event]]:
    """An event stream as any server may write it, and its events.

    Some events carry llama.cpp's `error:` lines instead of (or besides) `data:` lines.
    """
    out: list[str] = ["\ufeff"] if draw(st.booleans()) else []
    expected: list[Event] = []

    def line(text: str) -> None:
        end = draw(ENDS)
        if not text and end == "\n" and out and out[-1].endswith("\r"):
            end = "\r\n"  # CR then LF would be one line end (CRLF), not two
        out.append(text + end)

    for _ in range(draw(st.integers(0, 6))):
        data = draw(st.lists(LINE_TEXT, max_size=3))
        errors = draw(st.lists(LINE_TEXT, max_size=2))
        fields = [("data", value) for value in data] + [("error", value) for value in errors]
        fields = draw(st.permutations(fields))
        data = [value for name, value in fields if name == "data"]
        errors = [value for name, value in fields if name == "error"]
        for name, value in fields:
            for _ in range(draw(st.integers(0, 1))):
                line(draw(st.sampled_from([": keep-alive", ":", "id: 7", "event: chunk", "retry"])))
            space = " " if draw(st.booleans()) or value.startswith(" ") else ""
            line(f"{name}:" + space + value if value or draw(st.booleans()) else name)
        line("")
        for _ in range(draw(st.integers(0, 1))):
            line("")  # an extra blank line dispatches nothing
        if errors:
            expected.append(Event("\n".join(errors).encode(), error=True))
        if data:
            expected.append(Event("\n".join(data).encode()))
    if draw(st.booleans()):
        out.append("data: cut before its blank line\n")  # never dispatched
    return "".join(out).encode(), expected


@settings(max_examples=300, deadline=None)
@given(stream=streams(), data=st.data())
def test_events_come_out_whole_wherever_the_reads_cut_the_stream(
    stream: tuple[bytes, list[Event]], data: st.DataObject
) -> None:
    raw, expected = stream
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    decoder = EventDecoder()
    got: list[Event] = []
    for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        got += decoder.feed(raw[start:end])
    assert got == expected
    whole = EventDecoder()
    assert whole.feed(raw) == expected


def test_a_chat_completions_stream_decodes_as_its_json() -> None:
    raw = b'data: {"choices":[]}\n\ndata: [DONE]\n\n'
    assert EventDecoder().feed(raw) == [Event(b'{"choices":[]}'), Event(b"[DONE]")]


def test_an_error_field_is_an_event_of_its_own_kind() -> None:
    """llama.cpp (server.cpp, `server_sent_event(sink, "error", error_data)`, 2025 builds)."""
    raw = b'error: {"code":400,"message":"too long"}\n\ndata: [DONE]\n\n'
    assert EventDecoder().feed(raw) == [
        Event(b'{"code":400,"message":"too long"}', error=True),
        Event(b"[DONE]"),
    ]


CALL = ToolCall(id="c1", name="clock", arguments="{}")
EVENTS = st.lists(
    st.one_of(
        st.builds(AssistantText, text=st.text(max_size=5)),
        st.just(ToolCalled(call=CALL)),
        st.just(ToolResult(call=CALL, status="ok", content="now", label=Label())),
    ),
    max_size=12,
)


@given(events=EVENTS)
def test_joined_text_events_keep_every_event_and_the_order(events: list[TurnEvent]) -> None:
    out = joined(events)

    def shape(seq: list[TurnEvent]) -> list[object]:
        kept: list[object] = []
        for event in seq:
            if isinstance(event, AssistantText):
                if kept and isinstance(kept[-1], str):
                    kept[-1] += event.text
                else:
                    kept.append(event.text)
            else:
                kept.append(event)
        return kept

    assert shape(out) == shape(events)
    assert not any(
        isinstance(a, AssistantText) and isinstance(b, AssistantText)
        for a, b in itertools.pairwise(out)
    )
