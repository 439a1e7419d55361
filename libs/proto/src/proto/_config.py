"""What every role's configuration shares: reading the TOML, the home, socket paths."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import msgspec

from ._home import resolve_home, resolve_peers
from ._messages import Message
from ._sockets import Socket

__all__ = [
    "BOM_SENTENCE",
    "NEEDS_OWNER_EXIT",
    "PATTERN_MEANINGS",
    "ConfigError",
    "ConfigSection",
    "NeedsOwner",
    "PathsSection",
    "StartFailed",
    "config_home",
    "config_problem",
    "home_path",
    "peers_of",
    "read_config",
    "socket_path",
]

C = TypeVar("C")


class ConfigSection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every config table: frozen, and an unknown key is an error naming it."""


class PathsSection(ConfigSection, frozen=True, kw_only=True):
    """`[paths]`: where the home is (default `$BOXMAKER_HOME`, then `~/.boxmaker`)."""

    home: str | None = None


class StartFailed(Exception):
    """A role cannot start with what it was given; the message says what to fix."""


class ConfigError(StartFailed):
    """The configuration file is missing, unreadable or invalid."""


NEEDS_OWNER_EXIT = 78
"""The exit code of a role stopped by something only the owner can fix (`EX_CONFIG`).

`bxctl up` does not start such a role again, and the units name it in
`RestartPreventExitStatus=`: a restart would only fail the same way, or worse (a
refused token tried again and again can lock the account).
"""


class NeedsOwner(StartFailed):
    """The role stops, at start or later, until the owner fixes what the message says."""


BOM_SENTENCE = (
    "it starts with a byte-order mark (U+FEFF, which some editors add); save it as UTF-8 "
    "without one"
)
"""Why a TOML file that starts with a BOM is refused (TOML parsers read it as text)."""

PATTERN_MEANINGS: dict[str, str] = {}
"""What a config value's pattern asks for, in words (filled where the patterns are)."""


def config_problem(exc: msgspec.ValidationError | msgspec.DecodeError) -> str:
    """The decoder's sentence for a config, with a pattern said in words, not as a regex."""
    text = str(exc)
    for pattern, meaning in PATTERN_MEANINGS.items():
        text = text.replace(f"`str` matching regex {pattern!r}", meaning)
    return text


def read_config(path: Path, config_type: type[C]) -> C:
    """Decode a role's TOML file into its Struct; unknown keys fail with their path."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ConfigError(f"config {path}: {BOM_SENTENCE}")
    try:
        return msgspec.toml.decode(raw, type=config_type)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ConfigError(f"config {path}: {config_problem(exc)}") from exc


def config_home(configured: str | None, config_dir: Path) -> Path:
    """`[paths] home` resolved: `resolve_home`, and a relative path is next to the config."""
    home = resolve_home(configured)
    return home if home.is_absolute() else (config_dir / home).resolve()


def home_path(configured: str | None, default: str, home: Path, config_dir: Path) -> Path:
    """A configured path, or `default` under the home.

    A configured path has `~` expanded and is relative to the config's directory.
    """
    if not configured:
        return home / default
    return (config_dir / Path(configured).expanduser()).resolve()


def peers_of(names: list[str], key: str) -> frozenset[int]:
    """The uids of a `[peers]` list; `ConfigError` naming the key for an unknown user."""
    try:
        return resolve_peers(names)
    except ValueError as exc:
        raise ConfigError(f"[peers] {key}: {exc}") from None


def socket_path(configured: str | None, spec: Socket[Message], home: Path) -> Path:
    """A configured socket path, or the socket's default under the home.

    A configured path has `~` expanded; a relative one is under the home, as the defaults
    are (not under whatever directory the role happens to be started in), so bxctl finds
    it where the role serves it.
    """
    if not configured:
        return spec.default_path(home)
    return home / Path(configured).expanduser()
