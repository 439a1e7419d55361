"""The owner's commands in Mattermost: `!remember`, `!forget`, `!why`, `!undo`, `!memory`.

They are the terminal's `/remember` and friends written with `!` (Mattermost's own client
takes `/` for its slash commands). Only the owner's own posts are read as commands (the
inbox decides whose a post is); nothing the model or a tool writes reaches this parser.
A command is answered in its thread by the bridge and never sent to the model. `!!text`
is the message `!text` for the model.

Writes to memory go to brokerd as the owner's own edit (`memory_edit`, decided `owner`,
audited with the post that asked); they take effect in the next session, as every edit.
A command that removes or undoes something names the whole entry or edit back and asks
for the same command again with `--yes`, the Mattermost form of the terminal's `y/N`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "COMMANDS_HELP",
    "Forget",
    "Help",
    "OwnerCommand",
    "Remember",
    "ShowMemory",
    "Undo",
    "Unknown",
    "Why",
    "parse_command",
]


@dataclass(frozen=True)
class Remember:
    """`!remember [--user] TEXT`: add an entry (memory.md, or user.md with --user)."""

    text: str
    file: str = "memory"


@dataclass(frozen=True)
class Forget:
    """`!forget [--user] [--yes] PART`: remove the one entry holding PART."""

    part: str
    file: str | None = None
    confirmed: bool = False


@dataclass(frozen=True)
class Why:
    """`!why PART`: where each entry holding PART came from."""

    part: str


@dataclass(frozen=True)
class Undo:
    """`!undo [EDIT] [--yes]`: undo an edit (the last one by default)."""

    edit: str | None = None
    confirmed: bool = False


@dataclass(frozen=True)
class ShowMemory:
    """`!memory`: the memory block a new session would get now."""


@dataclass(frozen=True)
class Help:
    """`!help`."""


@dataclass(frozen=True)
class Unknown:
    """A `!word` that is not a command (or a command without what it needs)."""

    said: str
    problem: str


OwnerCommand = Remember | Forget | Why | Undo | ShowMemory | Help | Unknown

COMMANDS_HELP = (
    "Commands (yours only, in any thread; answered here, never sent to the model):\n"
    "- `!remember TEXT`: add an entry to memory.md (`!remember --user TEXT`: to user.md)\n"
    "- `!forget PART`: remove the entry holding PART (asks you to confirm)\n"
    "- `!why PART`: where each entry holding PART came from\n"
    "- `!undo`: undo the last edit (`!undo ed-…` an earlier one; asks you to confirm)\n"
    "- `!memory`: what a new session would get\n"
    "Every edit takes effect in the next session. `!!text` sends `!text` to boxmaker."
)

_WORD = re.compile(r"!(?P<word>[A-Za-z][A-Za-z-]*)(?P<rest>(?:\s.*)?)\Z", re.DOTALL)
_FLAG = re.compile(r"(?P<flag>--(?:user|yes|memory))(?=\s|\Z)\s*")
_EDIT_ID = re.compile(r"ed-[a-z0-9]{6}")


def parse_command(message: str) -> OwnerCommand | None:
    """The command in an owner's post, or None when the post is a message for the model.

    A post is a command when its first character is `!` followed by a letter; `!!…`
    and anything else is a message (the caller sends `!!text` as `!text`).
    """
    text = message.strip()
    match = _WORD.match(text)
    if match is None:
        return None
    word = match["word"].lower()
    flags, rest = _flags(match["rest"].strip())
    user = "--user" in flags
    yes = "--yes" in flags
    if word == "remember":
        if not rest:
            return Unknown(text, "`!remember` needs the text to remember: `!remember TEXT`")
        return Remember(rest, "user" if user else "memory")
    if word == "forget":
        if not rest:
            return Unknown(text, "`!forget` needs a part of the entry to remove: `!forget PART`")
        return Forget(rest, "user" if user else ("memory" if "--memory" in flags else None), yes)
    if word == "why":
        if not rest:
            return Unknown(text, "`!why` needs a part of an entry: `!why PART`")
        return Why(rest)
    if word == "undo":
        if rest.endswith(" --yes"):  # `!undo ed-4k2x9q --yes`, as the bridge's answer writes it
            rest, yes = rest.removesuffix(" --yes").strip(), True
        if rest and _EDIT_ID.fullmatch(rest) is None:
            return Unknown(text, "`!undo` takes an edit id like `ed-4k2x9q`, or nothing")
        return Undo(rest or None, yes)
    if word == "memory" and not rest:
        return ShowMemory()
    if word == "help":
        return Help()
    return Unknown(text, f"there is no command `!{word}`")


def _flags(rest: str) -> tuple[set[str], str]:
    """Leading `--user`/`--yes`/`--memory` flags and the text after them."""
    flags: set[str] = set()
    while (match := _FLAG.match(rest)) is not None:
        flags.add(match["flag"])
        rest = rest[match.end() :]
    return flags, rest.strip()


def unescaped(message: str) -> str:
    """An owner's message as the model gets it: `!!text` is `!text`."""
    stripped = message.lstrip()
    return stripped[1:] if stripped.startswith("!!") else message
