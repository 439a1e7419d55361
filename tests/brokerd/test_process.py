"""brokerd as a real process: readiness, grant problems in its log, start failures, SIGTERM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from roles import fail_to_start, start_role

import proto
from proto import BrokerdConfig

REPO = Path(__file__).resolve().parents[2]


def test_ready_serving_and_stopping(short_dir: Path) -> None:
    home = short_dir / "home"
    (home / "grants").mkdir(parents=True)
    (home / "grants" / "memory.toml").write_text(
        'tool = "memory"\nmode = "auto"\nmax_taint = "secret"\nresult_class = "private"\n'
        "untrusted = false\n"
    )
    config = short_dir / "brokerd.toml"
    config.write_text(f'[paths]\nhome = "{home}"\n')
    brokerd = start_role("brokerd", config, log=short_dir / "brokerd.log")
    try:
        ready = brokerd.ready
        assert ready is not None
        assert ready.startswith("READY=1\nSTATUS=serving")
        assert "1 grant problems" in ready
        assert (home / proto.LOOP_BROKER.relative_path).exists()
        assert (home / proto.OWNER_BROKER.relative_path).exists()
        assert oct((home / "audit").stat().st_mode & 0o777) == "0o700"
    finally:
        ended = brokerd.stop()
    assert ended.notified == ("STOPPING=1",)
    assert ended.returncode == 0, ended.log
    assert (
        "grant memory.toml not loaded: the policy of recall and memory is built in; "
        "remove this grant. (runbook: grants-invalid)"
    ) in ended.log
    assert not (home / proto.LOOP_BROKER.relative_path).exists()
    assert not (home / proto.OWNER_BROKER.relative_path).exists()


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ('[runtime]\nkind = "podman"\n', "invalid enum value 'podman' - at `$.runtime.kind`"),
        ("[approvals]\ntimeout = 60\n", "unknown field `timeout`"),
        ("[approvals]\ntimeout_s = 0\n", "expected `float` > 0.0"),
        ("[paths\n", "config"),
        ('[sockets]\nloop = "/tmp/' + "x" * 120 + '.sock"\n', "the limit is 107"),
    ],
)
def test_start_failures_exit_non_zero_with_the_runbook(
    short_dir: Path, config: str, says: str
) -> None:
    path = short_dir / "brokerd.toml"
    path.write_text(f'[paths]\nhome = "{short_dir / "home"}"\n' + config)
    ended = fail_to_start("brokerd", path, log=short_dir / "brokerd.log")
    assert ended.returncode == 1
    assert says.lower() in ended.log.lower()
    assert "runbook: brokerd-start-failed" in ended.log
    assert "Traceback" not in ended.log


def test_help_and_the_shipped_config() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "brokerd", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--config PATH" in out
    assert "brokerd.toml" in out
    shipped = msgspec.toml.decode(
        (REPO / "config" / "brokerd.toml").read_bytes(), type=BrokerdConfig
    )
    assert shipped == BrokerdConfig()


def test_an_unusable_audit_directory_is_a_start_failure(short_dir: Path) -> None:
    home = short_dir / "home"
    home.mkdir()
    (home / "audit").write_text("not a directory")
    path = short_dir / "brokerd.toml"
    path.write_text(f'[paths]\nhome = "{home}"\n')
    ended = fail_to_start("brokerd", path, log=short_dir / "brokerd.log")
    assert ended.returncode == 1
    assert f"File exists: '{home / 'audit'}' (runbook: brokerd-start-failed)" in ended.log
    assert "Traceback" not in ended.log
