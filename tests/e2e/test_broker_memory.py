"""brokerd and memoryd as real processes: an owner-approved memory edit, end to end.

A `memory` call from "loopd" (this test) waits at brokerd for the owner; the owner
approves over brokerd's owner socket; memoryd applies the edit under the approval id;
the audit chain verifies. A denied edit changes nothing. One tampered audit line is
what `audit_verify` names.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from roles import RunningRole, start_role

import proto
from proto import (
    ApprovalDecide,
    ApprovalPending,
    Approvals,
    ApprovalsList,
    AuditVerified,
    AuditVerify,
    MemoryEdit,
    MemoryHistory,
    MemoryHistoryReply,
    MemoryWhy,
    MemoryWhyReply,
    Message,
    Ok,
    Surface,
    ToolCall,
    ToolRequest,
    ToolResponse,
)

CAP_S = 20
SESSION = "chat-e2ebrokermemory01"


@pytest.fixture
def home() -> Iterator[Path]:
    """A home with memoryd and brokerd running on it; both stopped cleanly afterwards."""
    base = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    home = base / "home"
    (base / "soul.md").write_text("An end-to-end soul.\n")
    (base / "memoryd.toml").write_text(f'[paths]\nhome = "{home}"\n')
    (base / "brokerd.toml").write_text(f'[paths]\nhome = "{home}"\n')
    started: list[RunningRole] = []
    try:
        for role in ("memoryd", "brokerd"):
            started.append(start_role(role, base / f"{role}.toml", log=base / f"{role}.log"))
        yield home
    finally:
        ended = [running.stop() for running in reversed(started)]
        shutil.rmtree(base, ignore_errors=True)
    for running, end in zip(reversed(started), ended, strict=True):
        assert end.returncode == 0, f"{running.role} exited {end.returncode}:\n{end.log}"


def memory_call(call: str, text: str) -> ToolRequest:
    arguments = json.dumps({"action": "add", "file": "memory", "text": text})
    return ToolRequest(session=SESSION, call=ToolCall(id=call, name="memory", arguments=arguments))


async def edit_decided_by_owner(
    home: Path, request: ToolRequest, *, approve: bool
) -> tuple[ApprovalPending, ToolResponse]:
    """Send an edit as loopd would; decide it as the owner once it is pending."""
    loop_socket = home / proto.LOOP_BROKER.relative_path
    admin_socket = home / proto.OWNER_BROKER.relative_path
    frames: list[Message] = []
    with trio.fail_after(CAP_S):
        async with proto.open_call(loop_socket, request) as conversation:
            notice = await conversation.receive()
            assert isinstance(notice, ApprovalPending)
            # The edit waits: listed for the owner, nothing applied yet.
            listed = await proto.call(admin_socket, ApprovalsList(), Approvals)
            assert listed.pending == [notice.approval]
            assert (home / "memory" / "memory.md").read_text() == ""
            decision = ApprovalDecide(id=notice.approval.id, approve=approve)
            assert await proto.call(admin_socket, decision, Ok) == Ok()
            frames = [frame async for frame in conversation]
    (reply,) = frames
    assert isinstance(reply, ToolResponse)
    return notice, reply


async def verify(home: Path) -> AuditVerified:
    with trio.fail_after(CAP_S):
        return await proto.call(
            home / proto.OWNER_BROKER.relative_path, AuditVerify(), AuditVerified
        )


async def test_an_approved_edit_is_applied_a_denied_one_is_not_and_the_audit_holds(
    home: Path,
) -> None:
    denied_notice, denied = await edit_decided_by_owner(
        home, memory_call("call-1", "Owner likes long answers."), approve=False
    )
    assert (denied.status, denied.content) == ("denied", "the owner denied this call")
    assert (home / "memory" / "memory.md").read_text() == ""
    assert not (home / "memory" / "edits").exists()

    notice, applied = await edit_decided_by_owner(
        home, memory_call("call-2", "Owner prefers answers in UTC."), approve=True
    )
    assert applied.status == "ok"
    assert applied.content == (
        "memory.md updated (29 of 2,200 characters); it takes effect in the next session."
    )
    assert (home / "memory" / "memory.md").read_text() == "Owner prefers answers in UTC."
    with trio.fail_after(CAP_S):
        history = await proto.call(
            home / proto.OWNER_MEMORY.relative_path, MemoryHistory(), MemoryHistoryReply
        )
    (listed,) = history.edits
    edit = listed.line
    assert isinstance(edit, proto.AppliedEdit)
    assert listed.id == proto.edit_id(edit)
    assert (edit.approval, edit.call, edit.session) == (notice.approval.id, "call-2", SESSION)

    assert await verify(home) == AuditVerified(records=3, ok=True)
    (audit_file,) = (home / "audit").glob("*.jsonl")
    records = [json.loads(line) for line in audit_file.read_text().splitlines()]
    assert [(r["call"], r["decision"], r["status"], r["approval"]) for r in records] == [
        ("call-1", "denied", "denied", denied_notice.approval.id),
        ("call-2", "approved", "started", notice.approval.id),
        ("call-2", "approved", "ok", notice.approval.id),
    ]
    assert {r["grant"] for r in records} == {"builtin-memory"}

    # One changed character in the first record breaks the chain there.
    lines = audit_file.read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"decision":"denied"', b'"decision":"approved"')
    audit_file.write_bytes(b"".join(lines))
    broken = await verify(home)
    assert (broken.ok, broken.records) == (False, 3)
    assert broken.broken_at is not None
    assert broken.broken_at.startswith(f"{audit_file.name} line 1:")


async def test_the_owners_own_edit_is_applied_journalled_and_audited_with_its_surface(
    home: Path,
) -> None:
    admin_socket = home / proto.OWNER_BROKER.relative_path
    arguments = json.dumps({"action": "add", "file": "user", "text": "The owner is Ana."})
    claimed = Surface(via="bxctl", uid=4242)  # brokerd reads the uid itself
    with trio.fail_after(CAP_S):
        reply = await proto.call(
            admin_socket, MemoryEdit(arguments=arguments, surface=claimed), ToolResponse
        )
        duplicate = await proto.call(
            admin_socket, MemoryEdit(arguments=arguments, surface=claimed), ToolResponse
        )
    assert (reply.status, reply.content) == (
        "ok",
        "user.md updated (17 of 1,375 characters); it takes effect in the next session.",
    )
    assert duplicate.status == "error"
    assert duplicate.content == (
        'user.md already has the entry "The owner is Ana."; nothing was changed.'
    )
    assert (home / "memory" / "user.md").read_text() == "The owner is Ana."
    here = Surface(via="bxctl", uid=os.geteuid())

    (edit,) = [
        proto.EDIT_JOURNAL.decode(line)
        for path in (home / "memory" / "edits").glob("*.jsonl")
        for line in path.read_bytes().splitlines()
    ]
    assert isinstance(edit, proto.AppliedEdit)
    assert (edit.decided, edit.session, edit.call) == (
        proto.OwnerEdit(surface=here),
        proto.OWNER_SESSION,
        reply.call_id,
    )
    assert reply.call_id.startswith("owner-")

    assert await verify(home) == AuditVerified(records=4, ok=True)
    (audit_file,) = (home / "audit").glob("*.jsonl")
    records = [json.loads(line) for line in audit_file.read_text().splitlines()]
    assert [(r["decision"], r["status"]) for r in records] == [
        ("owner", "started"),
        ("owner", "ok"),
        ("owner", "started"),
        ("owner", "error"),
    ]
    assert {json.dumps(r["surface"]) for r in records} == {
        json.dumps({"via": "bxctl", "uid": os.geteuid()})
    }
    assert records[1]["approval"] == edit.approval

    with trio.fail_after(CAP_S):
        why = await proto.call(
            home / proto.OWNER_MEMORY.relative_path, MemoryWhy(part="ana"), MemoryWhyReply
        )
    (entry,) = why.entries
    (story,) = entry.edits
    assert (story.id, story.decided) == (proto.edit_id(edit), proto.OwnerEdit(surface=here))


async def test_an_edit_over_its_files_limit_gets_the_specs_one_sentence_whoever_made_it(
    home: Path,
) -> None:
    # memoryd owns the limits: brokerd asks the owner and passes memoryd's sentence on,
    # for the model's call and the owner's own edit alike.
    _, model = await edit_decided_by_owner(home, memory_call("call-1", "x" * 2201), approve=True)
    assert (model.status, model.content) == (
        "error",
        "memory.md would be 2,201 of 2,200 characters; "
        "use consolidate to move entries to the archive.",
    )
    arguments = json.dumps({"action": "add", "file": "user", "text": "y" * 1376})
    with trio.fail_after(CAP_S):
        owner = await proto.call(
            home / proto.OWNER_BROKER.relative_path,
            MemoryEdit(arguments=arguments, surface=Surface(via="bxctl")),
            ToolResponse,
        )
    assert (owner.status, owner.content) == (
        "error",
        "user.md would be 1,376 of 1,375 characters; "
        "use consolidate to move entries to the archive.",
    )
    assert (home / "memory" / "memory.md").read_text() == ""
    assert (home / "memory" / "user.md").read_text() == ""
    assert await verify(home) == AuditVerified(records=4, ok=True)
