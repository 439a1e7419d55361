"""Fixtures shared by every test tree."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The gate runs on two shared cores, beside processes of the end-to-end tests: a property
# is judged by its examples, not by how fast they were drawn or ran on a loaded machine
# (a health check "generation is slow" and a 200 ms deadline failed green tests there).
settings.register_profile("gate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gate")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A temporary directory with a short path: AF_UNIX socket paths max out at 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
