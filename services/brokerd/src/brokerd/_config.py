"""brokerd's configuration: `brokerd.toml`, resolved into absolute paths.

The file's Struct, its defaults and checks are `proto.BrokerdConfig`, which bxctl reads too.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

import proto

__all__ = ["Settings", "load_settings", "resolve"]


@dataclasses.dataclass(frozen=True)
class Settings:
    """The configuration resolved into absolute paths."""

    home: Path
    memory_socket: Path
    memory_call_timeout_s: float
    loopd_socket: Path
    """`[loop] socket`: loopd's broker socket (broker-loop), where a forget asks loopd."""
    loopd_call_timeout_s: float
    runtime: Literal["local", "refusing"]
    approval_timeout_s: float
    loop_socket: Path
    """`[sockets] loop`: the socket brokerd serves loopd's tool calls on (loop-broker)."""
    admin_socket: Path
    read_timeout_s: float
    drain_s: float
    approval_key: Path
    """`[keys] approval`: brokerd signs each approved call it forwards to memoryd with it."""
    audit_key: Path
    """`[keys] audit`: brokerd's own; the audit log's chain and head are HMACs under it."""

    @property
    def grants_dir(self) -> Path:
        """`{home}/grants`, the owner's grant files."""
        return self.home / "grants"

    @property
    def audit_dir(self) -> Path:
        """`{home}/audit`, the hash-chained audit log."""
        return self.home / "audit"


def load_settings(config_path: Path) -> Settings:
    """Read and resolve brokerd.toml, or raise `proto.ConfigError` naming the problem."""
    config = proto.read_config(config_path, proto.BrokerdConfig)
    return resolve(config, config_dir=config_path.resolve().parent)


def resolve(config: proto.BrokerdConfig, *, config_dir: Path) -> Settings:
    """Turn a decoded config into absolute paths.

    A relative home or key path is relative to the config's directory; the keys default
    to `{home}/keys/approval.key` and `{home}/keys/audit.key`.
    """
    home = proto.config_home(config.paths.home, config_dir)

    def socket(configured: str | None, spec: proto.Socket[proto.Message]) -> Path:
        return proto.socket_path(configured, spec, home)

    return Settings(
        home=home,
        memory_socket=socket(config.memory.socket, proto.BROKER_MEMORY),
        memory_call_timeout_s=config.memory.call_timeout_s,
        loopd_socket=socket(config.loop.socket, proto.BROKER_LOOP),
        loopd_call_timeout_s=config.loop.call_timeout_s,
        runtime=config.runtime.kind,
        approval_timeout_s=config.approvals.timeout_s,
        loop_socket=socket(config.sockets.loop, proto.LOOP_BROKER),
        admin_socket=socket(config.sockets.admin, proto.OWNER_BROKER),
        read_timeout_s=config.sockets.read_timeout_s,
        drain_s=config.sockets.drain_s,
        approval_key=proto.home_path(config.keys.approval, proto.APPROVAL_KEY, home, config_dir),
        audit_key=proto.home_path(config.keys.audit, proto.AUDIT_KEY, home, config_dir),
    )
