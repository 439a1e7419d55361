"""`bxctl up` and `bxctl chat --message` as an owner runs them: real processes throughout."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_model import ScriptedModel, Step, serve_scripted_model

import proto

CAP_S = 60


def bxctl(*args: str, timeout: float = CAP_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bxctl", *args], capture_output=True, text=True, timeout=timeout
    )


class Up:
    """A running `bxctl up`, with its stderr collected line by line."""

    def __init__(self, home: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bxctl", "up", "--home", str(home)],
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.code: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + CAP_S
        while not any(text in line for line in self.lines):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"never saw {text!r}:\n" + "\n".join(self.lines))
            time.sleep(0.05)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=CAP_S)
        self._reader.join(timeout=5)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code


@contextlib.contextmanager
def up_running(home: Path) -> Iterator[Up]:
    """`bxctl up` of `home`, up for the body; stopped (Ctrl-C) after it, its code kept."""
    up = Up(home)
    try:
        up.wait_for("boxmaker is up")
        yield up
    finally:
        up.code = up.stop()


def new_home(directory: Path, model: ScriptedModel) -> Path:
    """`bxctl init` of a home in `directory` whose model is `model`."""
    home = directory / "home"
    assert bxctl("init", "--home", str(home), "--model-url", model.url).returncode == 0
    return home


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with serve_scripted_model() as scripted:
        yield scripted


SHELL_BXCTL = "uv run bxctl" if "UV_RUN_RECURSION_DEPTH" in os.environ else "bxctl"
"""How bxctl's hints name it here: the roles inherit this test's environment."""


def test_up_chat_and_stop(short_dir: Path, model: ScriptedModel) -> None:
    home = new_home(short_dir, model)
    up = Up(home)
    try:
        up.wait_for("boxmaker is up")
        # pasteable in another terminal: under `uv run pytest`, bxctl runs as `uv run` started it
        up.wait_for(f"chat with it:   {SHELL_BXCTL} chat --home {home}")
        model.steps.append(Step(text="Hello! I am boxmaker."))
        chat = bxctl("chat", "--home", str(home), "--message", "hello")
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.strip() == "Hello! I am boxmaker."
        assert "new session chat-" in chat.stderr
        shown = bxctl("memory", "show", "--home", str(home))
        assert shown.stdout.startswith("# soul.md\n")
    finally:
        code = up.stop()
    assert code == 0, "\n".join(up.lines)
    assert any("memoryd | " in line for line in up.lines)  # logs streamed, prefixed
    for spec in proto.SOCKETS:
        assert not spec.default_path(home).exists(), spec.name


def test_a_killed_up_takes_its_roles_with_it_and_the_next_up_starts(
    short_dir: Path, model: ScriptedModel
) -> None:
    home = new_home(short_dir, model)
    up = Up(home)
    up.wait_for("boxmaker is up")
    pids = [int(line.split("pid ")[1].split(")")[0]) for line in up.lines if "(pid " in line]
    assert len(pids) == 3, up.lines
    up.process.kill()  # SIGKILL: bxctl stops nothing itself
    assert up.stop() == -signal.SIGKILL
    deadline = time.monotonic() + CAP_S
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if _alive(pid)], "roles orphaned by a killed bxctl up"
    again = Up(home)  # the home's sockets are free: no "is another instance running?"
    try:
        again.wait_for("boxmaker is up")
    finally:
        assert again.stop() == 0, "\n".join(again.lines)


def test_a_second_up_on_a_running_home_says_so_and_leaves_it_running(
    short_dir: Path, model: ScriptedModel
) -> None:
    home = new_home(short_dir, model)
    with up_running(home) as up:
        second = bxctl("up", "--home", str(home))
        assert second.returncode == 1
        assert second.stderr.startswith(f"bxctl: boxmaker is already running on {home} (")
        assert f"Use it (`{SHELL_BXCTL} chat --home {home}`)" in second.stderr
        assert "bxctl: started" not in second.stderr  # nothing was started
        model.steps.append(Step(text="Still here."))
        chat = bxctl("chat", "--home", str(home), "--message", "hello")
        assert chat.stdout.strip() == "Still here.", chat.stderr
    assert up.code == 0, "\n".join(up.lines)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_starts_a_role_that_dies_again_and_the_chat_goes_on(
    short_dir: Path, model: ScriptedModel
) -> None:
    home = new_home(short_dir, model)
    with up_running(home) as up:
        for role in ("brokerd", "loopd"):
            pid = int(
                next(
                    line.split("pid ")[1].split(")")[0]
                    for line in reversed(up.lines)
                    if f"started {role} (pid " in line
                )
            )
            os.kill(pid, signal.SIGKILL)
            up.wait_for(f"{role} is back")
        model.steps.append(Step(text="Still here."))
        chat = bxctl("chat", "--home", str(home), "--message", "are you there?")
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.strip() == "Still here."
    assert up.code == 0, "\n".join(up.lines)
    said = [line for line in up.lines if "exited with code -9" in line]
    assert len(said) == 2, up.lines
    assert "(killed by SIGKILL); starting it again in 1 s" in said[0]
    assert not proto.OWNER_LOOP.default_path(home).exists()
    assert not proto.LOOP_MEMORY.default_path(home).exists()


def test_up_and_every_command_use_the_sockets_the_configs_name(
    short_dir: Path, model: ScriptedModel
) -> None:
    import tomlkit

    home = new_home(short_dir, model)
    elsewhere = short_dir / "s"
    # Absolute owner sockets outside the home; memoryd's loop socket relative (under the
    # home), and loopd told where that is, as an owner moving it must.
    moved = {
        ("loopd", "sockets", "chat"): str(elsewhere / "chat.sock"),
        ("brokerd", "sockets", "admin"): str(elsewhere / "broker.sock"),
        ("memoryd", "sockets", "admin"): str(elsewhere / "memory.sock"),
        ("memoryd", "sockets", "loop"): "moved/loop-memory.sock",
        ("loopd", "memory", "socket"): "moved/loop-memory.sock",
    }
    for (role, section, key), value in moved.items():
        toml = home / "config" / f"{role}.toml"
        document = tomlkit.parse(toml.read_text())
        document[section][key] = value
        toml.write_text(tomlkit.dumps(document))
    served = {
        proto.OWNER_LOOP: elsewhere / "chat.sock",
        proto.OWNER_BROKER: elsewhere / "broker.sock",
        proto.OWNER_MEMORY: elsewhere / "memory.sock",
        proto.LOOP_MEMORY: home / "moved" / "loop-memory.sock",
    }
    with up_running(home) as up:
        for spec, path in served.items():
            assert any(line.endswith(f"{spec.name}: {path}") for line in up.lines), up.lines
            assert path.is_socket()
            assert not spec.default_path(home).exists()
        model.steps.append(Step(text="Found you."))
        chat = bxctl("chat", "--home", str(home), "--message", "hello")
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.strip() == "Found you."
        listed = bxctl("approvals", "list", "--home", str(home))
        assert listed.returncode == 0, listed.stderr
        shown = bxctl("memory", "show", "--home", str(home))  # memoryd's loop socket
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith("# soul.md\n")
        history = bxctl("memory", "history", "--home", str(home))  # memoryd's admin socket
        assert history.returncode == 0, history.stderr
        second = bxctl("up", "--home", str(home))
        assert second.returncode == 1
        assert second.stderr.startswith(f"bxctl: boxmaker is already running on {home} (")
        assert "bxctl: started" not in second.stderr
    assert up.code == 0, "\n".join(up.lines)
