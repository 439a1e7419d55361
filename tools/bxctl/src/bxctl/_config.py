"""`bxctl config`: each role's TOML file, read with the role's own Struct, edited with tomlkit.

A key is `section.key` where one file has it (`model.url` is loopd's, `server.heartbeat_s`
mattermost's), or `FILE.section.key`, FILE being the file's name without `.toml`
(`memoryd`, `brokerd`, `loopd`, `mattermost`; `mattermostd` is taken too), where several
have it (`loopd.sockets.drain_s`). A new value is checked by decoding the whole file with
the role's Struct (`proto.LoopdConfig`, …) before anything is written, so a value the
role would refuse at start is refused here, with the role's own sentence. The owner's
comments and layout stay as they are. mattermost.toml exists only once the bridge is set
up (`bxctl init --mattermost-url …`): without it, its keys say how to set it up.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import msgspec

import proto

from ._common import CommandError, bxctl, inline

__all__ = ["KINDS", "get", "keys", "set_value", "show"]

BRIDGE_FILE = "mattermost"

KINDS: dict[str, type[msgspec.Struct]] = {
    "memoryd": proto.MemorydConfig,
    "brokerd": proto.BrokerdConfig,
    "loopd": proto.LoopdConfig,
    BRIDGE_FILE: proto.MattermostConfig,
}
"""Each file in `{home}/config/` (its name without `.toml`) and the Struct its role reads."""

ROLE_OF = {BRIDGE_FILE: "mattermostd"}
"""The role that reads a file, where it is not the file's name."""

ALIASES = {role: file for file, role in ROLE_OF.items()}
"""A role's name, taken as its file's (`mattermostd.server.url`)."""


def keys(role: str) -> list[tuple[str, str]]:
    """Every (section, key) of a role's config, in the Struct's order."""
    found = []
    for section in msgspec.structs.fields(KINDS[role]):
        for field in msgspec.structs.fields(section.type):
            found.append((section.name, field.name))
    return found


def _resolve(key: str) -> tuple[str, str, str]:
    """(role, section, key) for `key`, or a `CommandError` naming the nearest keys."""
    parts = key.split(".")
    if len(parts) == 3:
        parts[0] = ALIASES.get(parts[0], parts[0])
    if len(parts) == 3 and parts[0] in KINDS:
        role, section, name = parts
        if (section, name) in keys(role):
            return role, section, name
    elif len(parts) == 2:
        owners = [role for role in KINDS if (parts[0], parts[1]) in keys(role)]
        if len(owners) == 1:
            return owners[0], parts[0], parts[1]
        if owners:
            which = ", ".join(f"{role}.{key}" for role in owners)
            raise CommandError(f"{key} is in several roles' configs; say which: {which}")
    every = [f"{s}.{k}" for role in KINDS for s, k in keys(role)]
    every += [f"{role}.{s}.{k}" for role in KINDS for s, k in keys(role)]
    near = difflib.get_close_matches(key, every, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(near)}?" if near else ""
    return _unknown(key, hint)


def _unknown(key: str, hint: str) -> tuple[str, str, str]:
    raise CommandError(f"no setting {key}{hint} (`{bxctl('config show')}` lists them)")


def _path(home: Path, role: str) -> Path:
    return home / "config" / f"{role}.toml"


def _no_bridge(home: Path) -> str:
    return (
        f"there is no {_path(home, BRIDGE_FILE)}: the Mattermost bridge is not set up. Set "
        f"it up with `{bxctl('init --mattermost-url URL --token-file FILE --owner USERNAME')}` "
        "(docs/mattermost.md)"
    )


def _read(home: Path, role: str) -> Any:
    if role == BRIDGE_FILE and not _path(home, role).exists():
        raise CommandError(_no_bridge(home))
    try:
        return proto.read_config(_path(home, role), KINDS[role])
    except proto.ConfigError as exc:
        raise CommandError(str(exc)) from None


def _toml(value: object) -> str:
    import tomlkit

    if value is None:
        return "(not set)"
    if isinstance(value, frozenset | set):
        value = sorted(value)
    return str(tomlkit.item(value).as_string())


def show(home: Path) -> int:
    """Print every setting of every role, with its value now."""
    for role in KINDS:
        if role == BRIDGE_FILE and not _path(home, role).exists():
            print(f"# {role}: {_no_bridge(home)}")
            continue
        config = _read(home, role)
        print(f"# {role}: {_path(home, role)}")
        for section, name in keys(role):
            value = getattr(getattr(config, section), name)
            print(f"{role}.{section}.{name} = {inline(_toml(value))}")
        print()
    return 0


def get(home: Path, key: str) -> int:
    """Print one setting's value."""
    role, section, name = _resolve(key)
    print(inline(_toml(getattr(getattr(_read(home, role), section), name))))
    return 0


def _parse(value: str) -> Any:
    """`value` as TOML (`8192`, `true`, `"text"`, `["a"]`); anything else is text."""
    import tomlkit
    import tomlkit.exceptions

    try:
        return tomlkit.parse(f"v = {value}")["v"]
    except tomlkit.exceptions.TOMLKitError:
        return value


def set_value(home: Path, key: str, value: str) -> int:
    """Set one setting in its role's file, checked with the role's Struct first."""
    import tomlkit
    import tomlkit.exceptions

    role, section, name = _resolve(key)
    path = _path(home, role)
    if role == BRIDGE_FILE and not path.exists():
        raise CommandError(_no_bridge(home))
    try:
        document = tomlkit.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None
    except tomlkit.exceptions.TOMLKitError as exc:
        raise CommandError(f"{path} is not TOML ({exc}); fix it by hand first") from None
    before = _toml(getattr(getattr(_read(home, role), section), name))
    if section not in document:
        document.add(section, tomlkit.table())
    document[section][name] = _parse(value)
    text = tomlkit.dumps(document)
    try:
        msgspec.toml.decode(text.encode(), type=KINDS[role])
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise CommandError(
            f"{role} would refuse {key} = {inline(value)}: "
            f"{proto.lower_first(proto.config_problem(exc))}; "
            "nothing was changed"
        ) from None
    proto.write_atomically(path, text.encode())
    after = _toml(getattr(getattr(_read(home, role), section), name))
    print(f"{role}.{section}.{name} = {inline(after)} (was {inline(before)}) in {path}")
    runs = ROLE_OF.get(role, role)
    print(
        f"restart {runs} for it to take effect: Ctrl-C `{bxctl('up')}` and start it again, "
        f"or `systemctl restart boxmaker-{runs}`"
    )
    return 0
