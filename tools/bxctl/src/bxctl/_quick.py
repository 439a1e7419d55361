"""The one-request commands an owner runs most, started without cyclopts.

`bxctl memory show`, `approvals list`, `sessions list` and `recall WORDS` are each one
request and one answer; importing cyclopts (and attrs, which it builds its classes
with) and building the whole app took about 40% of their time. When the arguments are
in the plain form below, `route` names the function to call; anything else, an option
that is not `--json`, a word starting with `-`, `--help`, goes to cyclopts as before.

Each function here is also the body of the cyclopts command of the same name in `_app`,
which passes every argument on unchanged: whichever parser reads the arguments, the
same function runs with the same arguments. tests/bxctl/test_start.py proves it for
arbitrary arguments by running both parsers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "QUICK",
    "RECALL_K",
    "SESSIONS_LIMIT",
    "Quick",
    "Route",
    "approvals_list",
    "memory_show",
    "recall",
    "route",
    "sessions_list",
]

RECALL_K = 5
"""`bxctl recall`'s default number of hits (cyclopts' command says it from here too)."""


class Route(NamedTuple):
    """A command and the arguments cyclopts would bind for it."""

    command: Callable[..., int]
    args: tuple[str, ...]
    kwargs: dict[str, object]


def memory_show(*, home: Path | None) -> int:
    """`bxctl memory show`."""
    from ._common import home_of
    from ._owner import memory_show as run

    return run(home_of(home))


def approvals_list(*, home: Path | None, json: bool) -> int:
    """`bxctl approvals list [--json]`."""
    from ._common import home_of
    from ._owner import approvals_list as run

    return run(home_of(home), as_json=json)


SESSIONS_LIMIT = 50
"""`bxctl sessions list`'s page (cyclopts' command says it from here too)."""


def sessions_list(*, home: Path | None, json: bool, limit: int, before: str | None) -> int:
    """`bxctl sessions list [--json] [--limit N] [--before ID]`."""
    from ._common import home_of
    from ._sessions import sessions_list as run

    return run(home_of(home), as_json=json, limit=limit, before=before)


def recall(*words: str, home: Path | None, k: int, json: bool) -> int:
    """`bxctl recall WORDS [-k K] [--json]`."""
    from ._common import CommandError, home_of
    from ._owner import recall as run

    query = " ".join(words).strip()
    if not query:
        raise CommandError("say what to look for: `bxctl recall Heron launch`")
    if not 1 <= k <= 10:
        raise CommandError(f"-k is how many hits to show, 1 to 10; {k} is not")
    return run(home_of(home), query, k, as_json=json)


@dataclass(frozen=True)
class Quick:
    """A command the quick route takes: its function, and the plain forms of its arguments.

    `switches` are the boolean options it may be given (each at most once, by itself);
    `words` says it takes words (none starting with `-`, at least one); `defaults` are
    the keyword arguments the plain form leaves at cyclopts' defaults.
    """

    command: Callable[..., int]
    switches: tuple[str, ...] = ()
    words: bool = False
    defaults: dict[str, object] = field(default_factory=dict)


QUICK: dict[tuple[str, ...], Quick] = {
    ("memory", "show"): Quick(memory_show),
    ("approvals", "list"): Quick(approvals_list, switches=("--json",)),
    ("sessions", "list"): Quick(
        sessions_list, switches=("--json",), defaults={"limit": SESSIONS_LIMIT, "before": None}
    ),
    ("recall",): Quick(recall, words=True, defaults={"k": RECALL_K, "json": False}),
}
"""Every command the quick route takes, by the words that name it: the one table the route
reads, and tests/bxctl/test_start.py fuzzes against cyclopts."""


def route(args: list[str]) -> Route | None:
    """The call for `args` (without `--home`) if they are in a plain form, else None."""
    for head, quick in QUICK.items():
        if tuple(args[: len(head)]) != head:
            continue
        rest = args[len(head) :]
        kwargs: dict[str, object] = {"home": None, **quick.defaults}
        for switch in quick.switches:
            kwargs[switch.removeprefix("--")] = switch in rest
        if quick.words:
            if not rest or any(word.startswith("-") for word in rest):
                return None
            return Route(quick.command, tuple(rest), kwargs)
        if len(set(rest)) != len(rest) or not set(rest) <= set(quick.switches):
            return None
        return Route(quick.command, (), kwargs)
    return None
