"""SIGKILL during edits, 200 times: every file stays whole and consistent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DRIVER = Path(__file__).with_name("crash_driver.py")


def test_edits_survive_sigkill_at_random_moments(short_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(short_dir / "home"), "200", "20261130"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["kills"] >= 200
    # The child made real progress between kills: edits were applied and archived.
    assert summary["journalled_edits"] >= 200
    assert summary["archived"] >= 20
