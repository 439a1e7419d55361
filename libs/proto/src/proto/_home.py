"""Where a role's home is, and other facts every role and bxctl share; no trio here.

bxctl's one-request commands import this (and not trio) to start fast.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

__all__ = ["DEFAULT_DRAIN_S", "DEFAULT_HOME", "resolve_home", "resolve_peers"]

DEFAULT_HOME = Path("~/.boxmaker")
"""A person's home for boxmaker, `~` expanded where it is used. The systemd units set
`BOXMAKER_HOME=/var/lib/boxmaker` instead."""

DEFAULT_DRAIN_S = 20.0
"""How long in-flight work may go on after SIGTERM before it is cancelled.

`bxctl up` waits longer than this before it kills a role, and the systemd units'
`TimeoutStopSec` is longer still (tests/test_systemd.py checks both)."""


def resolve_home(configured: str | Path | None) -> Path:
    """The home: `configured` if set, else `$BOXMAKER_HOME`, else `~/.boxmaker`; `~` expanded."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("BOXMAKER_HOME")
    return Path(env).expanduser() if env else DEFAULT_HOME.expanduser()


def resolve_peers(names: list[str]) -> frozenset[int]:
    """The uids of `names`: user names, or uids written as numbers.

    Raises:
        ValueError: a name that is no user on this machine.
    """
    uids = set()
    for name in names:
        if name.isdigit():
            uids.add(int(name))
            continue
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            raise ValueError(f"no user {name!r} on this machine") from None
    return frozenset(uids)
