"""The memory directory: created at start, never overwritten, read fresh."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import entries
from memoryd import Settings
from memoryd._block import memory_block
from memoryd._files import MemoryDir, MemoryUnavailable, StartError

STARTER = "You are a test persona.\n"  # what conftest writes as the starter


def test_start_creates_every_file_private(settings: Settings) -> None:
    memory = MemoryDir(settings.memory_dir)
    created = memory.ensure(settings.soul_starter)
    assert created == ["soul.md", "memory.md", "user.md", "archive.md"]
    assert stat.S_IMODE(settings.memory_dir.stat().st_mode) == 0o700
    for name in created:
        assert stat.S_IMODE(memory.path(name).stat().st_mode) == 0o600
    assert memory.path("soul.md").read_text() == STARTER
    assert memory.path("memory.md").read_text() == ""
    assert not memory.edits.exists()
    assert not memory.recalls.exists()


def test_start_never_overwrites(settings: Settings) -> None:
    memory = MemoryDir(settings.memory_dir)
    memory.ensure(settings.soul_starter)
    memory.path("soul.md").write_text("the owner's own soul")
    memory.path("memory.md").write_text("a fact")
    memory.path("user.md").unlink()
    assert memory.ensure(settings.soul_starter) == ["user.md"]
    assert memory.path("soul.md").read_text() == "the owner's own soul"
    assert memory.path("memory.md").read_text() == "a fact"


def test_start_removes_leftover_temporaries_only(settings: Settings) -> None:
    memory = MemoryDir(settings.memory_dir)
    memory.ensure(settings.soul_starter)
    leftover = settings.memory_dir / ".memory.md.abc123.tmp"
    leftover.write_text("half")
    memory.ensure(settings.soul_starter)
    assert not leftover.exists()
    assert memory.path("memory.md").exists()


def test_a_file_where_the_directory_should_be_fails_start(settings: Settings) -> None:
    settings.home.mkdir(parents=True)
    settings.memory_dir.write_text("oops")
    with pytest.raises(StartError, match="not a directory"):
        MemoryDir(settings.memory_dir).ensure(settings.soul_starter)


def test_a_directory_where_a_file_should_be_fails_start(settings: Settings) -> None:
    (settings.memory_dir / "memory.md").mkdir(parents=True)
    with pytest.raises(StartError, match="not a regular file"):
        MemoryDir(settings.memory_dir).ensure(settings.soul_starter)


def test_missing_starter_fails_start_only_when_soul_is_missing(settings: Settings) -> None:
    settings.soul_starter.unlink()
    memory = MemoryDir(settings.memory_dir)
    with pytest.raises(StartError, match=r"soul\.md is missing and the starter"):
        memory.ensure(settings.soul_starter)
    memory.path("soul.md").write_text("written by the owner first")
    memory.ensure(settings.soul_starter)  # no starter needed now
    assert memory.path("soul.md").read_text() == "written by the owner first"


def test_over_long_starter_fails_start(settings: Settings) -> None:
    settings.soul_starter.write_text("x" * (entries.SOUL_LIMIT + 1))
    with pytest.raises(StartError, match="4,001 characters"):
        MemoryDir(settings.memory_dir).ensure(settings.soul_starter)


@pytest.fixture
def memory(settings: Settings) -> MemoryDir:
    m = MemoryDir(settings.memory_dir)
    m.ensure(settings.soul_starter)
    return m


def test_block_renders_fresh_from_the_files(memory: MemoryDir) -> None:
    assert memory_block(memory) == (
        "# soul.md\nYou are a test persona.\n\n"
        "# memory.md (0 of 2,200 characters)\n(empty)\n\n"
        "# user.md (0 of 1,375 characters)\n(empty)"
    )
    memory.path("memory.md").write_text("The launch moved to Thursday.\r\n§\r\nUTC, always.\n")
    memory.path("user.md").write_text("Prefers short answers.")
    assert memory_block(memory) == (
        "# soul.md\nYou are a test persona.\n\n"
        "# memory.md (44 of 2,200 characters)\nThe launch moved to Thursday.\n§\nUTC, always."
        "\n\n# user.md (22 of 1,375 characters)\nPrefers short answers."
    )


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("memory.md", "x" * 2201, r"memory\.md is 2,201 of 2,200 characters"),
        ("user.md", "y" * 1376, r"user\.md is 1,376 of 1,375 characters"),
        ("soul.md", "z" * 4001, r"soul\.md is 4,001 of 4,000 characters"),
        ("memory.md", "one\n§\n§\ntwo", r"memory\.md"),
        ("memory.md", "same\n§\nsame", r"memory\.md"),
    ],
)
def test_block_refused_when_a_file_is_over_its_limit_or_unparsable(
    memory: MemoryDir, name: str, content: str, reason: str
) -> None:
    memory.path(name).write_text(content)
    with pytest.raises(MemoryUnavailable, match=reason):
        memory_block(memory)


def test_block_refused_when_a_file_is_unreadable(memory: MemoryDir) -> None:
    memory.path("user.md").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(MemoryUnavailable, match=r"user\.md is not valid UTF-8"):
        memory_block(memory)
    memory.path("user.md").unlink()
    with pytest.raises(MemoryUnavailable, match=r"user\.md is missing"):
        memory_block(memory)


def test_limits_count_characters_not_bytes(memory: MemoryDir) -> None:
    memory.path("memory.md").write_text("é" * 2200)  # 4,400 bytes, 2,200 characters
    assert "(2,200 of 2,200 characters)" in memory_block(memory)
    assert os.path.getsize(memory.path("memory.md")) == 4400


def test_paths_of_settings(settings: Settings) -> None:
    assert settings.memory_dir == settings.home / "memory"
    assert settings.loop_socket == settings.home / "run/loop-memory/memory.sock"
    assert settings.broker_socket == settings.home / "run/broker-memory/memory.sock"
    assert settings.admin_socket == settings.home / "run/owner-memory/admin.sock"
    assert settings.soul_starter == Path(settings.soul_starter.parent, "soul.md")
