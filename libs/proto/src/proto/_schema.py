"""A tool's JSON schema for the model, made from its arguments' type by msgspec.

`msgspec.json.schema` gives a correct JSON Schema, shaped for documentation: `$ref`s into
`$defs`, titles, a `discriminator` for tagged unions, `anyOf` for every optional field.
A model server reads the schema as tokens of the prompt (and some turn it into a
grammar), so `model_schema` rewrites it into an equivalent, shorter one:

* `$ref`s are inlined (no recursive types here) and `$defs` dropped;
* `title`, `discriminator` and a `null` default go (annotations, not constraints);
* `anyOf` of plain types becomes one `type` list; an `enum` or `null` becomes one `enum`;
* an empty `required` goes;
* the `description` of an object goes: it is a Struct's docstring, written for Python
  readers (the root's is the tool's own description); a field's stays.

Each step keeps the set of accepted values the same; a property test checks the result
against the Struct itself (`tests/proto/test_schemas.py`).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["model_schema"]

_ANNOTATIONS = frozenset({"title", "discriminator", "$defs"})


def model_schema(kind: Any) -> dict[str, Any]:
    """The compact schema of the Struct type `kind`."""
    raw = msgspec.json.schema(kind)
    schema = _compact(_inline(raw, raw.get("$defs", {})))
    assert isinstance(schema, dict)
    return schema


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in _ANNOTATIONS}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def _compact(node: Any) -> Any:
    if isinstance(node, list):
        return [_compact(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {k: _compact(v) for k, v in node.items()}
    if node.get("default", 0) is None:
        del node["default"]
    if node.get("required") == []:
        del node["required"]
    if node.get("type") == "object":
        node.pop("description", None)
    options = node.get("anyOf")
    if isinstance(options, list):
        merged = _merge(options)
        if merged is not None:
            del node["anyOf"]
            node.update(merged)
    return node


def _merge(options: list[Any]) -> dict[str, Any] | None:
    """One schema for `anyOf` options that are each a bare type or a bare enum, else None."""
    types: list[str] = []
    values: list[Any] = []
    for option in options:
        if not isinstance(option, dict) or len(option) != 1:
            return None
        if isinstance(option.get("type"), str):
            types.append(option["type"])
        elif isinstance(option.get("enum"), list):
            values.extend(option["enum"])
        else:
            return None
    if values:
        if types != ["null"] and types:
            return None
        return {"enum": [*values, None] if types else values}
    return {"type": types}
