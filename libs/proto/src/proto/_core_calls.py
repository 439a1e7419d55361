"""A call of a core tool, read once into what it asks for.

The model names one of the core tools and sends its arguments as a JSON string.
`parse_core_call` reads both, once, and gives one variant of `CoreCall`; loopd `match`es
on it, so a tool added to the union is a type error until it is handled. Reading never
raises: a name that is no core tool and arguments of the wrong shape are variants too.

recall and memory go to brokerd as the model made them: brokerd and memoryd parse their
arguments (and refuse them in their own words). call_tool's arguments are read here, and
the local tool they name becomes the call brokerd gets.
"""

from __future__ import annotations

import msgspec

from ._messages import ToolCall
from ._tools import CALL_TOOL, FIND_TOOL, LOCAL_TOOLS, CallToolArgs, FindToolArgs, ToolArgsError

__all__ = [
    "BadArgs",
    "Brokered",
    "CallTool",
    "Clock",
    "CoreCall",
    "FindTool",
    "NoSuchLocalTool",
    "NoSuchTool",
    "parse_core_call",
]

_encoder = msgspec.json.Encoder()
_LOCAL_NAMES = frozenset(spec.name for spec in LOCAL_TOOLS)


class Clock(msgspec.Struct, frozen=True, kw_only=True):
    """clock: the current time. Its arguments are not read (it takes none)."""


class FindTool(msgspec.Struct, frozen=True, kw_only=True):
    """find_tool, with its arguments."""

    args: FindToolArgs


class Brokered(msgspec.Struct, frozen=True, kw_only=True):
    """recall or memory: brokerd decides and runs `call`, exactly as the model made it."""

    call: ToolCall


class CallTool(msgspec.Struct, frozen=True, kw_only=True):
    """call_tool naming a local tool: `call` is that tool's call, for brokerd.

    It keeps the call_tool's id (its result answers the call the model made), with the
    local tool's name and its arguments as JSON.
    """

    call: ToolCall


class NoSuchTool(msgspec.Struct, frozen=True, kw_only=True):
    """A call of a tool that is not a core tool (the session declares only those)."""

    name: str


class NoSuchLocalTool(msgspec.Struct, frozen=True, kw_only=True):
    """A call_tool naming a tool that is not a local tool."""

    name: str


class BadArgs(msgspec.Struct, frozen=True, kw_only=True):
    """Arguments that are not JSON, or not of the tool's shape; `message` says why."""

    message: str


CoreCall = Clock | FindTool | Brokered | CallTool | NoSuchTool | NoSuchLocalTool | BadArgs
"""What a core tool call asks for, as `parse_core_call` reads it."""


def parse_core_call(call: ToolCall) -> CoreCall:
    """What `call` asks for; never raises (an unusable call is a variant too).

    Arguments left empty read as `{}`: a model that calls a tool without arguments sends
    an empty string.
    """
    arguments = call.arguments or "{}"
    try:
        match call.name:
            case "clock":
                return Clock()
            case "find_tool":
                found: FindToolArgs = FIND_TOOL.parse(arguments)
                return FindTool(args=found)
            case "recall" | "memory":
                return Brokered(call=call)
            case "call_tool":
                wrapped: CallToolArgs = CALL_TOOL.parse(arguments)
                if wrapped.name not in _LOCAL_NAMES:
                    return NoSuchLocalTool(name=wrapped.name)
                inner = _encoder.encode(wrapped.arguments).decode()
                return CallTool(call=ToolCall(id=call.id, name=wrapped.name, arguments=inner))
            case name:
                return NoSuchTool(name=name)
    except ToolArgsError as exc:
        return BadArgs(message=str(exc))
