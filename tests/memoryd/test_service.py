"""memoryd's sockets, in-process over real Unix sockets: the kinds each one answers."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path

import pytest
import trio

import proto
from memoryd import Memoryd, Settings
from proto import (
    Error,
    MemoryBlock,
    MemoryBlockReply,
    MemoryHistory,
    MemoryHistoryReply,
    Ok,
    SessionUpdated,
    ToolCall,
    ToolRequest,
    ToolResponse,
)

CAP_S = 10
SESSION = "chat-abcdefghijklmnop"


@pytest.fixture
async def role(nursery: trio.Nursery, settings: Settings) -> Memoryd:
    memoryd = Memoryd(settings)
    memoryd.memory.ensure(settings.soul_starter)
    shutdown = trio.Event()
    with trio.fail_after(CAP_S):
        await memoryd.start(nursery, shutdown)
    return memoryd


def memory_call(text: str, call: str = "c1") -> ToolRequest:
    args = {"action": "add", "file": "memory", "text": text}
    return ToolRequest(
        session=SESSION,
        call=ToolCall(id=call, name="memory", arguments=json.dumps(args)),
        approval="ap-1",
    )


async def test_block_edit_block(role: Memoryd, settings: Settings) -> None:
    with trio.fail_after(CAP_S):
        before = await proto.call(settings.loop_socket, MemoryBlock(), MemoryBlockReply)
        reply = await proto.call(settings.broker_socket, memory_call("UTC, always."), ToolResponse)
        after = await proto.call(settings.loop_socket, MemoryBlock(), MemoryBlockReply)
        history = await proto.call(settings.admin_socket, MemoryHistory(), MemoryHistoryReply)
    assert "# memory.md (0 of 2,200 characters)\n(empty)" in before.text
    assert reply.status == "ok"
    assert "# memory.md (12 of 2,200 characters)\nUTC, always." in after.text
    assert [e.after for e in history.edits] == [["UTC, always."]]


async def test_refused_block_names_the_runbook(role: Memoryd, settings: Settings) -> None:
    role.memory.path("memory.md").write_text("x" * 2201)
    with trio.fail_after(CAP_S), pytest.raises(proto.RemoteError) as refused:
        await proto.call(settings.loop_socket, MemoryBlock(), MemoryBlockReply)
    assert refused.value.error.code == "memory-unavailable"
    assert refused.value.error.runbook == "memory-unavailable"
    assert "memory.md is 2,201 of 2,200 characters" in refused.value.error.message


async def test_session_updated_for_a_session_without_logs_is_ok(
    role: Memoryd, settings: Settings
) -> None:
    with trio.fail_after(CAP_S):
        assert await proto.call(settings.loop_socket, SessionUpdated(session=SESSION), Ok) == Ok()


def _raw(path: Path, body: bytes) -> proto.Message:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(os.fspath(path))
        sock.sendall(len(body).to_bytes(4, "big") + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return proto.decode_body(data[4:])


@pytest.mark.parametrize(
    "session", ["../../etc", "chat-abc/../../x", "chat-abcdefgh\n", "CHAT-ABCDEFGH", ""]
)
async def test_session_ids_with_path_tricks_are_refused(
    role: Memoryd, settings: Settings, session: str
) -> None:
    body = json.dumps({"kind": "session_updated", "session": session}).encode()
    with trio.fail_after(CAP_S):
        reply = await trio.to_thread.run_sync(_raw, settings.loop_socket, body)
    assert isinstance(reply, Error)
    assert reply.code == "bad-frame"
    assert "$.session" in reply.message


async def test_each_socket_accepts_only_its_kinds(role: Memoryd, settings: Settings) -> None:
    with trio.fail_after(CAP_S):
        for path, request in (
            (settings.loop_socket, memory_call("x")),
            (settings.broker_socket, MemoryBlock()),
            (settings.admin_socket, MemoryBlock()),
            (settings.admin_socket, memory_call("x")),
        ):
            with pytest.raises(proto.RemoteError) as wrong:
                await proto.call(path, request, Ok)
            assert wrong.value.code == "wrong-socket"
    assert role.memory.path("memory.md").read_text() == ""


async def test_other_tools_are_refused(role: Memoryd, settings: Settings) -> None:
    req = ToolRequest(
        session=SESSION, call=ToolCall(id="c2", name="read_file", arguments="{}"), approval="a"
    )
    with trio.fail_after(CAP_S):
        reply = await proto.call(settings.broker_socket, req, ToolResponse)
    assert reply.status == "error"
    assert "'read_file'" in reply.content


async def test_oversized_frame_is_refused_and_memoryd_keeps_serving(
    role: Memoryd, settings: Settings
) -> None:
    big = memory_call("x" * (proto.MAX_FRAME + 10))
    body = proto.encode_frame(big, max_frame_bytes=4 * proto.MAX_FRAME)

    def send() -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(os.fspath(settings.broker_socket))
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(body)
            return sock.recv(65536)

    with trio.fail_after(CAP_S):
        raw = await trio.to_thread.run_sync(send)
        block = await proto.call(settings.loop_socket, MemoryBlock(), MemoryBlockReply)
    reply = proto.decode_body(raw[4:])
    assert isinstance(reply, Error)
    assert reply.code == "frame-too-large"
    assert block.text.startswith("# soul.md")
    assert role.memory.path("memory.md").read_text() == ""
