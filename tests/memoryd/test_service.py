"""memoryd in-process: its handlers over memory streams, its sockets over real Unix sockets."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from typing import Any

import inmemory
import pytest
import trio
from approved import signed

import proto
from memoryd import Memoryd, Settings, _index, _service, _store
from memoryd._files import ensure_private_dir
from proto import (
    BROKER_MEMORY,
    LOOP_MEMORY,
    OWNER_MEMORY,
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
    """memoryd with its index running and no sockets: its handlers are called in memory."""
    memoryd = Memoryd(settings)
    memoryd.memory.ensure(settings.soul_starter)
    ensure_private_dir(settings.index_dir)
    nursery.start_soon(memoryd.index.run, trio.Event())
    return memoryd


@pytest.fixture
async def served(nursery: trio.Nursery, settings: Settings) -> Memoryd:
    """memoryd started as `serve` starts it: its three sockets bound under the home."""
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
    )


async def test_block_edit_block(role: Memoryd) -> None:
    loop, broker, admin = role.handle_loop, role.handle_broker, role.handle_admin
    with trio.fail_after(CAP_S):
        before = await inmemory.call(LOOP_MEMORY, loop, MemoryBlock(), MemoryBlockReply)
        reply = await inmemory.call(
            BROKER_MEMORY,
            broker,
            signed(memory_call("UTC, always."), proto.read_key(role.settings.approval_key)),
            ToolResponse,
        )
        after = await inmemory.call(LOOP_MEMORY, loop, MemoryBlock(), MemoryBlockReply)
        history = await inmemory.call(OWNER_MEMORY, admin, MemoryHistory(), MemoryHistoryReply)
    assert "# memory.md (0 of 2,200 characters)\n(empty)" in before.text
    assert reply.status == "ok"
    assert "# memory.md (12 of 2,200 characters)\nUTC, always." in after.text
    assert [e.line.after for e in history.edits] == [["UTC, always."]]
    assert [e.id for e in history.edits] == [proto.edit_id(e.line) for e in history.edits]


async def test_refused_block_names_the_runbook(role: Memoryd) -> None:
    role.memory.path("memory.md").write_text("x" * 2201)
    with trio.fail_after(CAP_S), pytest.raises(proto.RemoteError) as refused:
        await inmemory.call(LOOP_MEMORY, role.handle_loop, MemoryBlock(), MemoryBlockReply)
    assert refused.value.error.code == "memory-unavailable"
    assert refused.value.error.runbook == "memory-unavailable"
    assert "memory.md is 2,201 of 2,200 characters" in refused.value.error.message


async def test_session_updated_for_a_session_without_logs_is_ok(role: Memoryd) -> None:
    updated = SessionUpdated(session=SESSION)
    with trio.fail_after(CAP_S):
        assert await inmemory.call(LOOP_MEMORY, role.handle_loop, updated, Ok) == Ok()


@pytest.mark.parametrize(
    "session", ["../../etc", "chat-abc/../../x", "chat-abcdefgh\n", "CHAT-ABCDEFGH", ""]
)
async def test_session_ids_with_path_tricks_are_refused(role: Memoryd, session: str) -> None:
    body = json.dumps({"kind": "session_updated", "session": session}).encode()
    with trio.fail_after(CAP_S):
        (reply,) = await inmemory.answer(
            LOOP_MEMORY, role.handle_loop, len(body).to_bytes(4, "big") + body
        )
    assert isinstance(reply, Error)
    assert reply.code == "bad-frame"
    assert "$.session" in reply.message


async def test_other_tools_are_refused(role: Memoryd) -> None:
    req = signed(
        ToolRequest(session=SESSION, call=ToolCall(id="c2", name="read_file", arguments="{}"))
    )
    with trio.fail_after(CAP_S):
        reply = await inmemory.call(BROKER_MEMORY, role.handle_broker, req, ToolResponse)
    assert reply.status == "error"
    assert "'read_file'" in reply.content


# -- over real Unix sockets: which path serves which kinds, and a bad peer survived --------


async def test_each_socket_accepts_only_its_kinds(served: Memoryd, settings: Settings) -> None:
    with trio.fail_after(CAP_S):
        for path, request in (
            (settings.loop_socket, memory_call("x")),
            (settings.broker_socket, MemoryBlock()),
            (settings.admin_socket, SessionUpdated(session=SESSION)),
            (settings.admin_socket, memory_call("x")),
        ):
            with pytest.raises(proto.RemoteError) as wrong:
                await proto.call(path, request, Ok)
            assert wrong.value.code == "wrong-socket"
    assert served.memory.path("memory.md").read_text() == ""


async def test_the_owner_reads_the_block_loopd_gets_on_the_owners_own_socket(
    served: Memoryd, settings: Settings
) -> None:
    # The owner may not enter loopd's socket folder (the systemd install's groups), so
    # `bxctl memory show` asks the owner socket: the same block, byte for byte.
    served.memory.path("user.md").write_text("Ana")
    with trio.fail_after(CAP_S):
        owners = await proto.call(settings.admin_socket, MemoryBlock(), MemoryBlockReply)
        loopds = await proto.call(settings.loop_socket, MemoryBlock(), MemoryBlockReply)
    assert owners == loopds
    assert "# user.md (3 of 1,375 characters)\nAna" in owners.text


async def test_oversized_frame_is_refused_and_memoryd_keeps_serving(
    served: Memoryd, settings: Settings
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
    assert served.memory.path("memory.md").read_text() == ""


async def test_an_applied_edit_is_answered_as_applied_when_archive_md_cannot_be_read(
    role: Memoryd, caplog: pytest.LogCaptureFixture
) -> None:
    archive = role.memory.path("archive.md")
    key = proto.read_key(role.settings.approval_key)
    with trio.fail_after(CAP_S):
        await role.index.caught_up.wait()
        archive.unlink()
        archive.mkdir()  # an owner's mistake: indexing the archive after the edit fails
        reply = await inmemory.call(
            BROKER_MEMORY, role.handle_broker, signed(memory_call("kept"), key), ToolResponse
        )
    assert (reply.status, reply.content) == (
        "ok",
        "memory.md updated (4 of 2,200 characters); it takes effect in the next session.",
    )
    assert role.memory.path("memory.md").read_text() == "kept"
    assert "archive.md changed but could not be indexed" in caplog.text


async def test_ready_says_the_index_is_caught_up(nursery: trio.Nursery, settings: Settings) -> None:
    memoryd = Memoryd(settings)
    memoryd.memory.ensure(settings.soul_starter)
    with trio.fail_after(CAP_S):
        status = await memoryd.start(nursery, trio.Event())
    assert status.endswith("; the recall index is caught up")
    assert proto.STILL_READING not in status


async def test_ready_says_what_is_still_read_and_about_how_long(
    nursery: trio.Nursery, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first build longer than memoryd waits: `bxctl up` shows what is still read."""
    settings.sessions_dir.mkdir(mode=0o700, parents=True)
    for n in range(3):
        proto.append_to_catalog(
            settings.sessions_dir, proto.CatalogEntry(session=f"chat-{n:016d}", created="t")
        )
    release = threading.Event()
    real_build = _store.build

    def slow_build(*args: Any) -> Any:
        release.wait(CAP_S)  # a home of years being read
        return real_build(*args)

    monkeypatch.setattr(_index, "build", slow_build)
    monkeypatch.setattr(_service, "READY_WAIT_S", 0.1)
    memoryd = Memoryd(settings)
    memoryd.memory.ensure(settings.soul_starter)
    try:
        with trio.fail_after(CAP_S):
            status = await memoryd.start(nursery, trio.Event())
    finally:
        release.set()
    _, marker, still = status.partition(proto.STILL_READING)
    assert marker
    assert still.startswith("the recall index is being built from 3 sessions (about 1 s)")
