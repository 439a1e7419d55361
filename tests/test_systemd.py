"""The shipped systemd units: valid for systemd, hardened as ARCHITECTURE §7 and the issue ask."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parents[1] / "config" / "systemd"
ROLES = ("memoryd", "brokerd", "loopd")


def unit(role: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNITS / f"boxmaker-{role}.service")
    return parser


@pytest.mark.parametrize("role", ROLES)
def test_each_role_has_a_hardened_notify_unit(role: str) -> None:
    service = unit(role)["Service"]
    assert service["Type"] == "notify"
    assert service["User"] == "boxmaker"
    assert service["RuntimeDirectory"] == f"boxmaker-{role}"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["UMask"] == "0077"
    assert service["ExecStart"].endswith(
        f"/{role} serve --config /var/lib/boxmaker/config/{role}.toml"
    )
    writable = service["ReadWritePaths"].split()
    assert writable
    assert all(p.startswith("/var/lib/boxmaker/") for p in writable)


def test_memoryd_has_no_network() -> None:
    service = unit("memoryd")["Service"]
    assert service["PrivateNetwork"] == "yes"
    assert service["RestrictAddressFamilies"] == "AF_UNIX"


def test_each_role_writes_only_its_own_directories() -> None:
    writable = {r: set(unit(r)["Service"]["ReadWritePaths"].split()) for r in ROLES}
    assert writable["memoryd"] & writable["loopd"] == set()
    assert writable["memoryd"] & writable["brokerd"] == set()
    assert "/var/lib/boxmaker/sessions" in writable["loopd"]
    assert not any("sessions" in p for p in writable["memoryd"])  # memoryd only reads it


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    # Point ExecStart at this environment's real entry points so verify can check them.
    bindir = Path(sys.executable).parent
    for role in ROLES:
        text = (UNITS / f"boxmaker-{role}.service").read_text()
        (tmp_path / f"boxmaker-{role}.service").write_text(
            text.replace("/opt/boxmaker/.venv/bin/", f"{bindir}/")
        )
    done = subprocess.run(
        ["systemd-analyze", "verify", *sorted(str(p) for p in tmp_path.glob("*.service"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "boxmaker" not in done.stderr, done.stderr
