"""memoryd as a real process: start-up, the three sockets, start failures, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import proto
from proto import MemoryBlock, MemoryBlockReply, ToolCall, ToolRequest, ToolResponse

REPO = Path(__file__).resolve().parents[2]
CAP_S = 20


def write_config(directory: Path, body: str) -> Path:
    config = directory / "memoryd.toml"
    config.write_text(body)
    (directory / "soul.md").write_text("Starter soul.\n")
    return config


def run_memoryd(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd", "serve", "--config", os.fspath(config)],
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + CAP_S
    while not path.exists():
        if child.poll() is not None:
            raise AssertionError(f"memoryd exited: {child.communicate()[1]}")
        if time.monotonic() > deadline:
            raise AssertionError("memoryd did not start")
        time.sleep(0.02)


@pytest.fixture
def memoryd(short_dir: Path) -> Iterator[Path]:
    home = short_dir / "home"
    config = write_config(short_dir, f'[paths]\nhome = "{home}"\n')
    child = run_memoryd(config)
    try:
        wait_for(home / proto.OWNER_MEMORY.relative_path, child)
        yield home
    finally:
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=CAP_S)
    assert child.returncode == 0, stderr
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
        approval="ap-7",
    )
    with trio.fail_after(CAP_S):
        first = await proto.call(loop, MemoryBlock(), MemoryBlockReply)
        reply = await proto.call(broker, edit, ToolResponse)
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
    child = run_memoryd(path)
    _, stderr = child.communicate(timeout=CAP_S)
    assert child.returncode == 1
    assert says in stderr
    assert "runbook: memoryd-start-failed" in stderr
    assert "Traceback" not in stderr


def test_a_second_instance_is_refused(memoryd: Path, short_dir: Path) -> None:
    child = run_memoryd(short_dir / "memoryd.toml")
    _, stderr = child.communicate(timeout=CAP_S)
    assert child.returncode == 1
    assert "is another instance running?" in stderr
    assert "runbook: memoryd-start-failed" in stderr


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
