"""Parsing a call's arguments: both memory tools, the local tools, bad input of every kind."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import proto
from brokerd._arguments import (
    ArgumentsRefused,
    check_tool_name,
    parse_arguments,
)


def parse(tool: str, args: Any) -> object:
    return parse_arguments(tool, args if isinstance(args, str) else json.dumps(args)).value


def test_recall_parses_with_its_default() -> None:
    assert parse("recall", {"query": "launch window"}) == proto.RecallArgs(
        query="launch window", k=5
    )
    assert parse("recall", {"query": "x", "k": 10}) == proto.RecallArgs(query="x", k=10)


def test_every_memory_action_parses() -> None:
    assert parse("memory", {"action": "add", "file": "memory", "text": "UTC"}) == proto.MemoryAdd(
        file="memory", text="UTC"
    )
    assert isinstance(
        parse("memory", {"action": "replace", "file": "user", "old": "a", "text": "b"}),
        proto.MemoryReplace,
    )
    assert isinstance(
        parse("memory", {"action": "remove", "file": "user", "old": "a"}), proto.MemoryRemove
    )
    consolidate = parse(
        "memory",
        {
            "action": "consolidate",
            "file": "memory",
            "entries": [
                {"old": "a", "keep": True},
                {"old": "b", "text": "B"},
                {"old": "c", "move": True},
                {"old": "d", "drop": True},
                {"text": "new"},
            ],
        },
    )
    assert isinstance(consolidate, proto.MemoryConsolidate)
    assert [item.fate for item in consolidate.entries] == ["keep", "rewrite", "move", "drop", "new"]


@pytest.mark.parametrize(
    ("tool", "raw", "says"),
    [
        ("recall", "launch window", "recall arguments are not JSON"),
        ("recall", "", "recall arguments are not JSON"),
        ("recall", '["launch"]', "must be a JSON object, got list"),
        ("recall", '{"query": "a", "query": "b"}', "duplicate key 'query'"),
        ("recall", '{"query": NaN}', "NaN is not JSON"),
        ("recall", '{"query": ""}', "recall arguments: expected `str` of length >= 1"),
        ("recall", json.dumps({"query": "q" * 501}), "length <= 500 - at `$.query`"),
        ("recall", '{"query": "x", "k": 11}', "`int` <= 10 - at `$.k`"),
        ("recall", '{"query": "x", "k": "5"}', "expected `int`, got `str`"),
        ("recall", '{"query": "x", "limit": 3}', "unknown field `limit`"),
        ("recall", '{"query": "\\ud800"}', "lone surrogate"),
        ("recall", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("memory", '{"action": "add", "file": "soul", "text": "x"}', "at `$.file`"),
        ("memory", '{"action": "delete", "file": "memory"}', "invalid enum value 'delete'"),
        ("memory", '{"action": "add", "file": "memory"}', "add needs 'text'"),
        (
            "memory",
            json.dumps({"action": "consolidate", "file": "user", "entries": [{"old": "a"}]}),
            "give exactly one of 'keep', 'text', 'move', 'drop' (got none)",
        ),
        ("read_file", '{"path": ""}', "length >= 1"),
        ("read_file", json.dumps({"path": "/" + "a" * 4096}), "length <= 4096"),
        ("read_file", '{"path": "/x", "follow": true}', "unknown field `follow`"),
        ("list_dir", "{}", "missing required field `path`"),
        ("http_fetch", '{"url": 42}', "expected `str`, got `int`"),
        ("http_fetch", json.dumps({"url": "http://e.org/" + "a" * 2048}), "length <= 2048"),
        ("shell", '"ls"', "shell arguments must be a JSON object, got str"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason(tool: str, raw: str, says: str) -> None:
    with pytest.raises(ArgumentsRefused) as refused:
        parse_arguments(tool, raw)
    assert says in str(refused.value)


@pytest.mark.parametrize(
    "args",
    [
        {"action": "add", "file": "memory", "text": "x" * 3019},
        {"action": "replace", "file": "user", "old": "x" * 1376, "text": "y"},
        {"action": "remove", "file": "user", "old": "x" * 1376},
        {"action": "consolidate", "file": "user", "entries": [{"text": "y" * 1400}]},
    ],
)
def test_texts_longer_than_their_file_are_memoryds_to_refuse(args: dict[str, Any]) -> None:
    # brokerd checks the shape; what an edit would do to its file is memoryd's sentence.
    assert isinstance(parse("memory", args), proto.MemoryArgs)


@pytest.mark.parametrize("name", ["", "Read_File", "read-file", "1tool", "a" * 65, "rm -rf"])
def test_tool_names_are_checked(name: str) -> None:
    with pytest.raises(ArgumentsRefused, match="is not a tool name"):
        check_tool_name(name)


def test_the_canonical_text_is_compact_utf8_in_the_models_order() -> None:
    parsed = parse_arguments("read_file", '{ "path" : "/notes/caf\\u00e9.txt" }')
    assert parsed.canonical == '{"path":"/notes/café.txt"}'
    assert parsed.value == proto.ReadFileArgs(path="/notes/café.txt")
    fetched = parse_arguments("http_fetch", '{"url": "https://example.org/"}')
    assert fetched.value == proto.HttpFetchArgs(url="https://example.org/")
    other = parse_arguments("shell", '{"b": [1, 2.5, null], "a": {"x": true}}')
    assert other.canonical == '{"b":[1,2.5,null],"a":{"x":true}}'


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(
    st.sampled_from(["recall", "memory", "read_file", "http_fetch", "shell"]), st.text(max_size=200)
)
def test_any_text_gives_arguments_or_a_refusal(tool: str, raw: str) -> None:
    try:
        parse_arguments(tool, raw)
    except ArgumentsRefused as exc:
        refusal = str(exc)
    else:
        return
    assert refusal.startswith(tool)


@given(
    st.sampled_from(["recall", "memory", "shell"]),
    st.dictionaries(st.text(max_size=8), json_values, max_size=5),
)
def test_the_canonical_text_parses_to_itself(tool: str, value: dict[str, Any]) -> None:
    try:
        first = parse_arguments(tool, json.dumps(value))
    except ArgumentsRefused:
        return
    again = parse_arguments(tool, first.canonical)
    assert again.canonical == first.canonical
    assert again.value == first.value
    assert json.loads(first.canonical) == value


@given(
    st.sampled_from(["memory", "user"]),
    st.text(min_size=1, max_size=60),
    st.text(min_size=1, max_size=60),
)
def test_memory_edits_keep_their_texts_exactly(file: str, old: str, text: str) -> None:
    parsed = parse("memory", {"action": "replace", "file": file, "old": old, "text": text})
    assert parsed == proto.MemoryReplace(file=file, old=old, text=text)  # type: ignore[arg-type]
