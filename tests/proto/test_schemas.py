"""The schema the model sees and the Struct that decodes its arguments agree (issue 11).

Each tool's schema is made from its Struct (`proto.ToolSpec.schema`), shortened by
`_schema.model_schema`. For random JSON values near each tool's shape, a JSON Schema
validator and msgspec must accept and refuse the same ones.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import proto

TOOLS = [*proto.CORE_TOOLS, *proto.LOCAL_TOOLS]

# The one known difference, left as it is: JSON Schema's "integer" admits 5.0, msgspec's
# `int` does not, so a model writing `"k": 5.0` is told "expected `int`, got `float`".
# The validator here counts only ints as integers.
_CHECKER = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
)
_Validator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator, type_checker=_CHECKER
)


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-1, 1) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


# Edges from the Structs' side too: a schema that lost a limit must still be probed there.
_STRUCT_LIMITS = (0, 1, proto.MAX_QUERY_CHARS, proto.MAX_URL_CHARS, proto.MAX_PATH_CHARS)


def _lengths(node: dict[str, Any]) -> list[int]:
    bounds = [node.get("minLength", 0), node.get("maxLength", 8), *_STRUCT_LIMITS]
    return sorted({n + d for n in bounds for d in (-1, 0, 1) if n + d >= 0})


def _near(node: Any) -> st.SearchStrategy[Any]:
    """Values at and just past every edge of `node`: mostly of its shape, some not."""
    if not isinstance(node, dict):
        return _ANY_JSON
    options: list[st.SearchStrategy[Any]] = [_ANY_JSON]
    if "enum" in node:
        options.append(st.sampled_from([*node["enum"], "other", 0]))
    types = node.get("type", [])
    for kind in [types] if isinstance(types, str) else types:
        if kind == "string":
            options.append(st.sampled_from(_lengths(node)).map(lambda n: "/" * n))
        elif kind == "integer":
            low, high = node.get("minimum", 1), node.get("maximum", 10)
            edges = {n + d for n in (low, high, 1, 10) for d in (-1, 0, 1)}
            options.append(st.sampled_from([*sorted(edges), 1.0, True]))
        elif kind == "boolean":
            options.append(st.sampled_from([True, False, 0]))
        elif kind == "null":
            options.append(st.none())
        elif kind == "array":
            options.append(st.lists(_near(node.get("items")), max_size=3))
        elif kind == "object":
            fields = {name: _near(sub) for name, sub in node.get("properties", {}).items()}
            fields["unknown"] = _ANY_JSON
            required = {name: fields[name] for name in node.get("required", [])}
            rest = {name: value for name, value in fields.items() if name not in required}
            options.append(st.fixed_dictionaries(required, optional=rest))
            options.append(st.fixed_dictionaries({}, optional=fields))
    return st.one_of(options)


def _accepted_by_struct(spec: proto.ToolSpec, value: Any) -> bool:
    try:
        msgspec.json.decode(msgspec.json.encode(value), type=spec.args)
    except msgspec.ValidationError:
        return False
    return True


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_schema_and_struct_accept_the_same_values(
    spec: proto.ToolSpec, data: st.DataObject
) -> None:
    schema = spec.schema()["function"]["parameters"]
    value = data.draw(_near(schema))
    assert _Validator(schema).is_valid(value) == _accepted_by_struct(spec, value), value


@pytest.mark.parametrize("spec", TOOLS, ids=lambda spec: spec.name)
def test_schemas_are_valid_json_schemas_with_an_object_at_the_root(spec: proto.ToolSpec) -> None:
    schema = spec.schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == spec.name
    assert schema["function"]["description"]
    parameters = schema["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object"  # OpenAI wants an object at the root
    text = msgspec.json.encode(parameters).decode()
    assert "$ref" not in text  # inlined
    assert "title" not in text  # shortened


def test_the_schemas_say_the_limits_the_structs_hold() -> None:
    recall = proto.TOOLS["recall"].schema()["function"]["parameters"]["properties"]
    assert recall["query"]["maxLength"] == proto.MAX_QUERY_CHARS
    read_file = proto.TOOLS["read_file"].schema()["function"]["parameters"]["properties"]
    assert read_file["path"]["maxLength"] == proto.MAX_PATH_CHARS
    memory = proto.TOOLS["memory"].schema()["function"]["parameters"]
    assert memory["properties"]["action"]["enum"] == ["add", "consolidate", "remove", "replace"]
    assert memory["required"] == ["action", "file"]


def test_every_example_of_the_spec_parses_and_fits_the_schema() -> None:
    examples = [
        {"action": "add", "file": "memory", "text": "Owner prefers UTC."},
        {"action": "replace", "file": "memory", "old": "a", "text": "b"},
        {"action": "remove", "file": "user", "old": "a"},
        {
            "action": "consolidate",
            "file": "memory",
            "entries": [
                {"old": "a", "keep": True},
                {"old": "b", "text": "b2"},
                {"old": "c", "move": True},
                {"old": "d", "drop": True},
                {"text": "e"},
            ],
        },
    ]
    schema = proto.TOOLS["memory"].schema()["function"]["parameters"]
    for example in examples:
        assert _Validator(schema).is_valid(example)
        proto.parse_memory_args(msgspec.json.encode(example))
