"""Fixtures for brokerd: a home under a short temporary directory, and its settings."""

from __future__ import annotations

from pathlib import Path

import pytest

import proto
from brokerd import Settings
from brokerd._config import resolve
from proto import BrokerdConfig, PathsSection


@pytest.fixture
def home(short_dir: Path) -> Path:
    """A fresh home (not created yet) under a short temporary directory."""
    return short_dir / "home"


@pytest.fixture
def settings(home: Path) -> Settings:
    """Default settings for `home`: every socket in its default place."""
    return resolve(BrokerdConfig(paths=PathsSection(home=str(home))), config_dir=home.parent)


@pytest.fixture
def approval_key(settings: Settings) -> bytes:
    """The home's approval key (created), which brokerd signs approved calls with."""
    return proto.ensure_key(settings.approval_key)
