"""The owner's memory commands on a home laid out as the systemd install lays it out.

There, each socket's folder is open to the group of its one peer (config/systemd/
boxmaker.tmpfiles): the owner's login is in `boxmaker-owner`, never in the loop's or the
broker's groups. So everything the owner asks of memoryd goes through `owner-memory`; a
command that used another socket would fail only on a real install.

Here the owner is root without the capabilities that pass over permissions (`setpriv`
drops them), so folders are checked as for any login: memoryd's folders belong to
another user, and only `owner-memory`'s group is root's own group. Needs root and
setpriv, as the machine running the gate has.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from roles import start_role

import proto

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)

MEMORYD_USER = 64_999
"""The user that owns memoryd's socket folders (as boxmaker-memoryd does): not the owner."""
PASS_OVER = "-dac_override,-dac_read_search"
"""The capabilities that let root pass over folder permissions, dropped for the owner."""


@pytest.fixture
def home() -> Iterator[Path]:
    """memoryd (as root) on a home whose socket folders are the install's."""
    base = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    base.chmod(0o755)
    home = base / "home"
    (base / "soul.md").write_text("A soul.\n")
    (base / "memoryd.toml").write_text(f'[paths]\nhome = "{home}"\n')
    for spec in (proto.LOOP_MEMORY, proto.BROKER_MEMORY, proto.OWNER_MEMORY):
        folder = (home / spec.relative_path).parent  # as tmpfiles makes it, before memoryd
        folder.mkdir(parents=True)
        peer_group = 0 if spec is proto.OWNER_MEMORY else MEMORYD_USER
        os.chown(folder, MEMORYD_USER, peer_group)
        folder.chmod(0o2750)  # the one peer's group may enter; nobody else
    (home / "config").mkdir()  # bxctl init's; the owner reads it
    running = start_role("memoryd", base / "memoryd.toml", log=base / "memoryd.log")
    try:
        (home / "memory" / "memory.md").write_text("Owner drinks tea.")
        yield home
    finally:
        ended = running.stop()
        shutil.rmtree(base, ignore_errors=True)
    assert ended.returncode == 0, ended.log


def as_owner(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python *args` as the owner's login: permissions checked, in the owner's group only."""
    drop = ["setpriv", f"--bounding-set={PASS_OVER}", f"--inh-caps={PASS_OVER}"]
    return subprocess.run(
        [*drop, sys.executable, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_memory_show_and_history_reach_memoryd_on_the_installs_layout(home: Path) -> None:
    loop = home / proto.LOOP_MEMORY.relative_path
    entered = as_owner(home, "-c", f"import os; os.stat({str(loop)!r})")
    assert entered.returncode != 0, "the owner could reach the loop's socket"
    assert "PermissionError" in entered.stderr

    shown = as_owner(home, "-m", "bxctl", "memory", "show", "--home", str(home))
    assert shown.returncode == 0, shown.stderr
    assert "Owner drinks tea." in shown.stdout
    history = as_owner(home, "-m", "bxctl", "memory", "history", "--json", "--home", str(home))
    assert history.returncode == 0, history.stderr
