"""brokerd's configuration: `brokerd.toml` decoded into frozen Structs.

Unknown keys are errors naming the key, so a typo fails at start rather than being
ignored. Defaults live here and nowhere else.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Literal

import msgspec

import proto

__all__ = ["BrokerdConfig", "Settings", "load_settings", "resolve"]

PositiveSeconds = Annotated[float, msgspec.Meta(gt=0)]


class MemorySection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[memory]`: memoryd's broker socket, where recall and memory calls go."""

    socket: str | None = None
    call_timeout_s: PositiveSeconds = 30.0


class RuntimeSection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[runtime]`: what runs every tool but recall and memory."""

    kind: Literal["local", "refusing"] = "local"


class ApprovalsSection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[approvals]`: how long an `ask` call waits for the owner before it is denied."""

    timeout_s: PositiveSeconds = 900.0


class SocketsSection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[sockets]`: socket paths; defaults under `{home}/run/` (ARCHITECTURE §2)."""

    loop: str | None = None
    admin: str | None = None
    read_timeout_s: PositiveSeconds = 10.0


class BrokerdConfig(proto.ConfigSection, frozen=True, kw_only=True):
    """The whole of brokerd.toml."""

    paths: proto.PathsSection = msgspec.field(default_factory=proto.PathsSection)
    memory: MemorySection = msgspec.field(default_factory=MemorySection)
    runtime: RuntimeSection = msgspec.field(default_factory=RuntimeSection)
    approvals: ApprovalsSection = msgspec.field(default_factory=ApprovalsSection)
    sockets: SocketsSection = msgspec.field(default_factory=SocketsSection)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The configuration resolved into absolute paths."""

    home: Path
    memory_socket: Path
    memory_call_timeout_s: float
    runtime: Literal["local", "refusing"]
    approval_timeout_s: float
    loop_socket: Path
    admin_socket: Path
    read_timeout_s: float

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
    config = proto.read_config(config_path, BrokerdConfig)
    return resolve(config, config_dir=config_path.resolve().parent)


def resolve(config: BrokerdConfig, *, config_dir: Path) -> Settings:
    """Turn a decoded config into absolute paths (a relative home is next to the config)."""
    home = proto.config_home(config.paths.home, config_dir)

    def socket(configured: str | None, spec: proto.Socket) -> Path:
        return proto.socket_path(configured, spec, home)

    return Settings(
        home=home,
        memory_socket=socket(config.memory.socket, proto.BROKER_MEMORY),
        memory_call_timeout_s=config.memory.call_timeout_s,
        runtime=config.runtime.kind,
        approval_timeout_s=config.approvals.timeout_s,
        loop_socket=socket(config.sockets.loop, proto.LOOP_BROKER),
        admin_socket=socket(config.sockets.admin, proto.OWNER_BROKER),
        read_timeout_s=config.sockets.read_timeout_s,
    )
