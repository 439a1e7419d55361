"""Every bxctl test runs as an owner with this bxctl on PATH (what most sentences show).

`uv run pytest` puts the environment on PATH the `uv run` way, which bxctl reads as a
shell without it; tests/bxctl/test_hints.py sets each case up itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bxctl._common import program


@pytest.fixture(autouse=True)
def bxctl_on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("UV_RUN_RECURSION_DEPTH", raising=False)
    here = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", here + os.pathsep + os.environ.get("PATH", ""))
    program.cache_clear()
    yield
    program.cache_clear()
