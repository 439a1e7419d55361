"""mattermostd's configuration: `mattermost.toml`, resolved, and the bot's token read.

The file's Struct is `proto.MattermostConfig` (bxctl writes and checks it too).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import proto

__all__ = ["Settings", "load_settings", "resolve"]


@dataclasses.dataclass(frozen=True)
class Settings:
    """The configuration resolved into absolute paths."""

    home: Path
    url: str
    token_file: Path
    timeout_s: float
    heartbeat_s: float
    owner_id: str
    owner_name: str
    channel: str | None
    update_s: float
    loop_socket: Path
    broker_socket: Path
    memory_socket: Path
    drain_s: float
    call_timeout_s: float = 30.0

    @property
    def state_file(self) -> Path:
        """`{home}/mattermost/state.json`, the bridge's own."""
        return self.home / "mattermost" / "state.json"


def load_settings(config_path: Path) -> Settings:
    """Read and resolve mattermost.toml; any problem is `proto.NeedsOwner`.

    A restart cannot fix a config, and the bridge is the one role boxmaker runs without:
    it stops and says why, and the others go on.
    """
    try:
        config = proto.read_config(config_path, proto.MattermostConfig)
    except proto.ConfigError as exc:
        raise proto.NeedsOwner(f"{exc} (runbook: mattermost-config)") from None
    return resolve(config, config_dir=config_path.resolve().parent)


def resolve(config: proto.MattermostConfig, *, config_dir: Path) -> Settings:
    """Turn a decoded config into absolute paths (relative ones are next to the config)."""
    home = proto.config_home(config.paths.home, config_dir)
    return Settings(
        home=home,
        url=config.server.url.rstrip("/"),
        token_file=config_dir / Path(config.server.token_file).expanduser(),
        timeout_s=config.server.timeout_s,
        heartbeat_s=config.server.heartbeat_s,
        owner_id=config.owner.user_id,
        owner_name=config.owner.username or config.owner.user_id,
        channel=config.listen.channel,
        update_s=config.reply.update_s,
        loop_socket=proto.socket_path(config.sockets.loop, proto.OWNER_LOOP, home),
        broker_socket=proto.socket_path(config.sockets.broker, proto.OWNER_BROKER, home),
        memory_socket=proto.socket_path(config.sockets.memory, proto.OWNER_MEMORY, home),
        drain_s=config.sockets.drain_s,
        call_timeout_s=config.sockets.call_timeout_s,
    )
