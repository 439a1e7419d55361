"""brokerd signs each approved call it forwards to memoryd for exactly that call.

memoryd refuses forged, replayed and mismatched tokens (its own tests); here, brokerd's
side: the token that reaches memoryd's broker socket is `proto.approval_token` under the
home's approval key for the approval, session, call, tool and canonical arguments that
were forwarded, and any other of those gives another token. A fake memoryd on the real
socket records what it is sent; brokerd is prepared as `serve` prepares it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import inmemory
import msgspec
import pytest
import trio
from brokerd_harness import SESSION, request

import proto
from brokerd import Brokerd, Settings
from brokerd._config import resolve
from proto import (
    ApprovalDecide,
    ApprovalPending,
    BrokerdConfig,
    Message,
    Ok,
    PathsSection,
    ToolRequest,
    ToolResponse,
)

CAP_S = 10
EDIT = {"action": "add", "file": "memory", "text": "Owner prefers answers in UTC."}
CANONICAL = json.dumps(EDIT, separators=(",", ":"))
FORGED = proto.Authority(
    approval="ap-forged",
    token="forged-by-loopd",
    decided=proto.OwnerEdit(surface=proto.Surface(via="bxctl", uid=0)),
)
"""What a loopd might claim: brokerd forwards its own authority, never a request's."""


@pytest.fixture
def settings(short_dir: Path) -> Settings:
    home = short_dir / "home"
    return resolve(BrokerdConfig(paths=PathsSection(home=str(home))), config_dir=short_dir)


@pytest.fixture
async def memoryd(nursery: trio.Nursery, settings: Settings) -> list[ToolRequest]:
    """A memoryd on brokerd's memory socket that applies nothing and notes every request."""
    seen: list[ToolRequest] = []

    async def handle(req: Message, conn: proto.Connection) -> Message:
        assert isinstance(req, ToolRequest)
        seen.append(req)
        return ToolResponse(call_id=req.call.id, status="ok", content="noted")

    path = settings.memory_socket
    path.parent.mkdir(parents=True, mode=0o700)
    await nursery.start(
        lambda task_status: proto.serve_unix(
            proto.BROKER_MEMORY, path, handle, shutdown=trio.Event(), task_status=task_status
        )
    )
    return seen


async def approved(role: Brokerd, req: ToolRequest) -> tuple[str, ToolResponse]:
    """Send `req` as loopd; approve it as the owner; the approval id and the reply."""
    with trio.fail_after(CAP_S):
        async with inmemory.open_exchange(proto.LOOP_BROKER, role.handle_loop, req) as call:
            notice = await call.receive()
            assert isinstance(notice, ApprovalPending)
            decide = ApprovalDecide(id=notice.approval.id, approve=True)
            await inmemory.call(proto.OWNER_BROKER, role.handle_owner, decide, Ok)
            (reply,) = [frame async for frame in call]
    assert isinstance(reply, ToolResponse)
    return notice.approval.id, reply


def prepared(settings: Settings) -> Brokerd:
    role = Brokerd(settings)  # the configured runtime: memory calls go to the socket
    role.prepare()
    return role


async def test_the_token_is_for_exactly_the_forwarded_call(
    settings: Settings, memoryd: list[ToolRequest]
) -> None:
    role = prepared(settings)
    key_file = settings.approval_key
    assert key_file == settings.home / "keys" / "approval.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = proto.read_key(key_file)

    sent = msgspec.structs.replace(request("memory", EDIT, call="call-7"), authority=FORGED)
    approval, reply = await approved(role, sent)
    assert (reply.status, reply.content) == ("ok", "noted")
    (forwarded,) = memoryd
    assert forwarded.authority is not None
    assert (forwarded.authority.approval, forwarded.session, forwarded.call.id) == (
        approval,
        SESSION,
        "call-7",
    )
    here = proto.Surface(via="bxctl", uid=os.geteuid())
    assert forwarded.authority.decided == proto.OwnerApproved(surface=here)
    assert (forwarded.call.name, forwarded.call.arguments) == ("memory", CANONICAL)
    exact = {
        "approval": approval,
        "session": SESSION,
        "call": "call-7",
        "tool": "memory",
        "arguments": CANONICAL,
    }
    token = forwarded.authority.token
    assert token == proto.approval_token(key, **exact)
    others = {
        "arguments": CANONICAL.replace("UTC", "CET"),
        "call": "call-8",
        "session": "chat-anothersession01",
        "approval": "ap-zzzzzz",
        "tool": "recall",
    }
    for field, value in others.items():
        assert proto.approval_token(key, **{**exact, field: value}) != token, field
    assert proto.approval_token(b"\x00" * proto.KEY_BYTES, **exact) != token


async def test_each_approval_gets_its_own_token(
    settings: Settings, memoryd: list[ToolRequest]
) -> None:
    """The same edit approved twice: two approvals, two tokens, so neither replays."""
    role = prepared(settings)
    first, _ = await approved(role, request("memory", EDIT, call="call-1"))
    second, _ = await approved(role, request("memory", EDIT, call="call-1"))
    assert first != second
    assert memoryd[0].authority is not None
    assert memoryd[1].authority is not None
    assert memoryd[0].authority.token != memoryd[1].authority.token


async def test_an_unapproved_call_carries_no_token(
    settings: Settings, memoryd: list[ToolRequest]
) -> None:
    role = prepared(settings)
    sent = msgspec.structs.replace(request("recall", {"query": "UTC"}), authority=FORGED)
    with trio.fail_after(CAP_S):
        frames = await inmemory.answer(proto.LOOP_BROKER, role.handle_loop, sent)
    assert isinstance(frames[-1], ToolResponse)
    (forwarded,) = memoryd
    assert forwarded.authority is None


async def test_an_existing_key_is_used_not_replaced(
    settings: Settings, memoryd: list[ToolRequest]
) -> None:
    key = proto.ensure_key(settings.approval_key)  # as bxctl init or memoryd made it
    before = settings.approval_key.read_bytes()
    role = prepared(settings)
    assert settings.approval_key.read_bytes() == before
    approval, _ = await approved(role, request("memory", EDIT, call="call-1"))
    assert memoryd[0].authority is not None
    assert memoryd[0].authority.token == proto.approval_token(
        key, approval=approval, session=SESSION, call="call-1", tool="memory", arguments=CANONICAL
    )


def test_a_key_other_users_can_read_stops_the_start(settings: Settings) -> None:
    proto.ensure_key(settings.approval_key)
    settings.approval_key.chmod(0o644)
    with pytest.raises(proto.StartFailed, match="readable by other users"):
        prepared(settings)
