"""The tools a session declares, and the registry `find_tool` searches (spec §5, §9).

The five core tools are declared in every session, in this order: clock, recall,
memory, find_tool, call_tool. Their schemas go into the baseline and count toward its
tokens, so the descriptions say what the model needs and no more.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["CORE_TOOLS", "CORE_TOOL_NAMES", "REGISTRY", "find_tools", "tool_schemas"]


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


_OBJECT = {"type": "object"}

CORE_TOOLS: list[dict[str, Any]] = [
    _function("clock", "The current date and time (UTC).", {**_OBJECT, "properties": {}}),
    _function(
        "recall",
        "Search past conversations and archived memory; best matches first.",
        {
            **_OBJECT,
            "properties": {
                "query": {"type": "string", "maxLength": 500},
                "k": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["query"],
        },
    ),
    _function(
        "memory",
        "Propose an edit to memory.md (file memory, 2,200 chars) or user.md (file user, "
        "1,375 chars); the owner approves it and it applies from the next session. Name "
        "entries by their full text (old). consolidate lists every entry once with keep, "
        "text, move (to the archive) or drop, and new ones as {text}.",
        {
            **_OBJECT,
            "properties": {
                "action": {"enum": ["add", "replace", "remove", "consolidate"]},
                "file": {"enum": ["memory", "user"]},
                "old": {"type": "string"},
                "text": {"type": "string"},
                "entries": {"type": "array", "items": _OBJECT},
            },
            "required": ["action", "file"],
        },
    ),
    _function(
        "find_tool",
        "Find other tools by what they do; use them with call_tool.",
        {**_OBJECT, "properties": {"query": {"type": "string"}}, "required": ["query"]},
    ),
    _function(
        "call_tool",
        "Call a tool found with find_tool.",
        {
            **_OBJECT,
            "properties": {"name": {"type": "string"}, "arguments": _OBJECT},
            "required": ["name", "arguments"],
        },
    ),
]

CORE_TOOL_NAMES = tuple(t["function"]["name"] for t in CORE_TOOLS)

REGISTRY: dict[str, dict[str, Any]] = {
    "read_file": _function(
        "read_file",
        "Read a text file from the owner's machine (only folders the owner granted).",
        {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "absolute path"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    "list_dir": _function(
        "list_dir",
        "List the entries of a directory on the owner's machine (only granted folders).",
        {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "absolute path"}},
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    "http_fetch": _function(
        "http_fetch",
        "Fetch a web page or document over HTTP(S) (only hosts the owner granted); "
        "returns its text.",
        {
            "type": "object",
            "properties": {"url": {"type": "string", "description": "http or https URL"}},
            "required": ["url"],
            "additionalProperties": False,
        },
    ),
}


def tool_schemas() -> list[dict[str, Any]]:
    """The tools array of a new session's baseline."""
    return [dict(t) for t in CORE_TOOLS]


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
