"""Fixtures for the security suite: brokerd's home, as a process (`BrokerdHome`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from brokerd_harness import BrokerdHome


@pytest.fixture
def broker_home(short_dir: Path) -> Iterator[BrokerdHome]:
    """A home for brokerd processes; a process left running by a failed test is killed."""
    home = BrokerdHome(short_dir)
    try:
        yield home
    finally:
        home.kill()
