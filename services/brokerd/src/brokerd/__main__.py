"""`brokerd serve --config PATH`: run brokerd in the foreground until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import trio

import proto

from ._config import ConfigError, load_settings
from ._service import Brokerd

log = logging.getLogger("brokerd")

START_FAILED = "runbook: brokerd-start-failed"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brokerd",
        description="boxmaker's broker role: decides every tool call against {home}/grants, "
        "asks the owner where a grant says ask, runs granted calls and audits each decision "
        "in {home}/audit.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run in the foreground until SIGTERM or Ctrl-C",
        description="Run brokerd in the foreground; logs go to stderr.",
    )
    serve.add_argument(
        "--config",
        required=True,
        type=Path,
        metavar="PATH",
        help="brokerd.toml (see config/brokerd.toml for every key and its default)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process's exit code."""
    args = _parser().parse_args(argv)
    proto.setup_logging("brokerd")
    try:
        settings = load_settings(args.config)
        role = Brokerd(settings)
        role.prepare()
    except ConfigError as exc:
        log.error("cannot start: %s (%s)", exc, START_FAILED)
        return 1
    except OSError as exc:
        log.error("cannot start: %s (%s)", exc, START_FAILED)
        return 1
    failed: list[BaseException] = []
    try:
        trio.run(proto.run_role, role.start)
    except* (proto.SocketPathError, OSError) as group:
        failed.extend(_leaves(group))
    for problem in failed:
        log.error("cannot start: %s (%s)", problem, START_FAILED)
    return 1 if failed else 0


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


if __name__ == "__main__":
    sys.exit(main())
