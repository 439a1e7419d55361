"""`memoryd serve --config PATH`: run memoryd in the foreground until SIGTERM."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import proto

from ._config import load_settings
from ._edits import reconcile
from ._service import Memoryd

log = logging.getLogger("memoryd")

DESCRIPTION = (
    "boxmaker's memory role: owns {home}/memory and {home}/index, serves the memory block "
    "to loopd, recall and memory edits to brokerd, and reindex to bxctl."
)


def prepare(config: Path) -> proto.Role:
    """Load the config and create what is missing of memory/ (never overwriting)."""
    settings = load_settings(config)
    role = Memoryd(settings)
    created = role.memory.ensure(settings.soul_starter)
    if created:
        log.info("created %s in %s", ", ".join(created), settings.memory_dir)
    if role.recover_files():  # before reconcile: a forget's own journal lines first
        log.info("finishing a forget decided before memoryd stopped")
    reconcile(role.memory)
    return proto.Role(role.start, drain_s=settings.drain_s)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process's exit code."""
    return proto.serve_main(
        "memoryd",
        description=DESCRIPTION,
        prepare=prepare,
        runbook="memoryd-start-failed",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
