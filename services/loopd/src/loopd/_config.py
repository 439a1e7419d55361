"""loopd's configuration: `loopd.toml`, resolved into absolute paths.

The file's Struct, its defaults and checks are `proto.LoopdConfig`, which bxctl reads too.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import msgspec

import proto

__all__ = ["ModelSection", "Settings", "load_settings", "resolve"]


ModelSection = proto.LoopdModel
"""`[model]` of loopd.toml (defined in proto, with every other config Struct)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """The configuration resolved into absolute paths."""

    home: Path
    model: ModelSection
    system_prompt: Path
    memory_socket: Path
    broker_socket: Path
    chat_socket: Path
    forget_socket: Path
    """The broker-loop socket loopd serves: brokerd asks it for its part of a forget."""
    read_timeout_s: float
    drain_s: float
    broker_timeout_s: float = 960.0
    chat_peers: frozenset[int] = frozenset()
    forget_peers: frozenset[int] = frozenset()
    forget_wait_s: float = 60.0
    """How long a forget waits for a session's running turn: well inside brokerd's
    `[loop] call_timeout_s` (120 s by default), so brokerd hears which session is busy."""

    @property
    def sessions_dir(self) -> Path:
        """`{home}/sessions`, loopd's own."""
        return self.home / "sessions"


def load_settings(config_path: Path) -> Settings:
    """Read and resolve loopd.toml, or raise `proto.ConfigError` naming the problem."""
    config = proto.read_config(config_path, proto.LoopdConfig)
    return resolve(config, config_dir=config_path.resolve().parent)


def _model_section(model: ModelSection) -> ModelSection:
    if model.url != proto.EMBEDDED:
        return model
    url = os.environ.get(proto.EMBEDDED_URL_ENV)
    if not url:
        raise proto.ConfigError(
            '[model] url is "embedded", the demo model that `bxctl up` runs; start boxmaker '
            "with `bxctl up`, or set [model] url to your model server's OpenAI-compatible URL"
        )
    # Its tiny model, offered tools, calls them for everything ("hello" included): text
    # only, unless the owner says otherwise. The server (llama-cpp-python) cannot stream
    # while tools are offered; with "none" none are sent, so it streams.
    tool_choice = model.tool_choice or "none"
    return msgspec.structs.replace(
        model, url=url, stream=model.stream and tool_choice == "none", tool_choice=tool_choice
    )


def resolve(config: proto.LoopdConfig, *, config_dir: Path) -> Settings:
    """Turn a decoded config into absolute paths (relative ones are next to the config)."""
    home = proto.config_home(config.paths.home, config_dir)

    def socket(configured: str | None, spec: proto.Socket[proto.Message]) -> Path:
        return proto.socket_path(configured, spec, home)

    return Settings(
        home=home,
        model=_model_section(config.model),
        system_prompt=config_dir / Path(config.prompt.system).expanduser(),
        memory_socket=socket(config.memory.socket, proto.LOOP_MEMORY),
        broker_socket=socket(config.broker.socket, proto.LOOP_BROKER),
        chat_socket=socket(config.sockets.chat, proto.OWNER_LOOP),
        read_timeout_s=config.sockets.read_timeout_s,
        drain_s=config.sockets.drain_s,
        broker_timeout_s=config.broker.call_timeout_s,
        chat_peers=proto.peers_of(config.peers.chat, "chat"),
        forget_socket=socket(config.sockets.broker, proto.BROKER_LOOP),
        forget_peers=proto.peers_of(config.peers.broker, "broker"),
    )
