"""memoryd on a home in this process, without its sockets: for tests.

The forget tests (`tests/memoryd/test_forget.py`, `tests/test_forget_rule.py`) run a
forget's look, prepare and apply on a home this way, the same code the broker socket runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

import proto

from ._config import Settings, resolve
from ._edits import reconcile
from ._files import ensure_private_dir
from ._service import Memoryd

__all__ = ["on_home"]


@asynccontextmanager
async def on_home(
    home: Path, *, soul_starter: Path | None = None, config: proto.MemorydConfig | None = None
) -> AsyncIterator[Memoryd]:
    """Run memoryd on `home` as `serve` does, less the sockets; its index open, caught up.

    Committed forget plans are finished first, as at a start. `soul_starter` is needed
    only where `home` has no soul.md yet.
    """
    config = config or proto.MemorydConfig(paths=proto.PathsSection(home=str(home)))
    settings = resolve(config, config_dir=home)
    if soul_starter is not None:
        settings = _with_starter(settings, soul_starter)
    role = Memoryd(settings)
    role.memory.ensure(settings.soul_starter)
    ensure_private_dir(settings.index_dir)
    role.recover_files()
    reconcile(role.memory)
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(role.index.run, shutdown, role.recover)
        await role.index.caught_up.wait()
        try:
            yield role
        finally:
            shutdown.set()


def _with_starter(settings: Settings, starter: Path) -> Settings:
    return dataclasses.replace(settings, soul_starter=starter)
