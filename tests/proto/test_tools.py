"""The shapes of the `recall` and `memory` tools' arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proto import (
    MAX_QUERY_CHARS,
    ConsolidateItem,
    MemoryAdd,
    MemoryArgs,
    MemoryConsolidate,
    MemoryRemove,
    MemoryReplace,
    RecallArgs,
    ToolArgsError,
    parse_memory_args,
    parse_recall_args,
)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- recall -------------------------------------------------------------------------------


def test_recall_defaults_k_to_5() -> None:
    assert parse_recall_args('{"query": "launch window"}') == RecallArgs(query="launch window", k=5)
    assert MAX_QUERY_CHARS == 500


@pytest.mark.parametrize("k", [1, 5, 10])
def test_recall_accepts_k_from_1_to_10(k: int) -> None:
    assert parse_recall_args(dumps({"query": "x", "k": k})).k == k


@pytest.mark.parametrize(
    "query", ["x", "a" * 500, "é" * 500, "😀" * 500], ids=["one", "500", "500-2byte", "500-4byte"]
)
def test_recall_accepts_queries_of_1_to_500_characters(query: str) -> None:
    assert parse_recall_args(dumps({"query": query})).query == query
    assert parse_recall_args(dumps({"query": query}).encode()).query == query


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        pytest.param("query=launch", "malformed", id="not-json"),
        pytest.param("", "truncated", id="empty"),
        pytest.param('{"query": "x"', "truncated", id="cut-short"),
        pytest.param("null", "expected `object`, got `null`", id="null"),
        pytest.param('["x"]', "expected `object`, got `array`", id="array"),
        pytest.param('{"k": 3}', "missing required field `query`", id="no-query"),
        pytest.param('{"query": ""}', "length >= 1 - at `$.query`", id="empty-query"),
        pytest.param(dumps({"query": "a" * 501}), "length <= 500 - at `$.query`", id="501"),
        pytest.param('{"query": "x", "k": 0}', ">= 1 - at `$.k`", id="k-0"),
        pytest.param('{"query": "x", "k": -1}', ">= 1 - at `$.k`", id="k-negative"),
        pytest.param('{"query": "x", "k": 11}', "<= 10 - at `$.k`", id="k-11"),
        pytest.param('{"query": 1}', "expected `str`, got `int` - at `$.query`", id="query-int"),
        pytest.param('{"query": "x", "k": "5"}', "got `str` - at `$.k`", id="k-str"),
        pytest.param('{"query": "x", "k": 5.0}', "got `float` - at `$.k`", id="k-float"),
        pytest.param('{"query": "x", "k": true}', "got `bool` - at `$.k`", id="k-bool"),
        pytest.param('{"query": "x", "k": null}', "got `null` - at `$.k`", id="k-null"),
        pytest.param('{"query": "x", "limit": 3}', "unknown field `limit`", id="extra-key"),
    ],
)
def test_recall_refusals_say_what_is_wrong(arguments: str, says: str) -> None:
    with pytest.raises(ToolArgsError) as caught:
        parse_recall_args(arguments)
    assert caught.value.code == "bad-arguments"
    assert str(caught.value).startswith("recall arguments: ")
    assert says in str(caught.value)


# -- memory -------------------------------------------------------------------------------

SPEC_CONSOLIDATE = {
    "action": "consolidate",
    "file": "memory",
    "entries": [
        {"old": "Owner prefers UTC.", "keep": True},
        {"old": "Launch is Tuesday.", "text": "Launch is Thursday."},
        {"old": "Q3 notes are in /srv/notes.", "move": True},
        {"old": "Temporary: call Bob.", "drop": True},
        {"text": "The owner's cat is called Miso."},
    ],
}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"action": "add", "file": "memory", "text": "Owner prefers UTC."},
            MemoryAdd(file="memory", text="Owner prefers UTC."),
        ),
        (
            {"action": "replace", "file": "user", "old": "a", "text": "b"},
            MemoryReplace(file="user", old="a", text="b"),
        ),
        (
            {"action": "remove", "file": "user", "old": "a"},
            MemoryRemove(file="user", old="a"),
        ),
        (
            {"file": "memory", "entries": [], "action": "consolidate"},
            MemoryConsolidate(file="memory", entries=[]),
        ),
    ],
    ids=["add", "replace", "remove", "consolidate-empty"],
)
def test_memory_actions(arguments: dict[str, Any], expected: Any) -> None:
    assert parse_memory_args(dumps(arguments)) == expected
    assert parse_memory_args(dumps(arguments).encode()) == expected


def test_the_spec_s_consolidate_example() -> None:
    args = parse_memory_args(dumps(SPEC_CONSOLIDATE))
    assert isinstance(args, MemoryConsolidate)
    assert args.file == "memory"
    assert [item.fate for item in args.entries] == ["keep", "rewrite", "move", "drop", "new"]
    assert args.entries[1] == ConsolidateItem(old="Launch is Tuesday.", text="Launch is Thursday.")
    assert args.entries[4] == ConsolidateItem(text="The owner's cat is called Miso.")


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        pytest.param("add memory", "malformed", id="not-json"),
        pytest.param(
            {"action": "add", "file": "soul", "text": "x"}, "'soul' - at `$.file`", id="soul"
        ),
        pytest.param({"action": "add", "file": "system", "text": "x"}, "at `$.file`", id="system"),
        pytest.param({"action": "add", "text": "x"}, "missing required field `file`", id="no-file"),
        pytest.param(
            {"file": "memory", "text": "x"}, "missing required field `action`", id="no-action"
        ),
        pytest.param(
            {"action": "delete", "file": "memory", "old": "x"},
            "invalid enum value 'delete' - at `$.action`",
            id="unknown-action",
        ),
        pytest.param({"action": "add", "file": "memory"}, "add needs 'text'", id="add"),
        pytest.param(
            {"action": "add", "file": "memory", "text": "x", "old": "y"},
            "add takes only 'text', not 'old'",
            id="add-with-old",
        ),
        pytest.param(
            {"action": "replace", "file": "memory", "old": "a"},
            "replace needs 'text'",
            id="replace-without-text",
        ),
        pytest.param(
            {"action": "replace", "file": "memory", "text": "b"},
            "replace needs 'old'",
            id="replace-without-old",
        ),
        pytest.param(
            {"action": "remove", "file": "memory", "old": "a", "text": "b"},
            "remove takes only 'old', not 'text'",
            id="remove-with-text",
        ),
        pytest.param(
            {"action": "add", "file": "memory", "text": 3},
            "expected `str`, got `int` - at `$.text`",
            id="text-int",
        ),
        pytest.param(
            {"action": "consolidate", "file": "memory"},
            "consolidate needs 'entries'",
            id="consolidate-without-entries",
        ),
        pytest.param(
            {"action": "consolidate", "file": "memory", "entries": {"old": "a"}},
            "got `object` - at `$.entries`",
            id="entries-object",
        ),
    ],
)
def test_memory_refusals_say_what_is_wrong(arguments: dict[str, Any] | str, says: str) -> None:
    text = arguments if isinstance(arguments, str) else dumps(arguments)
    with pytest.raises(ToolArgsError) as caught:
        parse_memory_args(text)
    assert caught.value.code == "bad-arguments"
    assert str(caught.value).startswith("memory arguments: ")
    assert says in str(caught.value)


def consolidate(*items: dict[str, Any]) -> str:
    return dumps({"action": "consolidate", "file": "user", "entries": list(items)})


@pytest.mark.parametrize(
    ("item", "fate"),
    [
        ({"old": "a", "keep": True}, "keep"),
        ({"old": "a", "text": "b"}, "rewrite"),
        ({"old": "a", "move": True}, "move"),
        ({"old": "a", "drop": True}, "drop"),
        ({"text": "new"}, "new"),
        ({"old": None, "text": "new", "keep": None}, "new"),
    ],
)
def test_consolidate_item_fates(item: dict[str, Any], fate: str) -> None:
    args = parse_memory_args(consolidate(item))
    assert isinstance(args, MemoryConsolidate)
    assert [entry.fate for entry in args.entries] == [fate]


@pytest.mark.parametrize(
    ("item", "says"),
    [
        pytest.param(
            {"old": "a", "keep": True, "text": "b"},
            "give exactly one of 'keep', 'text', 'move', 'drop' (got 'keep' and 'text')",
            id="keep-and-text",
        ),
        pytest.param(
            {"old": "a", "move": True, "drop": True},
            "(got 'move' and 'drop')",
            id="move-and-drop",
        ),
        pytest.param({"old": "a"}, "give exactly one of", id="old-alone"),
        pytest.param({"old": "a"}, "(got none)", id="old-alone-says-none"),
        pytest.param({"old": "a", "keep": False}, "'keep' may only be true", id="keep-false"),
        pytest.param(
            {"old": "a", "text": "b", "move": False}, "'move' may only be true", id="move-false"
        ),
        pytest.param({"old": "a", "drop": False}, "'drop' may only be true", id="drop-false"),
        pytest.param({}, "an item without 'old' is a new entry", id="empty"),
        pytest.param({"keep": True}, "has only 'text'", id="keep-without-old"),
        pytest.param({"text": "new", "move": True}, "has only 'text'", id="new-with-move"),
        pytest.param({"old": "a", "keep": "yes"}, "at `$.entries[0].keep`", id="keep-str"),
        pytest.param(
            {"old": "a", "keep": True, "why": "x"},
            "unknown field `why` - at `$.entries[0]`",
            id="extra-key",
        ),
        pytest.param({"old": 1, "keep": True}, "at `$.entries[0].old`", id="old-int"),
    ],
)
def test_consolidate_item_refusals_say_what_is_wrong(item: dict[str, Any], says: str) -> None:
    with pytest.raises(ToolArgsError) as caught:
        parse_memory_args(consolidate(item))
    assert says in str(caught.value)
    assert str(caught.value).startswith("memory arguments: ")


def test_a_refused_item_is_named_by_its_position() -> None:
    good = {"old": "a", "keep": True}
    bad = {"old": "b", "keep": True, "drop": True}
    with pytest.raises(ToolArgsError, match=r"consolidate item 2: give exactly one"):
        parse_memory_args(consolidate(good, {"text": "new"}, bad, good))


# -- hypothesis ---------------------------------------------------------------------------

MAYBE_STR = st.none() | st.text(max_size=5)
MAYBE_BOOL = st.none() | st.booleans()
ITEMS = st.fixed_dictionaries(
    {},
    optional={"old": MAYBE_STR, "keep": MAYBE_BOOL, "text": MAYBE_STR, "move": MAYBE_BOOL,
              "drop": MAYBE_BOOL},
)  # fmt: skip


def item_is_valid(item: dict[str, Any]) -> bool:
    """The edit rules, apart from the library: one fate per named entry; new ones have text."""
    old, text = item.get("old"), item.get("text")
    flags = [item.get(name) for name in ("keep", "move", "drop")]
    if False in flags:
        return False
    if old is None:
        return text is not None and flags == [None, None, None]
    return [text is not None, *(flag is True for flag in flags)].count(True) == 1


@settings(max_examples=300)
@given(st.lists(ITEMS, max_size=4))
def test_consolidate_items_follow_the_spec(items: list[dict[str, Any]]) -> None:
    arguments = consolidate(*items)
    if all(item_is_valid(item) for item in items):
        args = parse_memory_args(arguments)
        assert isinstance(args, MemoryConsolidate)
        assert len(args.entries) == len(items)
        for item, entry in zip(items, args.entries, strict=True):
            assert entry.old == item.get("old")
            assert entry.text == item.get("text")
            expected = "new" if item.get("old") is None else None
            for fate in ("keep", "move", "drop"):
                if item.get(fate):
                    expected = fate
            if expected is None:
                expected = "rewrite"
            assert entry.fate == expected
    else:
        first_bad = next(i for i, item in enumerate(items) if not item_is_valid(item))
        with pytest.raises(ToolArgsError, match=rf"consolidate item {first_bad}: "):
            parse_memory_args(arguments)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)
KEYS = st.sampled_from(
    ["action", "file", "text", "old", "entries", "keep", "move", "drop", "query", "k", "x"]
)
VALUES = st.one_of(
    JSON_VALUES,
    st.sampled_from(["add", "replace", "remove", "consolidate", "memory", "user", "soul"]),
    st.lists(ITEMS, max_size=3),
)
ARGUMENT_STRINGS = st.one_of(
    st.text(),
    st.dictionaries(KEYS, VALUES, max_size=5).map(dumps),
)


@settings(max_examples=300)
@given(ARGUMENT_STRINGS)
def test_arbitrary_strings_give_args_or_tool_args_error(arguments: str) -> None:
    recall: object
    try:
        recall = parse_recall_args(arguments)
    except ToolArgsError as exc:  # anything else fails the test
        recall = exc
    memory: object
    try:
        memory = parse_memory_args(arguments)
    except ToolArgsError as exc:
        memory = exc
    for outcome, prefix, kind in ((recall, "recall", RecallArgs), (memory, "memory", MemoryArgs)):
        if isinstance(outcome, ToolArgsError):
            assert str(outcome).startswith(f"{prefix} arguments: ")
            assert len(str(outcome)) > len(f"{prefix} arguments: ")
        else:
            assert isinstance(outcome, kind)


def test_deeply_nested_memory_arguments_are_a_tool_args_error() -> None:
    arguments = '{"x":' + "[" * 5_000 + "]" * 5_000 + ',"action":"add"}'
    with pytest.raises(ToolArgsError):
        parse_memory_args(arguments)


@pytest.mark.parametrize("parse", [parse_recall_args, parse_memory_args])
def test_a_lone_surrogate_is_a_tool_args_error(parse: Any) -> None:
    with pytest.raises(ToolArgsError):
        parse('{"query": "\ud800"}')


def test_malformed_json_message_reads_well() -> None:
    with pytest.raises(ToolArgsError) as caught:
        parse_recall_args("query=launch")
    assert "jSON" not in str(caught.value)
