"""Every tool's arguments, as Structs, and the schemas the model sees, made from them.

The model sends a tool's arguments as a JSON string; the tool's Struct is the one
definition of their shape. `ToolSpec.schema()` turns that Struct into the JSON schema of
the OpenAI `tools` array (`msgspec.json.schema`, see `_schema`), with the Struct's
docstring as the tool's description, so what the model is told and what brokerd,
memoryd and loopd accept cannot drift apart.

The core tools are declared in every session, in `CORE_TOOLS` order; the
local tools are found with `find_tool` and used with `call_tool`.
`parse_recall_args` and `parse_memory_args` enforce the arguments' *shape*; the content
rules (an entry matches, the file fits its limit) belong to `entries`, applied by memoryd
to the file as it is at that moment.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import msgspec

from ._schema import model_schema
from ._text import lower_first

__all__ = [
    "CORE_TOOLS",
    "LOCAL_TOOLS",
    "MAX_PATH_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_URL_CHARS",
    "MEMORY_LIMIT",
    "SOUL_LIMIT",
    "TOOLS",
    "USER_LIMIT",
    "CallToolArgs",
    "ClockArgs",
    "ConsolidateItem",
    "FindToolArgs",
    "HttpFetchArgs",
    "ListDirArgs",
    "MemoryAction",
    "MemoryAdd",
    "MemoryArgs",
    "MemoryCall",
    "MemoryConsolidate",
    "MemoryFile",
    "MemoryRemove",
    "MemoryReplace",
    "ReadFileArgs",
    "RecallArgs",
    "ToolArgsError",
    "ToolSpec",
    "parse_memory_args",
    "parse_recall_args",
]

MAX_QUERY_CHARS = 500
MAX_K = 10
DEFAULT_K = 5
MAX_PATH_CHARS = 4096
MAX_URL_CHARS = 2048

MEMORY_LIMIT = 2200
"""memory.md's limit, in characters of its canonical text."""
USER_LIMIT = 1375
"""user.md's limit, in characters of its canonical text."""
SOUL_LIMIT = 4000
"""soul.md's limit, in characters of its text as trimmed."""

MemoryFile = Literal["memory", "user"]
"""The files the memory tool may edit: memory.md and user.md (never soul.md)."""

MemoryAction = Literal["add", "replace", "remove", "consolidate"]


class ToolArgsError(ValueError):
    """A tool's arguments are not JSON, or not of the tool's shape."""

    code = "bad-arguments"


class _Args(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every tool's arguments: an unknown field is refused, never ignored."""


# -- core tools ------------------------------------------------------------------------


class ClockArgs(_Args, frozen=True, kw_only=True):
    """The current date and time (UTC)."""


class RecallArgs(_Args, frozen=True, kw_only=True):
    """Search past conversations and archived memory; best matches first."""

    query: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUERY_CHARS)]
    k: Annotated[int, msgspec.Meta(ge=1, le=MAX_K)] = DEFAULT_K


class _MemoryAction(msgspec.Struct, frozen=True, kw_only=True, tag_field="action"):
    """Base of the four memory edits, as memoryd and `entries` use them.

    Tagged by `action`, so `msgspec.json.encode(args)` is the memory tool's arguments for
    the edit (what an owner's `memory_edit` carries), and `action` names it.
    """

    file: MemoryFile

    @property
    def action(self) -> MemoryAction:
        """The edit's action: its tag on the wire."""
        action: MemoryAction = type(self).__struct_config__.tag  # type: ignore[assignment]
        return action


class MemoryAdd(_MemoryAction, frozen=True, kw_only=True, tag="add"):
    """Add one entry."""

    text: str


class MemoryReplace(_MemoryAction, frozen=True, kw_only=True, tag="replace"):
    """Replace the entry whose text is exactly `old` with `text`."""

    old: str
    text: str


class MemoryRemove(_MemoryAction, frozen=True, kw_only=True, tag="remove"):
    """Remove the entry whose text is exactly `old`."""

    old: str


class ConsolidateItem(_Args, frozen=True, kw_only=True, omit_defaults=True):
    """One item of a consolidate: an existing entry and what becomes of it, or a new entry.

    An item naming an entry (`old`) carries exactly one of `keep`, `text` (its rewrite),
    `move` (to archive.md) or `drop`, each true. An item with only `text` is a new entry.
    What it does not carry is left out of its JSON.
    """

    old: str | None = None
    keep: bool | None = None
    text: str | None = None
    move: bool | None = None
    drop: bool | None = None

    @property
    def fate(self) -> Literal["keep", "rewrite", "move", "drop", "new"]:
        """What this item does; only meaningful on an item that passed the shape check."""
        if self.old is None:
            return "new"
        if self.keep:
            return "keep"
        if self.move:
            return "move"
        if self.drop:
            return "drop"
        return "rewrite"


class MemoryConsolidate(_MemoryAction, frozen=True, kw_only=True, tag="consolidate"):
    """Say, for every current entry of a file, what becomes of it; and add new ones."""

    entries: list[ConsolidateItem]


MemoryArgs = MemoryAdd | MemoryReplace | MemoryRemove | MemoryConsolidate
"""A parsed memory edit, one type per action, as `parse_memory_args` gives it."""


class MemoryCall(_Args, frozen=True, kw_only=True):
    """Propose an edit to memory.md (file memory) or user.md (file user).

    The owner approves it and it applies from the next session. Name entries by their full
    text (old). add: text. replace: old, text. remove: old. consolidate: entries, every
    entry once with one of keep, text, move (to the archive) or drop, and new ones as
    {text}.
    """

    action: MemoryAction
    file: MemoryFile
    old: str | msgspec.UnsetType = msgspec.UNSET
    text: str | msgspec.UnsetType = msgspec.UNSET
    entries: list[ConsolidateItem] | msgspec.UnsetType = msgspec.UNSET


class FindToolArgs(_Args, frozen=True, kw_only=True):
    """Find other tools by what they do; use them with call_tool."""

    query: Annotated[str, msgspec.Meta(min_length=1)]


class CallToolArgs(_Args, frozen=True, kw_only=True):
    """Call a tool found with find_tool."""

    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


# -- local tools -----------------------------------------------------------------------

_AbsolutePath = Annotated[
    str, msgspec.Meta(min_length=1, max_length=MAX_PATH_CHARS, description="absolute path")
]


class ReadFileArgs(_Args, frozen=True, kw_only=True):
    """Read a text file from the owner's machine (only folders the owner granted)."""

    path: _AbsolutePath


class ListDirArgs(_Args, frozen=True, kw_only=True):
    """List the entries of a directory on the owner's machine (only granted folders)."""

    path: _AbsolutePath


class HttpFetchArgs(_Args, frozen=True, kw_only=True):
    """Fetch a web page or document over HTTP(S) (only hosts the owner granted); returns its text."""  # noqa: E501

    url: Annotated[
        str,
        msgspec.Meta(min_length=1, max_length=MAX_URL_CHARS, description="http or https URL"),
    ]


# -- the specs -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    """A tool: its name, the type of its arguments, and what is checked beyond their type."""

    name: str
    args: type[msgspec.Struct]
    described_by: type
    """The class whose docstring is the tool's description."""
    convert: Callable[[Any], Any] | None = None
    """Checks what the type cannot say and gives the parsed value; raises `ToolArgsError`."""

    @property
    def description(self) -> str:
        """The docstring of `described_by`, each paragraph on one line."""
        doc = inspect.getdoc(self.described_by) or ""
        return "\n".join(" ".join(p.split()) for p in doc.split("\n\n"))

    def schema(self) -> dict[str, Any]:
        """The entry of the OpenAI `tools` array for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": model_schema(self.args),
            },
        }

    def parse(self, arguments: str | bytes) -> Any:
        """Decode the model's arguments, or raise `ToolArgsError` saying what is wrong."""
        where = f"{self.name} arguments"
        try:
            value = _decoder(self.args).decode(arguments)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ToolArgsError(f"{where}: {lower_first(str(exc))}") from exc
        except RecursionError:
            raise ToolArgsError(f"{where}: nested too deeply") from None
        except UnicodeEncodeError:
            raise ToolArgsError(f"{where}: not valid Unicode (a lone surrogate)") from None
        return value if self.convert is None else self.convert(value)


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    decoder = _DECODERS.get(kind)
    if decoder is None:
        decoder = _DECODERS[kind] = msgspec.json.Decoder(kind)
    return decoder


_TAKES: dict[str, tuple[str, ...]] = {
    "add": ("text",),
    "replace": ("old", "text"),
    "remove": ("old",),
    "consolidate": ("entries",),
}


def _memory_args(call: MemoryCall) -> MemoryArgs:
    """The typed edit of a decoded call: each action takes exactly its own fields."""
    given = [f for f in ("old", "text", "entries") if getattr(call, f) is not msgspec.UNSET]
    takes = _TAKES[call.action]
    where = f"memory arguments: {call.action}"
    if missing := [f for f in takes if f not in given]:
        raise ToolArgsError(f"{where} needs {_names(missing)}")
    if extra := [f for f in given if f not in takes]:
        raise ToolArgsError(f"{where} takes only {_names(takes)}, not {_names(extra)}")
    match call:
        case MemoryCall(action="add", text=str(text)):
            return MemoryAdd(file=call.file, text=text)
        case MemoryCall(action="replace", old=str(old), text=str(text)):
            return MemoryReplace(file=call.file, old=old, text=text)
        case MemoryCall(action="remove", old=str(old)):
            return MemoryRemove(file=call.file, old=old)
        case MemoryCall(action="consolidate", entries=list(items)):
            for i, item in enumerate(items):
                _check_item(i, item)
            return MemoryConsolidate(file=call.file, entries=items)
    raise AssertionError(f"unhandled {call!r}")  # every action is matched above


def _names(fields: Sequence[str]) -> str:
    return " and ".join(repr(f) for f in fields)


def _check_item(i: int, item: ConsolidateItem) -> None:
    where = f"memory arguments: consolidate item {i}"
    for flag in ("keep", "move", "drop"):
        if getattr(item, flag) is False:
            raise ToolArgsError(f"{where}: {flag!r} may only be true; leave it out instead")
    if item.old is None:
        if item.text is None or item.keep or item.move or item.drop:
            raise ToolArgsError(
                f"{where}: an item without 'old' is a new entry and has only 'text'"
            )
        return
    chosen = [f for f in ("keep", "text", "move", "drop") if getattr(item, f) not in (None, False)]
    if len(chosen) != 1:
        got = " and ".join(repr(f) for f in chosen) if chosen else "none"
        raise ToolArgsError(
            f"{where}: give exactly one of 'keep', 'text', 'move', 'drop' (got {got})"
        )


CLOCK = ToolSpec("clock", ClockArgs, ClockArgs)
RECALL = ToolSpec("recall", RecallArgs, RecallArgs)
MEMORY = ToolSpec("memory", MemoryCall, MemoryCall, _memory_args)
FIND_TOOL = ToolSpec("find_tool", FindToolArgs, FindToolArgs)
CALL_TOOL = ToolSpec("call_tool", CallToolArgs, CallToolArgs)

CORE_TOOLS = (CLOCK, RECALL, MEMORY, FIND_TOOL, CALL_TOOL)
"""Declared in every session, in this order."""

LOCAL_TOOLS = (
    ToolSpec("read_file", ReadFileArgs, ReadFileArgs),
    ToolSpec("list_dir", ListDirArgs, ListDirArgs),
    ToolSpec("http_fetch", HttpFetchArgs, HttpFetchArgs),
)
"""Found with find_tool, used with call_tool, run by brokerd's local runtime."""

TOOLS = {spec.name: spec for spec in (*CORE_TOOLS, *LOCAL_TOOLS)}
"""Every tool boxmaker knows, by name."""


def parse_recall_args(arguments: str | bytes) -> RecallArgs:
    """Parse the model's `recall` arguments, or raise `ToolArgsError` saying what is wrong."""
    args: RecallArgs = RECALL.parse(arguments)
    return args


def parse_memory_args(arguments: str | bytes) -> MemoryArgs:
    """Parse the model's `memory` arguments, or raise `ToolArgsError` saying what is wrong."""
    args: MemoryArgs = MEMORY.parse(arguments)
    return args
