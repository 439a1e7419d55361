"""Fixtures shared by every test tree."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A temporary directory with a short path: AF_UNIX socket paths max out at 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
