"""bxctl finds each role's socket where the role's own config says it serves it (issue 20).

The oracle is the role itself: its `load_settings` on the same file gives the path it
binds, and `bxctl.Sockets` must give the same one, for any `[sockets]` path (absolute,
relative, `~`, none) and any `[paths] home`. The real roles on such a home are in
tests/e2e/test_up.py.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brokerd._config
import loopd._config
import memoryd._config
import proto
from bxctl._common import SERVED_AT, CommandError, Sockets, ask

ROLE_SETTINGS: dict[str, Callable[[Path], object]] = {
    "memoryd": memoryd._config.load_settings,
    "brokerd": brokerd._config.load_settings,
    "loopd": loopd._config.load_settings,
}
SETTING = {"loop": "loop_socket", "broker": "broker_socket", "admin": "admin_socket"}
"""The role's Settings attribute for each `[sockets]` key (loopd's are below)."""
LOOPD_SETTING = {"chat": "chat_socket", "broker": "forget_socket"}
"""loopd's: its `broker_socket` is brokerd's socket it calls, so the one it serves for
brokerd is `forget_socket`."""

name = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
relative = st.lists(name, min_size=1, max_size=3).map("/".join)
a_path = st.one_of(
    st.none(),
    relative,
    relative.map(lambda p: "/tmp/" + p),
    relative.map(lambda p: "~/" + p),
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(proto.SOCKETS),
    a_path,
    st.one_of(st.none(), relative, relative.map(lambda p: "/srv/" + p)),
)
def test_bxctl_finds_a_socket_where_its_role_serves_it(
    spec: proto.Socket[proto.Message], configured: str | None, configured_home: str | None
) -> None:
    role, key = SERVED_AT[spec.name]
    with tempfile.TemporaryDirectory(prefix="bx", dir="/tmp") as directory:
        home = Path(directory) / "home"
        (home / "config").mkdir(parents=True)
        toml = home / "config" / f"{role}.toml"
        lines = ['[model]\nurl = "http://127.0.0.1:9/v1"\n'] if role == "loopd" else []
        if configured_home is not None:
            lines.append(f"[paths]\nhome = {configured_home!r}\n")
        if configured is not None:
            lines.append(f"[sockets]\n{key} = {configured!r}\n")
        toml.write_text("".join(lines))
        # as `bxctl up` starts a role: $BOXMAKER_HOME is the home bxctl was given
        with mock.patch.dict(os.environ, {"BOXMAKER_HOME": str(home)}):
            setting = LOOPD_SETTING[key] if role == "loopd" else SETTING[key]
            served = getattr(ROLE_SETTINGS[role](toml), setting)
        assert Sockets(home).path(spec) == served


def test_every_socket_has_its_servers_key() -> None:
    for spec in proto.SOCKETS:
        role, key = SERVED_AT[spec.name]
        assert role == spec.server
        config = {"memoryd": proto.MemorydConfig, "brokerd": proto.BrokerdConfig}.get(
            role, proto.LoopdConfig
        )
        assert hasattr(config().sockets, key), spec.name


def test_a_missing_config_is_the_default_path(short_dir: Path) -> None:
    (short_dir / "config").mkdir()
    for spec in proto.SOCKETS:
        assert Sockets(short_dir).path(spec) == spec.default_path(short_dir)


def test_a_config_bxctl_cannot_read_gives_the_default_and_says_so(short_dir: Path) -> None:
    (short_dir / "config").mkdir()
    toml = short_dir / "config" / "loopd.toml"
    toml.write_text('[sockets]\nchta = "/tmp/chat.sock"\n')
    path = Sockets(short_dir).path(proto.OWNER_LOOP)
    assert path == proto.OWNER_LOOP.default_path(short_dir)
    with pytest.raises(CommandError) as refused:
        ask(path, proto.OWNER_LOOP, proto.ModelInfo(), proto.ModelInfoReply)
    assert str(refused.value).startswith(f"cannot reach loopd at {path}: ")
    assert str(refused.value).endswith(
        f" bxctl looked there because loopd's config cannot be read: config {toml}: "
        "Object contains unknown field `chta` - at `$.sockets`."
    )
