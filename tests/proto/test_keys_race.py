"""A key made by two roles at once: both read the same whole key."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import proto


def test_two_roles_making_the_same_key_at_once_read_the_same_whole_key(tmp_path: Path) -> None:
    for attempt in range(50):
        path = tmp_path / f"k{attempt}" / "approval.key"
        with ThreadPoolExecutor(4) as pool:
            keys = list(pool.map(proto.ensure_key, [path] * 4))
        assert len(set(keys)) == 1
        assert len(keys[0]) == proto.KEY_BYTES
        assert [p.name for p in path.parent.iterdir()] == ["approval.key"]
