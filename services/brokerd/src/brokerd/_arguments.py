"""A tool call's arguments: parsed, checked, and made canonical before anything is decided.

The model sends arguments as a JSON string. brokerd decodes it (duplicate keys refused),
re-encodes it canonically (compact, UTF-8, keys in the model's order), and parses that
text with the tool's parser from proto (`proto.TOOLS`: recall's and memory's, the
local tools' Structs), any other tool as a JSON object. The canonical text is what the
owner approves, what the audit log records and what the runtime runs, so what is
approved is byte for byte what runs.

The shape only: what a memory edit does to its file (a text over the file's limit, an
entry that is not there) is memoryd's to say, with the spec's sentences, whoever made the
edit. An owner asked to approve a model's text that is too long may approve a shorter
version of their own.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import msgspec

import proto

__all__ = [
    "Arguments",
    "ArgumentsRefused",
    "LocalArgs",
    "OtherArgs",
    "ToolArgs",
    "check_tool_name",
    "parse_arguments",
]

_TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


ArgumentsRefused = proto.ToolArgsError
"""Arguments that are not JSON, or not of the tool's shape; the message says why."""


@dataclasses.dataclass(frozen=True)
class OtherArgs:
    """The arguments of a tool brokerd knows no shape of (a grant's own tool): the object."""

    fields: dict[str, Any]


LocalArgs = proto.ReadFileArgs | proto.ListDirArgs | proto.HttpFetchArgs
"""The arguments of the local runtime's tools."""

ToolArgs = proto.RecallArgs | proto.MemoryArgs | LocalArgs | OtherArgs
"""A call's arguments, parsed by its tool's parser."""


@dataclasses.dataclass(frozen=True)
class Arguments:
    """A call's arguments: the canonical text and the parsed value."""

    canonical: str
    value: ToolArgs


def check_tool_name(name: str) -> None:
    """Refuse a tool name that could not be a grant's (`[a-z][a-z0-9_]{0,63}`)."""
    if _TOOL_NAME.fullmatch(name) is None:
        shown = name if len(name) <= 64 else name[:64] + "…"
        raise ArgumentsRefused(
            f"{shown!r} is not a tool name (lower-case letters, digits and _, at most 64)"
        )


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ArgumentsRefused(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ArgumentsRefused(f"{name} is not JSON")


def _decode(tool: str, raw: str) -> dict[str, Any]:
    # The json module, not msgspec: only it can refuse a duplicate key (msgspec keeps the
    # last), and a duplicate key would let the owner approve one value while another runs.
    try:
        value = json.loads(
            raw, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
        )
    except ArgumentsRefused as exc:
        raise ArgumentsRefused(f"{tool} arguments are not valid JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ArgumentsRefused(f"{tool} arguments are not JSON: {exc}") from None
    except RecursionError:
        raise ArgumentsRefused(f"{tool} arguments are nested too deeply") from None
    if not isinstance(value, dict):
        raise ArgumentsRefused(
            f"{tool} arguments must be a JSON object, got {type(value).__name__}"
        )
    return value


def _canonical(tool: str, value: dict[str, Any]) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except RecursionError:
        raise ArgumentsRefused(f"{tool} arguments are nested too deeply") from None
    except UnicodeEncodeError:
        raise ArgumentsRefused(f"{tool} arguments contain a lone surrogate") from None


_PARSERS: dict[str, Callable[[str], ToolArgs]] = {
    "recall": proto.TOOLS["recall"].parse,
    "memory": proto.parse_memory_args,
    **{spec.name: spec.parse for spec in proto.LOCAL_TOOLS},
}


def parse_arguments(tool: str, raw: str) -> Arguments:
    """Parse a call's raw JSON arguments for `tool`, or raise `ArgumentsRefused`."""
    value = _decode(tool, raw)
    canonical = _canonical(tool, value)
    parser = _PARSERS.get(tool)
    return Arguments(canonical=canonical, value=parser(canonical) if parser else OtherArgs(value))
