"""`brokerd serve --config PATH`: run brokerd in the foreground until SIGTERM."""

from __future__ import annotations

import sys
from pathlib import Path

import proto

from ._config import load_settings
from ._service import Brokerd

DESCRIPTION = (
    "boxmaker's broker role: decides every tool call against {home}/grants, asks the owner "
    "where a grant says ask, runs granted calls and audits each decision in {home}/audit."
)


def prepare(config: Path) -> proto.Role:
    """Load the config and the grants, and open the audit log."""
    role = Brokerd(load_settings(config))
    role.prepare()
    return proto.Role(role.start, drain_s=role.settings.drain_s)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process's exit code."""
    return proto.serve_main(
        "brokerd",
        description=DESCRIPTION,
        prepare=prepare,
        runbook="brokerd-start-failed",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
