"""loopd's configuration: `loopd.toml` decoded into frozen Structs; unknown keys fail."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Literal

import msgspec

import proto

__all__ = ["LoopdConfig", "ModelSettings", "Settings", "load_settings", "resolve"]


class ModelSection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[model]`: an OpenAI-compatible chat completions server."""

    url: str = "embedded"
    """The server's OpenAI-compatible base URL, or "embedded": the demo model `bxctl up`
    runs, whose address it passes in `$BOXMAKER_EMBEDDED_MODEL_URL`."""
    model: str = "local"
    api_key_env: str | None = None
    context_tokens: int = 8192
    max_tokens: int = 1024
    temperature: float = 0.2
    timeout_s: float = 120.0
    stream: bool = True
    null_content: bool = False
    tool_choice: Literal["auto", "none"] | None = None
    """"auto" lets the model call tools; "none" asks for text only. Default: "auto", or
    "none" for the embedded demo model, which calls tools badly and constantly."""
    max_steps: int = 16


class MemorySection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[memory]`: memoryd's loop socket."""

    socket: str | None = None


class BrokerSection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[broker]`: brokerd's loop socket."""

    socket: str | None = None


class PromptSection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[prompt]`: system.md, relative to the config file's directory."""

    system: str = "system.md"


class SocketsSection(proto.ConfigSection, frozen=True, kw_only=True):
    """`[sockets]`: the chat socket loopd serves."""

    chat: str | None = None
    read_timeout_s: float = 10.0


class LoopdConfig(proto.ConfigSection, frozen=True, kw_only=True):
    """The whole of loopd.toml."""

    paths: proto.PathsSection = msgspec.field(default_factory=proto.PathsSection)
    model: ModelSection = msgspec.field(default_factory=ModelSection)
    memory: MemorySection = msgspec.field(default_factory=MemorySection)
    broker: BrokerSection = msgspec.field(default_factory=BrokerSection)
    prompt: PromptSection = msgspec.field(default_factory=PromptSection)
    sockets: SocketsSection = msgspec.field(default_factory=SocketsSection)


ModelSettings = ModelSection


@dataclasses.dataclass(frozen=True)
class Settings:
    """The configuration resolved into absolute paths."""

    home: Path
    model: ModelSection
    system_prompt: Path
    memory_socket: Path
    broker_socket: Path
    chat_socket: Path
    read_timeout_s: float

    @property
    def sessions_dir(self) -> Path:
        """`{home}/sessions`, loopd's own."""
        return self.home / "sessions"


def load_settings(config_path: Path) -> Settings:
    """Read and resolve loopd.toml, or raise `proto.ConfigError` naming the problem."""
    config = proto.read_config(config_path, LoopdConfig)
    return resolve(config, config_dir=config_path.resolve().parent)


EMBEDDED = "embedded"
EMBEDDED_URL_ENV = "BOXMAKER_EMBEDDED_MODEL_URL"


def _model_section(model: ModelSection) -> ModelSection:
    if model.url != EMBEDDED:
        return model
    url = os.environ.get(EMBEDDED_URL_ENV)
    if not url:
        raise proto.ConfigError(
            '[model] url is "embedded", the demo model that `bxctl up` runs; start boxmaker '
            "with `bxctl up`, or set [model] url to your model server's OpenAI-compatible URL"
        )
    # The embedded server (llama-cpp-python) cannot stream while tools are offered, and
    # its tiny model, offered tools, calls them for everything ("hello" included).
    return msgspec.structs.replace(
        model, url=url, stream=False, tool_choice=model.tool_choice or "none"
    )


def resolve(config: LoopdConfig, *, config_dir: Path) -> Settings:
    """Turn a decoded config into absolute paths (relative ones are next to the config)."""
    home = proto.config_home(config.paths.home, config_dir)

    def socket(configured: str | None, spec: proto.Socket) -> Path:
        return proto.socket_path(configured, spec, home)

    return Settings(
        home=home,
        model=_model_section(config.model),
        system_prompt=config_dir / Path(config.prompt.system).expanduser(),
        memory_socket=socket(config.memory.socket, proto.LOOP_MEMORY),
        broker_socket=socket(config.broker.socket, proto.LOOP_BROKER),
        chat_socket=socket(config.sockets.chat, proto.OWNER_LOOP),
        read_timeout_s=config.sockets.read_timeout_s,
    )
