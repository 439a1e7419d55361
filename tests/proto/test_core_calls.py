"""A core tool call read once into what it asks for (`proto.parse_core_call`)."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import proto
from proto import (
    BadArgs,
    Brokered,
    CallTool,
    Clock,
    CoreCall,
    FindTool,
    FindToolArgs,
    NoSuchLocalTool,
    NoSuchTool,
    ToolArgsError,
    ToolCall,
    parse_core_call,
)

CORE = [spec.name for spec in proto.CORE_TOOLS]
LOCAL = [spec.name for spec in proto.LOCAL_TOOLS]

# Any text, lone surrogates too: the model's words reach loopd as JSON strings.
TEXT = st.text(st.characters(exclude_categories=()), max_size=20)
PLAIN = st.text(max_size=20)
"""Text that is valid Unicode (no lone surrogate)."""
NAMES = st.sampled_from([*CORE, *LOCAL]) | TEXT


def json_values(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Any JSON value, with strings drawn from `text`."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | text,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
        max_leaves=8,
    )


JSON_VALUES = json_values(TEXT)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@st.composite
def argument_strings(draw: st.DrawFn) -> str:
    """What a model may send as arguments: nothing, any text, any JSON, or a near miss."""
    fields = {
        "query": draw(st.none() | TEXT),
        "name": draw(st.none() | st.sampled_from([*CORE, *LOCAL]) | TEXT),
        "arguments": draw(st.none() | JSON_VALUES),
        draw(TEXT): draw(JSON_VALUES),
    }
    shaped = {k: v for k, v in fields.items() if v is not None and draw(st.booleans())}
    return draw(
        st.just("")
        | TEXT
        | JSON_VALUES.map(_dumps)
        | st.just(_dumps(shaped))
        | st.just(_dumps(shaped)[:-1])  # cut short
    )


@settings(max_examples=1000, deadline=None)
@given(call_id=TEXT, name=NAMES, arguments=argument_strings())
@example(call_id="c", name="call_tool", arguments='{"name": "x", "arguments": {"a": 1e999}}')
@example(call_id="c", name="find_tool", arguments='{"query": "\\ud800"}')
@example(call_id="c", name="call_tool", arguments='{"name": "read_file", "arguments": {"n": 1e40}}')
def test_any_call_is_read_as_exactly_one_variant_never_an_exception(
    call_id: str, name: str, arguments: str
) -> None:
    call = ToolCall(id=call_id, name=name, arguments=arguments)
    read = parse_core_call(call)
    assert isinstance(read, get_args(CoreCall))
    # the name alone says which variants it can be; the arguments, which of them
    given = arguments or "{}"
    match read:
        case Clock():
            assert name == "clock"
        case Brokered(call=brokered):
            assert name in ("recall", "memory")
            assert brokered == call  # passed on as the model made it
        case FindTool(args=args):
            assert name == "find_tool"
            assert args == proto.TOOLS["find_tool"].parse(given)
        case CallTool(call=inner):
            assert name == "call_tool"
            wrapped = proto.TOOLS["call_tool"].parse(given)
            assert inner.id == call_id
            assert inner.name == wrapped.name
            assert inner.name in LOCAL
            assert json.loads(inner.arguments) == wrapped.arguments
        case NoSuchLocalTool(name=unknown):
            assert name == "call_tool"
            assert unknown == proto.TOOLS["call_tool"].parse(given).name
            assert unknown not in LOCAL
        case NoSuchTool(name=unknown):
            assert unknown == name
            assert name not in CORE
        case BadArgs(message=message):
            assert name in ("find_tool", "call_tool")
            with pytest.raises(ToolArgsError) as refused:
                proto.TOOLS[name].parse(given)
            assert message == str(refused.value)


@given(query=PLAIN.filter(bool), empty=st.sampled_from(["", "{}"]))
def test_find_tool_reads_its_query_and_no_arguments_is_a_missing_query(
    query: str, empty: str
) -> None:
    call = ToolCall(id="c", name="find_tool", arguments=_dumps({"query": query}))
    assert parse_core_call(call) == FindTool(args=FindToolArgs(query=query))
    missing = parse_core_call(ToolCall(id="c", name="find_tool", arguments=empty))
    assert missing == BadArgs(message="find_tool arguments: object missing required field `query`")


@given(
    tool=st.sampled_from(LOCAL), arguments=st.dictionaries(PLAIN, json_values(PLAIN), max_size=4)
)
def test_call_tool_becomes_the_local_tools_call_under_the_same_id(
    tool: str, arguments: dict[str, Any]
) -> None:
    call = ToolCall(
        id="call_7", name="call_tool", arguments=_dumps({"name": tool, "arguments": arguments})
    )
    read = parse_core_call(call)
    assert isinstance(read, CallTool)
    assert (read.call.id, read.call.name) == ("call_7", tool)
    assert json.loads(read.call.arguments) == arguments


def test_call_tool_without_arguments_calls_the_tool_with_none() -> None:
    call = ToolCall(id="c", name="call_tool", arguments='{"name": "list_dir"}')
    assert parse_core_call(call) == CallTool(call=ToolCall(id="c", name="list_dir", arguments="{}"))


@pytest.mark.parametrize("name", ["recall", "call_tool", "find_tool", "clock", "memory"])
def test_call_tool_names_only_local_tools(name: str) -> None:
    call = ToolCall(id="c", name="call_tool", arguments=_dumps({"name": name}))
    assert parse_core_call(call) == NoSuchLocalTool(name=name)


@pytest.mark.parametrize("arguments", ["", "{}", "not json", '{"x": 1}'])
def test_clock_and_the_brokered_tools_do_not_read_their_arguments(arguments: str) -> None:
    assert parse_core_call(ToolCall(id="c", name="clock", arguments=arguments)) == Clock()
    for name in ("recall", "memory"):
        call = ToolCall(id="c", name=name, arguments=arguments)
        assert parse_core_call(call) == Brokered(call=call)


@pytest.mark.parametrize("name", ["", "Clock", "read_file", "launch_missiles", " recall"])
def test_a_name_that_is_no_core_tool_is_no_such_tool(name: str) -> None:
    call = ToolCall(id="c", name=name, arguments="{}")
    assert parse_core_call(call) == NoSuchTool(name=name)
