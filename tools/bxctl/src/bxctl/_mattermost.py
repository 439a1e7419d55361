"""`bxctl init --mattermost-url … --token-file … --owner USERNAME`: mattermost.toml.

The token is checked where it lives (a file only its owner reads), and used once, here,
to ask the server who the bot is and which user id the owner's name has: the config
keeps the id (a username can change), never the token.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import msgspec
import tomlkit

import proto

from ._common import CommandError, inline
from ._init import _set, _table, _with_home, _write_new, shipped_config_dir

__all__ = ["CONFIG_NAME", "mattermost_config"]

CONFIG_NAME = "mattermost.toml"
TIMEOUT_S = 15.0


class _User(msgspec.Struct, frozen=True):
    id: str
    username: str = ""


def _lookup(url: str, token: str, path: str) -> _User:
    try:
        with httpx.Client(
            base_url=f"{url}/api/v4",
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT_S,
        ) as http:
            response = http.get(path)
    except httpx.HTTPError as exc:
        raise CommandError(
            f"cannot reach Mattermost at {inline(url)}: {inline(str(exc))}"
        ) from None
    if response.status_code == 401:
        raise CommandError(
            f"Mattermost at {inline(url)} refused the token: make a new one for the bot "
            "(docs/mattermost.md) and put it in the token file"
        )
    if response.status_code == 404:
        raise CommandError(
            f"Mattermost at {inline(url)} has no user {inline(path.rsplit('/', 1)[-1])}"
        )
    if response.status_code != 200:
        raise CommandError(
            f"Mattermost at {inline(url)} answered {response.status_code} to {inline(path)}"
        )
    try:
        return msgspec.json.decode(response.content, type=_User)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise CommandError(f"{url} does not answer like a Mattermost server") from None


def mattermost_config(
    home: Path,
    *,
    url: str,
    token_file: Path,
    owner: str,
    channel: str | None = None,
) -> Path | None:
    """Write `{home}/config/mattermost.toml`; the path, or None if it exists already."""
    url = url.rstrip("/")
    if not url.startswith(("https://", "http://")):
        raise CommandError(f"--mattermost-url must start with https:// (got {url})")
    token_path = token_file.expanduser().absolute()
    try:
        token = proto.read_token_file(token_path)
    except proto.NeedsOwner as exc:
        raise CommandError(str(exc)) from None
    name = owner.removeprefix("@")
    if not name or any(not (c.isascii() and (c.isalnum() or c in "._-")) for c in name):
        raise CommandError(f"--owner is a Mattermost username (got {owner})")
    bot = _lookup(url, token, "/users/me")
    person = _lookup(url, token, f"/users/username/{name}")
    if person.id == bot.id:
        raise CommandError(
            f"--owner {inline(name)} is the bot itself; give the username you use in Mattermost"
        )
    doc = tomlkit.parse((shipped_config_dir() / CONFIG_NAME).read_text(encoding="utf-8"))
    doc["paths"] = _with_home(_table(doc, "paths"), str(home))
    _set(_table(doc, "server"), "url", url)
    _set(_table(doc, "server"), "token_file", str(token_path))
    _set(_table(doc, "owner"), "user_id", person.id)
    _set(_table(doc, "owner"), "username", person.username or name)
    if channel is not None:
        _table(doc, "listen")["channel"] = channel
    text = doc.as_string()
    try:
        msgspec.toml.decode(text.encode(), type=proto.MattermostConfig)
    except msgspec.ValidationError as exc:
        raise CommandError(f"these settings do not make a valid mattermost.toml: {exc}") from None
    path = home / "config" / CONFIG_NAME
    if not _write_new(path, text):
        return None
    print(
        f"Mattermost: the bot {inline(bot.username or bot.id)} answers "
        f"{inline(person.username or name)} (user id {person.id})"
    )
    return path
