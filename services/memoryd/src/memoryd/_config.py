"""memoryd's configuration: `memoryd.toml`, resolved into absolute paths.

The file's Struct, its defaults and checks are `proto.MemorydConfig`, which bxctl reads too.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import proto
from proto import Class, FunctionWordsLanguage, MemorydConfig, RecallRanking

__all__ = ["Settings", "load_settings", "resolve"]


@dataclasses.dataclass(frozen=True)
class Settings:
    """The configuration resolved into absolute paths."""

    home: Path
    soul_starter: Path
    max_class: Class
    loop_socket: Path
    broker_socket: Path
    admin_socket: Path
    read_timeout_s: float
    drain_s: float
    approval_key: Path
    ranking: RecallRanking
    languages: tuple[FunctionWordsLanguage, ...]
    loop_peers: frozenset[int] = frozenset()
    broker_peers: frozenset[int] = frozenset()
    admin_peers: frozenset[int] = frozenset()

    @property
    def memory_dir(self) -> Path:
        """`{home}/memory`."""
        return self.home / "memory"

    @property
    def index_dir(self) -> Path:
        """`{home}/index`."""
        return self.home / "index"

    @property
    def sessions_dir(self) -> Path:
        """`{home}/sessions`, loopd's; memoryd only reads it."""
        return self.home / "sessions"


def load_settings(config_path: Path) -> Settings:
    """Read and resolve memoryd.toml, or raise `proto.ConfigError` naming the problem."""
    config = proto.read_config(config_path, MemorydConfig)
    return resolve(config, config_dir=config_path.resolve().parent)


def resolve(config: MemorydConfig, *, config_dir: Path) -> Settings:
    """Turn a decoded config into absolute paths (relative ones are next to the config)."""
    home = proto.config_home(config.paths.home, config_dir)

    def socket(configured: str | None, spec: proto.Socket[proto.Message]) -> Path:
        return proto.socket_path(configured, spec, home)

    return Settings(
        home=home,
        soul_starter=config_dir / Path(config.memory.soul_starter).expanduser(),
        max_class=config.index.max_class,
        loop_socket=socket(config.sockets.loop, proto.LOOP_MEMORY),
        broker_socket=socket(config.sockets.broker, proto.BROKER_MEMORY),
        admin_socket=socket(config.sockets.admin, proto.OWNER_MEMORY),
        read_timeout_s=config.sockets.read_timeout_s,
        drain_s=config.sockets.drain_s,
        approval_key=proto.home_path(config.keys.approval, proto.APPROVAL_KEY, home, config_dir),
        ranking=config.recall.ranking,
        languages=tuple(config.recall.languages),
        loop_peers=proto.peers_of(config.peers.loop, "loop"),
        broker_peers=proto.peers_of(config.peers.broker, "broker"),
        admin_peers=proto.peers_of(config.peers.admin, "admin"),
    )
