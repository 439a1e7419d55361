"""A running fake Mattermost with the three users every bridge test needs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
from fakes.world import CAP_S, World, open_world


@pytest.fixture
async def world() -> AsyncIterator[World]:
    with trio.fail_after(CAP_S):
        async with open_world() as w:
            yield w
