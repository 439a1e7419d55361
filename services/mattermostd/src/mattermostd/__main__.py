"""`mattermostd serve --config PATH`: run the Mattermost bridge in the foreground."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

import proto

from ._bridge import Bridge
from ._config import load_settings

DESCRIPTION = (
    "boxmaker's Mattermost bridge: the owner's posts to the bot become turns in loopd, "
    "one session per thread; approvals are asked and answered in the thread."
)


def prepare(config: Path) -> proto.Role:
    """Load the config and the token, and read the state file."""
    settings = load_settings(config)
    bridge = Bridge(settings, proto.read_token_file(settings.token_file))
    bridge.load()

    async def start(work: trio.Nursery, shutdown: trio.Event) -> str:
        work.start_soon(bridge.run, shutdown)
        return f"bridging {settings.url} for {settings.owner_name}"

    return proto.Role(start, drain_s=settings.drain_s)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process's exit code."""
    return proto.serve_main(
        "mattermostd",
        description=DESCRIPTION,
        prepare=prepare,
        runbook="mattermostd-start-failed",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
