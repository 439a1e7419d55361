"""A short chaos day in the gate (issue 13): kills at every moment, every invariant checked.

`just chaos` runs the long one (100 kills); tests/chaos.py says what is checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos import run


@pytest.mark.slow
def test_a_chaos_day_of_ten_kills(short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = run(turns=30, sessions=5, kills=10, seed=7, workdir=short_dir)
    with capsys.disabled():
        print(f"\nchaos day: {report.summary()}")
    assert sum(report.kills.values()) == 10
    assert report.by_hand == []
