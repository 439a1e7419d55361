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
from pathlib import Path
from typing import NamedTuple

__all__ = ["Call", "approvals_list", "memory_show", "recall", "route", "sessions_list"]


class Call(NamedTuple):
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


def sessions_list(*, home: Path | None, json: bool) -> int:
    """`bxctl sessions list [--json]`."""
    from ._common import home_of
    from ._sessions import sessions_list as run

    return run(home_of(home), as_json=json)


def recall(*words: str, home: Path | None, k: int) -> int:
    """`bxctl recall WORDS [-k K]`."""
    from ._common import CommandError, home_of
    from ._owner import recall as run

    query = " ".join(words).strip()
    if not query:
        raise CommandError("say what to look for: `bxctl recall Heron launch`")
    if not 1 <= k <= 10:
        raise CommandError(f"-k is how many hits to show, 1 to 10; {k} is not")
    return run(home_of(home), query, k)


def route(args: list[str]) -> Call | None:
    """The call for `args` (without `--home`) if they are in a plain form, else None.

    The plain forms: `memory show`; `approvals list` and `sessions list`, each with
    `--json` or not; `recall` and words none of which starts with `-`.
    """
    match args:
        case ["memory", "show"]:
            return Call(memory_show, (), {"home": None})
        case ["approvals", "list", *flags] if flags in ([], ["--json"]):
            return Call(approvals_list, (), {"home": None, "json": flags == ["--json"]})
        case ["sessions", "list", *flags] if flags in ([], ["--json"]):
            return Call(sessions_list, (), {"home": None, "json": flags == ["--json"]})
        case ["recall", *words] if words and not any(w.startswith("-") for w in words):
            return Call(recall, tuple(words), {"home": None, "k": 5})
    return None
