"""The owner's memory commands, as typed in the chat (`/remember`) or posted (`!remember`).

One grammar for both surfaces (the terminal's `/`, Mattermost's `!`, whose own client
takes `/` for its slash commands), so a command means the same wherever it is written:

- `{sigil}` and a letter start a command; the word is read case-insensitively (a phone
  writes `!Remember`). Anything else, or `{sigil}{sigil}text` (which is `{sigil}text`),
  is a message for the model.
- Options come first, before the text: `--user` or `--memory` (which file), `--yes`
  (apply at once, showing what changes, instead of asking); `--` ends them, so text may
  start with `--`. An option a command does not take is an error, never part of the text.
  `undo`, whose one argument is an id, takes its options after the id too.
- Entries are named by any part of their text (`remove`, `why`), at most
  `proto.MAX_PART_CHARS` characters; edits by their id (`undo`, `ed-` and six characters).

Only the owner's own typed line or post is ever parsed: the model's
text, tool results and anyone else's posts never reach `parse_command`. `COMMANDS` is the
one table both surfaces' help and the documentation are made from (`help_rows`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import proto
from proto import MemoryFile

__all__ = [
    "COMMANDS",
    "CommandHelp",
    "ForModel",
    "Forget",
    "Help",
    "NotACommand",
    "OwnerCommand",
    "Parsed",
    "Remember",
    "Remove",
    "Replace",
    "ShowMemory",
    "Sigil",
    "Undo",
    "Usage",
    "Where",
    "Why",
    "command_for",
    "help_rows",
    "parse_command",
    "part_problem",
]

Sigil = Literal["/", "!"]
"""What starts a command: `/` in the terminal's chat, `!` in Mattermost."""

Where = Literal["chat", "mattermost", "cli"]
"""Where the owner gives commands: `bxctl chat`, Mattermost, or bxctl's command line."""

_SIGILS: dict[Where, Sigil] = {"chat": "/", "mattermost": "!"}
_CLI = {"memory": "bxctl memory show", "why": "bxctl memory why PART", "undo": "bxctl memory undo"}


def command_for(where: Where, word: str) -> str:
    """How the owner writes command `word` where they are: `/why`, `!why`, `bxctl memory why`."""
    if where == "cli":
        return _CLI[word]
    return _SIGILS[where] + word


@dataclass(frozen=True, slots=True)
class Remember:
    """Add `text` as an entry of memory.md (user.md with `file="user"`)."""

    text: str
    file: MemoryFile = "memory"


@dataclass(frozen=True, slots=True)
class Remove:
    """Remove the one entry named by `part` (of `file` only, if given): undoable.

    `confirmed` (`--yes`): remove it at once, saying what was removed, without asking.
    """

    part: str
    file: MemoryFile | None = None
    confirmed: bool = False


@dataclass(frozen=True, slots=True)
class Forget:
    """Erase `text` from every file boxmaker wrote, for good, after a preview.

    `confirmed` (`--yes`): forget at once, showing the preview, without asking.
    """

    text: str
    confirmed: bool = False


@dataclass(frozen=True, slots=True)
class Replace:
    """Replace the one entry named by `part` (of `file` only, if given) with `text`.

    `bxctl memory replace`'s; no chat or Mattermost command writes it.
    """

    part: str
    text: str
    file: MemoryFile | None = None
    confirmed: bool = False


@dataclass(frozen=True, slots=True)
class Why:
    """Where each entry holding `part` came from."""

    part: str


@dataclass(frozen=True, slots=True)
class Undo:
    """Undo the edit `edit` (an edit id), or the last one.

    `confirmed` (`--yes`): undo it at once, saying what changed, without asking.
    """

    edit: str | None = None
    confirmed: bool = False


@dataclass(frozen=True, slots=True)
class ShowMemory:
    """The memory block a new session would start with."""


@dataclass(frozen=True, slots=True)
class Help:
    """The commands."""


OwnerCommand = Remember | Remove | Forget | Replace | Why | Undo | ShowMemory | Help
"""A command the owner gave; run by `entries.run_command` on every surface."""


@dataclass(frozen=True, slots=True)
class NotACommand:
    """`{sigil}word` where the word names no command: nothing is sent anywhere."""

    word: str


@dataclass(frozen=True, slots=True)
class Usage:
    """A command written so that it cannot be run: `problem` says why and how to write it."""

    problem: str


@dataclass(frozen=True, slots=True)
class ForModel:
    """Not a command: a message for the model, as it is to be sent."""

    text: str


Parsed = OwnerCommand | NotACommand | Usage | ForModel
"""What a line or post of the owner's is."""


@dataclass(frozen=True, slots=True)
class CommandHelp:
    """One row of the commands' help: how to write it (without the sigil), what it does."""

    usage: str
    summary: str


COMMANDS: tuple[CommandHelp, ...] = (
    CommandHelp(
        "remember TEXT",
        "add TEXT to memory.md (what boxmaker remembers); it takes effect in the next session",
    ),
    CommandHelp("remember --user TEXT", "add TEXT to user.md (what it knows about you)"),
    CommandHelp(
        "remove PART",
        "take the entry holding PART out of memory, shown whole first; you confirm it; "
        "undoable, its text stays in the history (--user or --memory: that file only)",
    ),
    CommandHelp(
        "forget TEXT",
        "erase TEXT from every file boxmaker wrote (memory, history, sessions, audit, "
        "index), for good: shown store by store first; you confirm it; cannot be undone",
    ),
    CommandHelp("why PART", "where each entry holding PART came from, edit by edit"),
    CommandHelp(
        "undo [EDIT]",
        "undo the last memory edit, or EDIT (its id, as why shows it); you confirm it",
    ),
    CommandHelp("memory", "the memory block a new session would start with"),
    CommandHelp("help", "this list"),
)
"""Every command, in the order the help lists them."""

_OPTIONS: dict[str, frozenset[str]] = {
    "remember": frozenset({"--user", "--memory"}),
    "remove": frozenset({"--user", "--memory", "--yes"}),
    "forget": frozenset({"--yes"}),
    "why": frozenset(),
    "undo": frozenset({"--yes"}),
    "memory": frozenset(),
    "help": frozenset(),
}

_COMMAND = re.compile(r"(?P<word>[A-Za-z]\S*)(?P<rest>.*)", re.DOTALL)
_OPTION = re.compile(r"--\S*")


def help_rows(sigil: Sigil) -> list[tuple[str, str]]:
    """The help as (how to write it, what it does) rows, the escape for the model last."""
    rows = [(sigil + row.usage, row.summary) for row in COMMANDS]
    rows.append((f"{sigil}{sigil}TEXT", f"send {sigil}TEXT to boxmaker as it is"))
    return rows


def parse_command(text: str, sigil: Sigil) -> Parsed:
    """What the owner's line or post `text` asks for: a command, or a message for the model."""
    stripped = text.strip()
    if stripped.startswith(sigil * 2):
        return ForModel(stripped[1:])
    if not stripped.startswith(sigil):
        return ForModel(text)
    match = _COMMAND.match(stripped, 1)
    if match is None:
        return ForModel(text)  # `/` alone, `/5 stars`: not a command's name
    word = match["word"].lower()
    if word not in _OPTIONS:
        return NotACommand(match["word"])
    options, rest = _options(match["rest"])
    if word == "undo":  # an id is one word: its options may follow it too (`undo ID --yes`)
        words = rest.split()
        options |= {w for w in words if w.startswith("--")}
        rest = " ".join(w for w in words if not w.startswith("--"))
    allowed = _OPTIONS[word]
    if unknown := [o for o in options if o not in allowed]:
        takes = " and ".join(f"`{o}`" for o in sorted(allowed)) or "no options"
        return Usage(
            f"`{sigil}{word}` takes {takes}, not `{unknown[0]}` (text that starts with -- "
            f"goes after a lone --: `{sigil}{word} -- --text`)"
        )
    if {"--user", "--memory"} <= options:
        return Usage(f"`{sigil}{word}` takes one of --user and --memory, not both")
    file: MemoryFile | None = (
        "user" if "--user" in options else "memory" if "--memory" in options else None
    )
    confirmed = "--yes" in options
    match word:
        case "remember":
            if not rest:
                return Usage(
                    f"say what to remember: `{sigil}remember TEXT` (`{sigil}remember --user "
                    "TEXT` for what it knows about you)"
                )
            return Remember(rest, file or "memory")
        case "remove":
            return _named(Remove(rest, file, confirmed), rest, sigil, "remove")
        case "forget":
            if (problem := proto.forget_problem(rest)) is not None:
                return Usage(f"{problem}: `{sigil}forget TEXT`")
            return Forget(rest, confirmed)
        case "why":
            return _named(Why(rest), rest, sigil, "why")
        case "undo":
            if rest and proto.EDIT_ID.fullmatch(rest) is None:
                return Usage(
                    f"`{sigil}undo` takes an edit id like `ed-4k2x9q` (`{sigil}why` shows "
                    f"each entry's edits), or nothing for the last edit; not `{_clip(rest)}`"
                )
            return Undo(rest or None, confirmed)
        case "memory":
            if rest:
                return Usage(f"`{sigil}memory` takes nothing after it")
            return ShowMemory()
        case _:
            return Help()


def _options(rest: str) -> tuple[set[str], str]:
    """The options before the text (up to a lone `--`), and the text after them, trimmed."""
    options: set[str] = set()
    rest = rest.strip()
    while (option := _OPTION.match(rest)) is not None and (
        option.end() == len(rest) or rest[option.end()].isspace()
    ):
        rest = rest[option.end() :].strip()
        if option[0] == "--":
            break
        options.add(option[0])
    return options, rest


def part_problem(part: str) -> str | None:
    """Why `part` cannot name an entry (empty, or too long to be part of one), or None."""
    part = part.strip()
    if not part:
        return "say which entry: any part of its text"
    if len(part) > proto.MAX_PART_CHARS:
        return (
            f"name the entry by at most {proto.MAX_PART_CHARS:,} characters of it; that "
            f"part is {len(part):,}"
        )
    return None


def _named(command: Remove | Why, part: str, sigil: Sigil, word: str) -> Parsed:
    if not part:
        return Usage(f"say which entry: `{sigil}{word} PART`, any part of its text")
    problem = part_problem(part)
    return command if problem is None else Usage(problem)


def _clip(text: str, shown: int = 40) -> str:
    return text if len(text) <= shown else text[:shown] + "…"
