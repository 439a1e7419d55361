"""Hole 5 of issue 12: memoryd writes memory only with brokerd's proof of the owner's yes.

A process of the owner's user can reach memoryd's broker socket. It cannot make memoryd
write memory: a call needs an approval id and a token that is the HMAC of that approval,
the session, the call and its exact arguments under the approval key. Missing, forged,
mismatched and replayed tokens are refused, nothing changes, and memoryd logs it; a
replay is refused after a restart too (the edit journal names every approval used).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from approved import signed
from roles import start_role

import proto
from memoryd import Memoryd, Settings
from memoryd._config import resolve

CAP_S = 20
SESSION = "chat-tokenstest00001"
ADD = {"action": "add", "file": "memory", "text": "Owner: Ada."}


def call(arguments: dict[str, Any], *, call: str = "c1") -> proto.ToolRequest:
    return proto.ToolRequest(
        session=SESSION,
        call=proto.ToolCall(id=call, name="memory", arguments=json.dumps(arguments)),
    )


def with_authority(request: proto.ToolRequest, **changes: Any) -> proto.ToolRequest:
    """`request` with its authority changed (its token kept)."""
    assert request.authority is not None
    return msgspec.structs.replace(
        request, authority=msgspec.structs.replace(request.authority, **changes)
    )


@pytest.fixture
def settings(short_dir: Path) -> Settings:
    (short_dir / "soul.md").write_text("soul")
    home = short_dir / "home"
    return resolve(
        proto.MemorydConfig(paths=proto.PathsSection(home=str(home))), config_dir=short_dir
    )


def fresh(settings: Settings) -> Memoryd:
    role = Memoryd(settings)
    role.memory.ensure(settings.soul_starter)
    return role


def key(settings: Settings) -> bytes:
    return proto.read_key(settings.approval_key)


def forged_variants(settings: Settings) -> list[tuple[str, proto.ToolRequest]]:
    genuine = signed(call(ADD), key(settings))
    other_key = signed(call(ADD), bytes(32))
    return [
        ("no authority", call(ADD)),
        ("made-up token", with_authority(genuine, token="0" * 64)),
        ("token under another key", other_key),
        (
            "token of other arguments",
            msgspec.structs.replace(
                genuine,
                call=proto.ToolCall(
                    id="c1",
                    name="memory",
                    arguments=json.dumps({**ADD, "text": "Owner: Eve."}),
                ),
            ),
        ),
        (
            "token of another call id",
            msgspec.structs.replace(
                genuine,
                call=proto.ToolCall(id="c2", name="memory", arguments=genuine.call.arguments),
            ),
        ),
        (
            "token of another session",
            msgspec.structs.replace(genuine, session="chat-someoneelse01"),
        ),
        ("token of another approval", with_authority(genuine, approval="ap-zzz999")),
        ("no token", with_authority(genuine, token="")),
    ]


async def test_forged_and_mismatched_tokens_are_refused_and_logged(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    role = fresh(settings)
    variants = forged_variants(settings)
    refused = 0
    for what, request in variants:
        with trio.fail_after(CAP_S):
            reply = await role.handle_broker(request, None)  # type: ignore[arg-type]
        assert isinstance(reply, proto.ToolResponse), what
        assert reply.status == "error", what
        assert reply.content.endswith("nothing was changed"), what
        refused += 1
    assert refused == len(variants) == 8
    assert role.memory.path("memory.md").read_text() == ""
    assert not role.memory.edits.exists()
    assert caplog.text.count("refused memory call") == len(variants) - 1  # all but no authority


async def test_a_genuine_token_applies_once_and_its_replay_is_refused(settings: Settings) -> None:
    role = fresh(settings)
    genuine = signed(call(ADD), key(settings))
    with trio.fail_after(CAP_S):
        first = await role.handle_broker(genuine, None)  # type: ignore[arg-type]
        replay = await role.handle_broker(genuine, None)  # type: ignore[arg-type]
    assert isinstance(first, proto.ToolResponse)
    assert first.status == "ok"
    assert isinstance(replay, proto.ToolResponse)
    assert replay.status == "error"
    assert "was used before" in replay.content
    # After a restart the journal still knows the approval: replayed again, refused again.
    again = fresh(settings)
    with trio.fail_after(CAP_S):
        later = await again.handle_broker(genuine, None)  # type: ignore[arg-type]
    assert isinstance(later, proto.ToolResponse)
    assert later.status == "error"
    assert "was used before" in later.content
    assert role.memory.path("memory.md").read_text() == "Owner: Ada."


async def test_a_forged_call_over_the_real_socket_changes_nothing(short_dir: Path) -> None:
    home = short_dir / "home"
    (short_dir / "soul.md").write_text("soul")
    config = short_dir / "memoryd.toml"
    config.write_text(f'[paths]\nhome = "{home}"\n[memory]\nsoul_starter = "soul.md"\n')
    role = start_role("memoryd", config, log=short_dir / "memoryd.log")
    try:
        socket = home / proto.BROKER_MEMORY.relative_path
        forged = with_authority(signed(call(ADD), approval="ap-forged"), token="f" * 64)
        with trio.fail_after(CAP_S):
            reply = await proto.call(socket, forged, proto.ToolResponse)
        assert reply.status == "error"
        assert (home / "memory" / "memory.md").read_text() == ""
    finally:
        ended = role.stop()
    assert "approval 'ap-forged' has a token that is not brokerd's" in ended.log
