"""`loopd serve --config PATH`: run loopd in the foreground until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import trio

import proto

from ._config import ConfigError, load_settings
from ._service import Loopd

log = logging.getLogger("loopd")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopd",
        description="boxmaker's session role: owns {home}/sessions, runs each turn against "
        "the model, sends tool calls to brokerd, and serves the chat socket.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run in the foreground until SIGTERM or Ctrl-C",
        description="Run loopd in the foreground; logs go to stderr.",
    )
    serve.add_argument(
        "--config",
        required=True,
        type=Path,
        metavar="PATH",
        help="loopd.toml (see config/loopd.toml for every key and its default)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process's exit code."""
    args = _parser().parse_args(argv)
    proto.setup_logging("loopd")
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        log.error("cannot start: %s", exc)
        return 1
    role = Loopd(settings)
    failed: list[BaseException] = []
    try:
        trio.run(proto.run_role, role.start)
    except* (proto.SocketPathError, OSError) as group:
        failed.extend(_leaves(group))
    for problem in failed:
        log.error("cannot start: %s", problem)
    return 1 if failed else 0


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


if __name__ == "__main__":
    sys.exit(main())
