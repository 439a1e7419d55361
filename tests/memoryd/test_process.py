"""memoryd as a real process: start-up, the three sockets, start failures, SIGTERM."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from approved import signed
from roles import fail_to_start, start_role

import proto
from proto import MemoryBlock, MemoryBlockReply, ToolCall, ToolRequest, ToolResponse

REPO = Path(__file__).resolve().parents[2]
CAP_S = 20


def write_config(directory: Path, body: str) -> Path:
    config = directory / "memoryd.toml"
    config.write_text(body)
    (directory / "soul.md").write_text("Starter soul.\n")
    return config


@pytest.fixture
def memoryd(short_dir: Path) -> Iterator[Path]:
    home = short_dir / "home"
    config = write_config(short_dir, f'[paths]\nhome = "{home}"\n')
    role = start_role("memoryd", config, log=short_dir / "memoryd.log")
    try:
        yield home
    finally:
        ended = role.stop()
    assert ended.returncode == 0, ended.log
    assert not (home / proto.LOOP_MEMORY.relative_path).exists()


async def test_block_then_edit_then_block(memoryd: Path) -> None:
    loop = memoryd / proto.LOOP_MEMORY.relative_path
    broker = memoryd / proto.BROKER_MEMORY.relative_path
    edit = ToolRequest(
        session="mm-y73sxj3popgwumyccptb56p1ah",
        call=ToolCall(
            id="call-1",
            name="memory",
            arguments=json.dumps({"action": "add", "file": "user", "text": "Owner: Ada."}),
        ),
    )
    with trio.fail_after(CAP_S):
        first = await proto.call(loop, MemoryBlock(), MemoryBlockReply)
        key = proto.read_key(memoryd / proto.APPROVAL_KEY)
        reply = await proto.call(broker, signed(edit, key, approval="ap-7"), ToolResponse)
        second = await proto.call(loop, MemoryBlock(), MemoryBlockReply)
    assert first.text.startswith("# soul.md\nStarter soul.\n\n")
    assert "# user.md (0 of 1,375 characters)\n(empty)" in first.text
    assert reply.status == "ok"
    assert reply.content == (
        "user.md updated (11 of 1,375 characters); it takes effect in the next session."
    )
    assert second.text.endswith("# user.md (11 of 1,375 characters)\nOwner: Ada.")


@pytest.mark.parametrize(
    ("config", "prepare", "says"),
    [
        ('[index]\nmax_clas = "private"\n', None, "unknown field `max_clas`"),
        ('[index]\nmax_class = "sometimes"\n', None, "max_class"),
        ("[paths\n", None, "config"),
        ("", "memory-file", "not a directory"),
    ],
)
def test_start_failures_exit_non_zero_with_the_runbook(
    short_dir: Path, config: str, prepare: str | None, says: str
) -> None:
    home = short_dir / "home"
    path = write_config(short_dir, f'[paths]\nhome = "{home}"\n' + config)
    if prepare == "memory-file":
        home.mkdir()
        (home / "memory").write_text("not a directory")
    ended = fail_to_start("memoryd", path, log=short_dir / "memoryd.log")
    assert ended.returncode == 1
    assert says in ended.log
    assert "runbook: memoryd-start-failed" in ended.log
    assert "Traceback" not in ended.log


def test_a_second_instance_is_refused(memoryd: Path, short_dir: Path) -> None:
    second = fail_to_start("memoryd", short_dir / "memoryd.toml", log=short_dir / "second.log")
    assert second.returncode == 1
    assert "is another instance running?" in second.log
    assert "runbook: memoryd-start-failed" in second.log


def test_help_explains_the_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memoryd", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--config PATH" in out
    assert "memoryd.toml" in out
    assert REPO.joinpath("config", "memoryd.toml").exists()
