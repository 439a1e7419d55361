"""The arguments of the two memory tools, `recall` and `memory` (spec §5).

The model sends a tool's arguments as a JSON string. `parse_recall_args` and
`parse_memory_args` turn that string into typed values and enforce the *shape* of
spec §5; the content rules (an entry matches, the file fits its limit) belong to
`entries`, which memoryd applies to the file as it is at that moment.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = [
    "MAX_QUERY_CHARS",
    "ConsolidateItem",
    "MemoryAdd",
    "MemoryArgs",
    "MemoryConsolidate",
    "MemoryFile",
    "MemoryRemove",
    "MemoryReplace",
    "RecallArgs",
    "ToolArgsError",
    "parse_memory_args",
    "parse_recall_args",
]

MAX_QUERY_CHARS = 500
MAX_K = 10
DEFAULT_K = 5

MemoryFile = Literal["memory", "user"]
"""The files the memory tool may edit: memory.md and user.md (never soul.md)."""


class ToolArgsError(ValueError):
    """A tool's arguments are not JSON, or not of the tool's shape."""

    code = "bad-arguments"


class RecallArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`{"query": string, "k": integer}`; query 1 to 500 characters, k 1 to 10."""

    query: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUERY_CHARS)]
    k: Annotated[int, msgspec.Meta(ge=1, le=MAX_K)] = DEFAULT_K


class _MemoryAction(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="action"
):
    """Base of the four memory actions; `action` carries the tag."""

    file: MemoryFile


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


class ConsolidateItem(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One item of a consolidate: an existing entry and what becomes of it, or a new entry.

    An item naming an entry (`old`) carries exactly one of `keep`, `text` (its rewrite),
    `move` (to archive.md) or `drop`. An item with only `text` is a new entry.
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

_recall_decoder = msgspec.json.Decoder(RecallArgs)
_memory_decoder = msgspec.json.Decoder(MemoryArgs)


def parse_recall_args(arguments: str | bytes) -> RecallArgs:
    """Parse the model's `recall` arguments, or raise `ToolArgsError` saying what is wrong."""
    try:
        return _recall_decoder.decode(arguments)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ToolArgsError(f"recall arguments: {_lower(exc)}") from exc
    except RecursionError:
        raise ToolArgsError("recall arguments: nested too deeply") from None
    except UnicodeEncodeError:
        raise ToolArgsError("recall arguments: not valid Unicode (a lone surrogate)") from None


def parse_memory_args(arguments: str | bytes) -> MemoryArgs:
    """Parse the model's `memory` arguments, or raise `ToolArgsError` saying what is wrong."""
    try:
        args = _memory_decoder.decode(arguments)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ToolArgsError(f"memory arguments: {_lower(exc)}") from exc
    except RecursionError:
        raise ToolArgsError("memory arguments: nested too deeply") from None
    except UnicodeEncodeError:
        raise ToolArgsError("memory arguments: not valid Unicode (a lone surrogate)") from None
    if isinstance(args, MemoryConsolidate):
        for i, item in enumerate(args.entries):
            _check_item(i, item)
    return args


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


def _lower(exc: Exception) -> str:
    return lower_first(str(exc))


def lower_first(text: str) -> str:
    """Lower-case a message's first letter, unless it starts an acronym ("JSON is …")."""
    if text[:2].isupper():
        return text
    return text[:1].lower() + text[1:]
