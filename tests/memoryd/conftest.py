"""Fixtures for memoryd: a home with a config, and the role started in-process."""

from __future__ import annotations

from pathlib import Path

import pytest

import proto
from memoryd import Settings
from memoryd._config import resolve

STARTER = "You are a test persona.\n"


@pytest.fixture
def ranking() -> proto.RecallRanking:
    """How recall ranks (the default's; a module that holds for both overrides this)."""
    return "context"


@pytest.fixture
def settings(short_dir: Path, ranking: proto.RecallRanking) -> Settings:
    """Settings for a fresh home under a short temporary directory."""
    (short_dir / "soul.md").write_text(STARTER)
    return resolve(
        proto.MemorydConfig(
            paths=proto.PathsSection(home=str(short_dir / "home")),
            recall=proto.MemorydRecall(ranking=ranking),
        ),
        config_dir=short_dir,
    )
