"""`memoryd serve --config PATH`: run memoryd in the foreground until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import trio

import proto

from ._config import ConfigError, load_settings
from ._files import StartError
from ._service import Memoryd

log = logging.getLogger("memoryd")

START_FAILED = "runbook: memoryd-start-failed"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memoryd",
        description="boxmaker's memory role: owns {home}/memory and {home}/index, serves the "
        "memory block to loopd, recall and memory edits to brokerd, and reindex to bxctl.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run in the foreground until SIGTERM or Ctrl-C",
        description="Run memoryd in the foreground; logs go to stderr.",
    )
    serve.add_argument(
        "--config",
        required=True,
        type=Path,
        metavar="PATH",
        help="memoryd.toml (see config/memoryd.toml for every key and its default)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process's exit code."""
    args = _parser().parse_args(argv)
    proto.setup_logging("memoryd")
    try:
        settings = load_settings(args.config)
        role = Memoryd(settings)
        created = role.memory.ensure(settings.soul_starter)
    except (ConfigError, StartError) as exc:
        log.error("cannot start: %s (%s)", exc, START_FAILED)
        return 1
    if created:
        log.info("created %s in %s", ", ".join(created), settings.memory_dir)
    failed: list[BaseException] = []
    try:
        trio.run(proto.run_role, role.start)
    except* (proto.SocketPathError, StartError, OSError) as group:
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
