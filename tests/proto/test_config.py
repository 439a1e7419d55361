"""Where a configured socket path points (`proto.socket_path`): the roles and bxctl agree."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import proto

HOME = Path("/srv/boxmaker")

parts = st.lists(
    st.text(st.characters(codec="utf-8", exclude_characters="/\0~"), min_size=1, max_size=8).filter(
        lambda p: p not in (".", "..")
    ),
    min_size=1,
    max_size=4,
)


@given(parts, st.sampled_from(proto.SOCKETS))
def test_a_relative_socket_path_is_under_the_home_not_the_working_directory(
    names: list[str], spec: proto.Socket[proto.Message]
) -> None:
    configured = "/".join(names)
    assert proto.socket_path(configured, spec, HOME) == HOME.joinpath(*names)


@given(parts, st.sampled_from(proto.SOCKETS))
def test_an_absolute_socket_path_is_kept(
    names: list[str], spec: proto.Socket[proto.Message]
) -> None:
    configured = "/" + "/".join(names)
    assert proto.socket_path(configured, spec, HOME) == Path(configured)


@given(st.sampled_from(proto.SOCKETS), st.sampled_from([None, ""]))
def test_no_socket_path_is_the_default_under_the_home(
    spec: proto.Socket[proto.Message], configured: str | None
) -> None:
    assert proto.socket_path(configured, spec, HOME) == spec.default_path(HOME)


def test_a_socket_path_under_the_owners_home_directory_is_expanded() -> None:
    assert proto.socket_path("~/bx/chat.sock", proto.OWNER_LOOP, HOME) == (
        Path.home() / "bx" / "chat.sock"
    )
