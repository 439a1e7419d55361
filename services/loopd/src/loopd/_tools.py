"""The tools a session declares, and the registry `find_tool` searches.

The five core tools are declared in every session, in this order: clock, recall,
memory, find_tool, call_tool. Their arguments and schemas are proto's (`proto.ToolSpec`,
made from the argument Structs); the schemas go into the baseline and count toward its
tokens.
"""

from __future__ import annotations

import re
from typing import Any

import proto

__all__ = ["CORE_TOOL_NAMES", "REGISTRY", "find_tools", "tool_schemas"]


CORE_TOOL_NAMES = tuple(spec.name for spec in proto.CORE_TOOLS)

REGISTRY: dict[str, dict[str, Any]] = {spec.name: spec.schema() for spec in proto.LOCAL_TOOLS}
"""The tools `find_tool` finds and `call_tool` calls, by name, with their schemas."""

_CORE_SCHEMAS = [spec.schema() for spec in proto.CORE_TOOLS]


def tool_schemas() -> list[dict[str, Any]]:
    """The tools array of a new session's baseline."""
    return list(_CORE_SCHEMAS)


_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset(
    {"a", "an", "the", "of", "to", "and", "or", "in", "on", "for", "with", "my", "me"}
)


def find_tools(query: str) -> list[dict[str, Any]]:
    """Registry tools whose name or description shares a word with `query`, best first."""
    words = {w.lower() for w in _WORD.findall(query)} - _STOP
    scored = []
    for name, schema in REGISTRY.items():
        text = f"{name.replace('_', ' ')} {schema['function']['description']}".lower()
        score = len(words & set(_WORD.findall(text)))
        if score:
            scored.append((-score, name, schema))
    return [schema for _, _, schema in sorted(scored, key=lambda s: (s[0], s[1]))]
