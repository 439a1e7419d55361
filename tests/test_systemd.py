"""The shipped systemd units: valid for systemd, hardened as docs/install.md says."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import proto

UNITS = Path(__file__).resolve().parents[1] / "config" / "systemd"
ROLES = ("memoryd", "brokerd", "loopd")
UNITS_ALL = (*ROLES, "mattermostd")


def unit(role: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNITS / f"boxmaker-{role}.service")
    return parser


@pytest.mark.parametrize("role", UNITS_ALL)
def test_each_role_has_a_hardened_notify_unit(role: str) -> None:
    service = unit(role)["Service"]
    assert service["Type"] == "notify"
    assert service["User"] == f"boxmaker-{role}"  # each role its own user
    assert service["RuntimeDirectory"] == f"boxmaker-{role}"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["UMask"] in ("0077", "0027")  # 0027: the group may read what it is given
    assert service["CapabilityBoundingSet"] == ""
    assert service["RestrictSUIDSGID"] == "yes"
    config = "mattermost.toml" if role == "mattermostd" else f"{role}.toml"
    assert service["ExecStart"].endswith(
        f"/{role} serve --config /var/lib/boxmaker/config/{config}"
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
    for role in UNITS_ALL:
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


def tmpfiles() -> dict[str, tuple[str, str, str]]:
    """The directories boxmaker.tmpfiles makes: path -> (mode, user, group)."""
    made = {}
    for line in (UNITS / "boxmaker.tmpfiles").read_text().splitlines():
        if line.startswith("d "):
            _, path, mode, user, group, _ = line.split()
            made[path] = (mode, user, group)
    return made


def sysusers() -> tuple[set[str], set[str], set[tuple[str, str]]]:
    """The users, groups (own ones included) and memberships boxmaker.sysusers makes."""
    users, groups, members = set(), set(), set()
    for line in (UNITS / "boxmaker.sysusers").read_text().splitlines():
        kind, *rest = line.split() or ["#"]
        if kind == "u":
            users.add(rest[0])
            groups.add(rest[0])
        elif kind == "g":
            groups.add(rest[0])
        elif kind == "m":
            members.add((rest[0], rest[1]))
    return users, groups, members


@pytest.mark.parametrize("role", UNITS_ALL)
def test_every_directory_a_role_writes_is_made_for_it(role: str) -> None:
    made = tmpfiles()
    service = unit(role)["Service"]
    for path in service["ReadWritePaths"].split():
        assert made[path][1] == service["User"], path


def test_each_socket_directory_is_given_to_its_one_peer_group() -> None:
    made = tmpfiles()
    users, groups, _ = sysusers()
    for spec in proto.SOCKETS:
        mode, owner, group = made[f"/var/lib/boxmaker/{spec.relative_path.rsplit('/', 1)[0]}"]
        assert owner == f"boxmaker-{spec.server}", spec.name
        peer = "boxmaker-owner" if spec.peer == "bxctl" else f"boxmaker-{spec.peer}"
        assert group == peer, spec.name
        assert mode == "2750", spec.name  # the peer's group may connect; nobody else
        assert owner in users
        assert group in groups


def test_memoryd_reads_sessions_and_the_approval_key_as_a_group_member() -> None:
    made = tmpfiles()
    _, _, members = sysusers()
    assert made["/var/lib/boxmaker/sessions"] == ("2750", "boxmaker-loopd", "boxmaker-sessions")
    assert made["/var/lib/boxmaker/keys"] == ("2750", "boxmaker-brokerd", "boxmaker-approval")
    assert {
        ("boxmaker-memoryd", "boxmaker-sessions"),
        ("boxmaker-memoryd", "boxmaker-approval"),
    } <= members
    memoryd = unit("memoryd")["Service"]
    assert set(memoryd["SupplementaryGroups"].split()) == {"boxmaker-sessions", "boxmaker-approval"}
    assert made["/var/lib/boxmaker/memory"][0] == "0700"  # nobody else reads memory/


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
@pytest.mark.parametrize("role", UNITS_ALL)
def test_every_unit_is_exposed_ok_or_better(role: str) -> None:
    # systemd rates exposure 0-10: below 5 is "OK" (below 2 "SAFE"); --threshold fails above.
    done = subprocess.run(
        [
            "systemd-analyze",
            "security",
            "--offline=yes",
            "--threshold=49",
            str(UNITS / f"boxmaker-{role}.service"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    print(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("role", UNITS_ALL)
def test_systemd_waits_longer_than_the_drain_and_bxctl_up(role: str) -> None:
    # SIGTERM → drain (at most DEFAULT_DRAIN_S) → a cancelled turn records its call and the
    # model client closes (5 s each, shielded) → exit. bxctl up waits STOP_MARGIN_S past
    # the drain; systemd must wait longer still before it sends SIGKILL.
    from bxctl._up import STOP_MARGIN_S

    stop = float(unit(role)["Service"]["TimeoutStopSec"])
    assert proto.DEFAULT_DRAIN_S + 10 < proto.DEFAULT_DRAIN_S + STOP_MARGIN_S < stop


def test_the_bridge_is_an_owner_device_not_restarted_when_it_waits_for_the_owner() -> None:
    service = unit("mattermostd")["Service"]
    _, _, members = sysusers()
    assert service["SupplementaryGroups"] == "boxmaker-owner"  # reaches the owner sockets
    assert ("boxmaker-mattermostd", "boxmaker-owner") in members
    assert service["RestartPreventExitStatus"] == str(proto.NEEDS_OWNER_EXIT)
    assert tmpfiles()["/var/lib/boxmaker/mattermost"][0] == "0700"  # its state and token
