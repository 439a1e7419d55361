"""The helper that starts role processes reports what went wrong, with the role's log."""

from __future__ import annotations

from pathlib import Path

import pytest
from roles import fail_to_start, start_role

import proto


def test_a_role_that_exits_before_ready_fails_with_its_log(short_dir: Path) -> None:
    config = short_dir / "brokerd.toml"
    config.write_text(f'[paths]\nhome = "{short_dir / "home"}"\n[approvals]\ntimeout = 60\n')
    with pytest.raises(AssertionError) as failed:
        start_role("brokerd", config, log=short_dir / "brokerd.log")
    assert "brokerd exited 1 before READY=1" in str(failed.value)
    assert "unknown field `timeout`" in str(failed.value)


def test_a_role_expected_to_fail_that_gets_ready_is_stopped_and_reported(short_dir: Path) -> None:
    home = short_dir / "home"
    config = short_dir / "brokerd.toml"
    config.write_text(f'[paths]\nhome = "{home}"\n')
    with pytest.raises(AssertionError, match="brokerd started, but was expected to fail"):
        fail_to_start("brokerd", config, log=short_dir / "brokerd.log")
    assert not (home / proto.LOOP_BROKER.relative_path).exists()  # stopped, cleanly
