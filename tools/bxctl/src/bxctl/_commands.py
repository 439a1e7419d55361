"""The chat's own commands: a line the owner typed that starts with `/` is bxctl's, not the model's.

Only the owner's typed line is parsed (ARCHITECTURE §6a): the model's text, tool results
and approvals never reach `parse_line`. A line starting with `/` that is no command is
said so and sent nowhere; `//` sends the rest of the line starting with one `/`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "HELP",
    "ChatLine",
    "Forget",
    "Help",
    "Remember",
    "Send",
    "ShowMemory",
    "Undo",
    "Unknown",
    "Usage",
    "Why",
    "parse_line",
]


@dataclass(frozen=True, slots=True)
class Send:
    """Plain text for the model."""

    text: str


@dataclass(frozen=True, slots=True)
class Remember:
    """`/remember [--user] TEXT`: add an entry to memory.md (user.md with --user)."""

    text: str
    file: str = "memory"


@dataclass(frozen=True, slots=True)
class Forget:
    """`/forget PART`: remove the entry holding PART, once confirmed."""

    part: str


@dataclass(frozen=True, slots=True)
class Why:
    """`/why PART`: where each entry holding PART came from."""

    part: str


@dataclass(frozen=True, slots=True)
class Undo:
    """`/undo [EDIT]`: undo the last memory edit (or the one named), once confirmed."""

    edit: str | None = None


@dataclass(frozen=True, slots=True)
class ShowMemory:
    """`/memory`: the memory block a new session would get."""


@dataclass(frozen=True, slots=True)
class Help:
    """`/help`: the commands."""


@dataclass(frozen=True, slots=True)
class Unknown:
    """A line starting with `/` that names no command: nothing is sent."""

    word: str


@dataclass(frozen=True, slots=True)
class Usage:
    """A command without what it needs: how to write it."""

    message: str


ChatLine = Send | Remember | Forget | Why | Undo | ShowMemory | Help | Unknown | Usage

HELP = """\
/remember TEXT         add TEXT to memory.md (what boxmaker remembers), from the next session
/remember --user TEXT  add TEXT to user.md (what it knows about you)
/forget PART           remove the entry holding PART (shown whole, asks y/N)
/why PART              where each entry holding PART came from
/undo [EDIT]           undo the last memory edit, or EDIT (its id, as /why shows it)
/memory                the memory block a new session would start with
/help                  this list
//TEXT                 send /TEXT to the model as it is"""

_COMMAND = re.compile(r"/(?P<word>\S*)\s*(?P<rest>.*)", re.DOTALL)


def parse_line(line: str) -> ChatLine:
    """What the owner's typed line asks for: a command, or text for the model."""
    stripped = line.strip()
    if not stripped.startswith("/"):
        return Send(line)
    if stripped.startswith("//"):
        return Send(stripped[1:])
    match = _COMMAND.fullmatch(stripped)
    assert match is not None  # `/` then anything matches
    word, rest = match["word"], match["rest"].strip()
    match word:
        case "remember":
            file = "memory"
            parts = rest.split(None, 1)
            if parts and parts[0] == "--user":
                file, rest = "user", parts[1] if len(parts) > 1 else ""
            if not rest:
                return Usage("say what to remember: /remember TEXT (or /remember --user TEXT)")
            return Remember(rest, file)
        case "forget":
            return Forget(rest) if rest else Usage("say which entry: /forget PART")
        case "why":
            return Why(rest) if rest else Usage("say which entry: /why PART")
        case "undo":
            return Undo(rest or None)
        case "memory":
            return ShowMemory()
        case "help":
            return Help()
        case _:
            return Unknown(word)
