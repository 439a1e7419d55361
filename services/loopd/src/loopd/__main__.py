"""`loopd serve --config PATH`: run loopd in the foreground until SIGTERM."""

from __future__ import annotations

import sys
from pathlib import Path

import proto

from ._config import load_settings
from ._service import Loopd

DESCRIPTION = (
    "boxmaker's session role: owns {home}/sessions, runs each turn against the model, "
    "sends tool calls to brokerd, and serves the chat socket."
)


def prepare(config: Path) -> proto.Role:
    """Load the config."""
    settings = load_settings(config)
    return proto.Role(Loopd(settings).start, drain_s=settings.drain_s)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process's exit code."""
    return proto.serve_main(
        "loopd",
        description=DESCRIPTION,
        prepare=prepare,
        runbook="loopd-start-failed",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
