"""`ROLE serve --config PATH`: the entry point every role shares."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

import trio

from ._config import NEEDS_OWNER_EXIT, NeedsOwner, StartFailed
from ._role import Role, run_role, setup_logging
from ._server import SocketPathError

__all__ = ["serve_main"]

Prepare = Callable[[Path], Role]
"""Loads the config, checks what can be checked before any socket exists, and returns the
role (its start function and drain deadline); raises `StartFailed` (or `OSError`) with a
sentence to show."""


def _parser(role: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=role, description=description)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run in the foreground until SIGTERM or Ctrl-C",
        description=f"Run {role} in the foreground; logs go to stderr.",
    )
    serve.add_argument(
        "--config",
        required=True,
        type=Path,
        metavar="PATH",
        help=f"{role}.toml (see config/{role}.toml for every key and its default)",
    )
    return parser


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def serve_main(
    role: str,
    *,
    description: str,
    prepare: Prepare,
    runbook: str | None,
    argv: list[str] | None = None,
) -> int:
    """Parse `serve --config PATH`, start the role, and return the process's exit code.

    A role that cannot start logs one line naming the problem (and its runbook entry)
    and exits 1, never with a traceback; one stopped by `NeedsOwner` (at start or later)
    exits `NEEDS_OWNER_EXIT`, which nothing restarts.
    """
    args = _parser(role, description).parse_args(argv)
    setup_logging(role)
    log = logging.getLogger(role)
    hint = f" (runbook: {runbook})" if runbook else ""
    try:
        prepared = prepare(args.config)
    except (StartFailed, OSError) as exc:
        log.error("cannot start: %s%s", exc, hint)
        return NEEDS_OWNER_EXIT if isinstance(exc, NeedsOwner) else 1
    failed: list[BaseException] = []
    try:
        trio.run(partial(run_role, prepared.start, drain_s=prepared.drain_s))
    except* (SocketPathError, StartFailed, OSError) as group:
        failed.extend(_leaves(group))
    for problem in failed:
        if isinstance(problem, NeedsOwner):
            log.error("stopped: %s (it is not started again until this is fixed)", problem)
        else:
            log.error("cannot start: %s%s", problem, hint)
    if any(isinstance(problem, NeedsOwner) for problem in failed):
        return NEEDS_OWNER_EXIT
    return 1 if failed else 0
