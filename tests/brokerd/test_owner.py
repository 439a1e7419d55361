"""brokerd and the owner's levers (issue 21): the owner's own memory edit, who decided and
where, edit before approve, approval_revise. A fake memoryd runtime records what brokerd
forwards; the audit log is read back as written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

import inmemory
import pytest
import trio

import proto
from brokerd import Brokerd, Settings
from brokerd._runtimes import Approved, CompositeRuntime, OwnEdit, RunOutput, RunRequest
from proto import (
    ApprovalDecide,
    ApprovalPending,
    ApprovalRevise,
    ApprovalRevised,
    Approvals,
    ApprovalsList,
    AuditVerified,
    AuditVerify,
    Label,
    MemoryEdit,
    Message,
    Ok,
    Surface,
    ToolCall,
    ToolRequest,
    ToolResponse,
)

CAP_S = 10
SESSION = "chat-abcdefghijklmnop"
UNTRUSTED = Label(untrusted=True)
UID = os.geteuid()
APPLIED = "memory.md updated (9 of 2,200 characters); it takes effect in the next session."
M = TypeVar("M", bound=Message)


def canonical(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


ADD = {"action": "add", "file": "memory", "text": "likes tea"}


class FakeMemoryd:
    """memoryd as brokerd's runtime: records every call and answers `output`."""

    def __init__(self) -> None:
        self.calls: list[RunRequest] = []
        self.output = RunOutput("ok", APPLIED)

    async def check(self, request: RunRequest, grant: Any) -> RunOutput | None:
        return None

    async def run(self, request: RunRequest, grant: Any) -> RunOutput:
        self.calls.append(request)
        return self.output


class Frames(list[Message]):
    """The frames loopd got for one call; `done` once the reply is in."""

    def __init__(self) -> None:
        super().__init__()
        self.done = trio.Event()


class Owner:
    """A brokerd with a fake memoryd, and the owner's and loopd's conversations with it."""

    def __init__(self, settings: Settings) -> None:
        (settings.home / "grants").mkdir(parents=True, exist_ok=True)
        self.memoryd = FakeMemoryd()
        self.role = Brokerd(settings, CompositeRuntime(self.memoryd, self.memoryd))
        self.role.prepare()
        self.home = settings.home

    async def owner(self, req: Message, expect: type[M]) -> M:
        with trio.fail_after(CAP_S):
            return await inmemory.call(proto.OWNER_BROKER, self.role.handle_owner, req, expect)

    async def raw(
        self, spec: proto.Socket[Any], kind: str, fields: dict[str, Any]
    ) -> list[Message]:
        """The frames answering a frame of `kind` with `fields`, sent as JSON as it is."""
        body = json.dumps({"kind": kind, **fields}).encode()
        frame = len(body).to_bytes(proto.HEADER_BYTES, "big") + body
        handler = self.role.handle_owner if spec is proto.OWNER_BROKER else self.role.handle_loop
        with trio.fail_after(CAP_S):
            return await inmemory.answer(spec, handler, frame)

    async def edit(self, args: Any, **fields: Any) -> ToolResponse:
        raw = args if isinstance(args, str) else json.dumps(args)
        fields.setdefault("surface", Surface(via="bxctl"))
        return await self.owner(MemoryEdit(arguments=raw, **fields), ToolResponse)

    async def ask(self, nursery: trio.Nursery, args: Any) -> tuple[str, Frames]:
        """A model's memory call from loopd, held for the owner: its approval id and frames."""
        req = ToolRequest(
            session=SESSION,
            call=ToolCall(id="c1", name="memory", arguments=json.dumps(args)),
            taint=UNTRUSTED,
        )
        frames = Frames()
        announced = trio.Event()

        async def loopd() -> None:
            with trio.fail_after(CAP_S):
                async with inmemory.open_exchange(
                    proto.LOOP_BROKER, self.role.handle_loop, req
                ) as conversation:
                    async for frame in conversation:
                        frames.append(frame)
                        announced.set()
            frames.done.set()

        nursery.start_soon(loopd)
        with trio.fail_after(CAP_S):
            await announced.wait()
        first = frames[0]
        assert isinstance(first, ApprovalPending)
        return first.approval.id, frames

    async def reply(self, frames: Frames) -> ToolResponse:
        with trio.fail_after(CAP_S):
            await frames.done.wait()
        assert len(frames) == 2, frames
        assert isinstance(frames[1], ToolResponse)
        return frames[1]

    async def pending(self) -> list[str]:
        return [a.id for a in (await self.owner(ApprovalsList(), Approvals)).pending]

    def audit(self) -> list[dict[str, Any]]:
        return [
            json.loads(line)
            for path in sorted((self.home / "audit").glob("*.jsonl"))
            for line in path.read_text().splitlines()
        ]


@pytest.fixture
def broker(settings: Settings) -> Owner:
    return Owner(settings)


async def test_the_owners_edit_is_decided_owner_and_audited_with_the_peers_uid(
    broker: Owner,
) -> None:
    reply = await broker.edit(ADD, surface=Surface(via="bxctl", uid=4242))
    assert (reply.status, reply.content) == ("ok", APPLIED)
    assert reply.call_id.startswith("owner-")
    (call,) = broker.memoryd.calls
    assert (call.session, call.call_id, call.tool) == (proto.OWNER_SESSION, reply.call_id, "memory")
    assert call.arguments.canonical == canonical(ADD)
    here = Surface(via="bxctl", uid=UID)  # brokerd's reading of the peer, not 4242
    assert isinstance(call.by, OwnEdit)
    approval = call.by.approval
    assert call.by == OwnEdit(approval=approval, surface=here)
    assert call.by.decided == proto.OwnerEdit(surface=here)
    assert approval.startswith("ap-")
    started, outcome = broker.audit()
    for record in (started, outcome):
        assert (record["decision"], record["session"], record["call"]) == (
            "owner",
            proto.OWNER_SESSION,
            reply.call_id,
        )
        assert record["surface"] == {"via": "bxctl", "uid": UID}
        assert record["approval"] == approval
        assert record["grant"] == "builtin-memory"
        assert "proposed" not in record
    assert (started["status"], outcome["status"]) == ("started", "ok")
    verified = await broker.owner(AuditVerify(), AuditVerified)
    assert (verified.ok, verified.records) == (True, 2)


async def test_the_owners_edit_keeps_its_session_and_what_it_undoes(broker: Owner) -> None:
    await broker.edit(ADD, session=SESSION, undoes="ed-abc234")
    (call,) = broker.memoryd.calls
    assert call.session == SESSION
    assert isinstance(call.by, OwnEdit)
    assert call.by.undoes == "ed-abc234"


async def test_a_mattermost_surface_keeps_its_user_and_post_but_not_a_uid(broker: Owner) -> None:
    said = Surface(via="mattermost", uid=0, user="owner", post="p" * 26)
    await broker.edit(ADD, surface=said)
    (_, outcome) = broker.audit()
    assert outcome["surface"] == {
        "via": "mattermost",
        "uid": UID,
        "user": "owner",
        "post": "p" * 26,
    }
    with pytest.raises(proto.RemoteError) as bad:
        await broker.edit(ADD, surface=Surface(via="mattermost", user="u" * 201))
    assert bad.value.code == "bad-surface"


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (
            {"action": "rename", "file": "memory"},
            "memory arguments: invalid enum value 'rename' - at `$.action`",
        ),
        ("{not json", "memory arguments are not JSON"),
    ],
)
async def test_a_refused_owners_edit_is_a_tool_response_and_audited(
    broker: Owner, args: Any, sentence: str
) -> None:
    reply = await broker.edit(args)
    assert reply.status == "error"
    assert reply.content.startswith(sentence)
    assert broker.memoryd.calls == []
    (record,) = broker.audit()
    assert (record["decision"], record["status"]) == ("refused", "error")
    assert record["surface"] == {"via": "bxctl", "uid": UID}


async def test_an_undo_of_something_not_an_edit_id_is_refused(broker: Owner) -> None:
    reply = await broker.edit(ADD, undoes="../../etc")
    assert (reply.status, reply.content) == (
        "error",
        "'../../etc' is not an edit id (ed- and six characters)",
    )
    assert broker.memoryd.calls == []


async def test_memoryds_sentences_reach_the_owner_as_they_are(broker: Owner) -> None:
    limit = (
        "memory.md would be 2,350 of 2,200 characters; use consolidate to move entries to the "
        "archive."
    )
    broker.memoryd.output = RunOutput("error", limit)
    reply = await broker.edit(ADD)
    assert (reply.status, reply.content) == ("error", limit)
    assert broker.audit()[-1]["status"] == "error"


async def test_an_approval_records_where_and_by_whom_whatever_the_client_claims(
    nursery: trio.Nursery, broker: Owner
) -> None:
    approval, frames = await broker.ask(nursery, ADD)
    claimed = Surface(via="bxctl", uid=4242)
    await broker.owner(ApprovalDecide(id=approval, approve=True, surface=claimed), Ok)
    reply = await broker.reply(frames)
    assert (reply.status, reply.content) == ("ok", APPLIED)
    (call,) = broker.memoryd.calls
    here = Surface(via="bxctl", uid=UID)
    assert call.by == Approved(approval=approval, surface=here)
    assert call.by.decided == proto.OwnerApproved(surface=here)
    assert call.taint == UNTRUSTED  # the session's taint goes to the journal
    started, outcome = broker.audit()
    assert started["surface"] == outcome["surface"] == {"via": "bxctl", "uid": UID}
    assert outcome["decision"] == "approved"


async def test_a_denial_from_mattermost_records_the_post(
    nursery: trio.Nursery, broker: Owner
) -> None:
    approval, frames = await broker.ask(nursery, ADD)
    said = Surface(via="mattermost", user="owner", post="abc")
    await broker.owner(ApprovalDecide(id=approval, approve=False, surface=said), Ok)
    assert (await broker.reply(frames)).status == "denied"
    (record,) = broker.audit()
    assert record["decision"] == "denied"
    assert record["surface"] == {"via": "mattermost", "uid": UID, "user": "owner", "post": "abc"}


async def test_the_owners_version_runs_and_the_audit_keeps_both(
    nursery: trio.Nursery, broker: Owner
) -> None:
    approval, frames = await broker.ask(nursery, ADD)
    mine = {"action": "add", "file": "memory", "text": "likes green tea"}
    await broker.owner(ApprovalDecide(id=approval, approve=True, arguments=json.dumps(mine)), Ok)
    reply = await broker.reply(frames)
    assert reply.content == (
        f"the owner approved this call with changes; what ran: {canonical(mine)}\n{APPLIED}"
    )
    (call,) = broker.memoryd.calls
    assert call.arguments.canonical == canonical(mine)
    here = Surface(via="bxctl", uid=UID)
    assert call.by == Approved(approval=approval, surface=here, proposed=canonical(ADD))
    assert call.by.decided == proto.OwnerApproved(surface=here, proposed=canonical(ADD))
    for record in broker.audit():
        assert (record["arguments"], record["proposed"]) == (canonical(mine), canonical(ADD))


async def test_the_same_version_is_no_change(nursery: trio.Nursery, broker: Owner) -> None:
    approval, frames = await broker.ask(nursery, ADD)
    spaced = json.dumps(ADD, indent=2)
    await broker.owner(ApprovalDecide(id=approval, approve=True, arguments=spaced), Ok)
    assert (await broker.reply(frames)).content == APPLIED
    assert all("proposed" not in record for record in broker.audit())


@pytest.mark.parametrize(
    ("mine", "why"),
    [
        (
            {"action": "remove", "file": "memory", "old": "likes tea"},
            "your version must add in the memory file as the model's does, not remove in memory",
        ),
        (
            {"action": "add", "file": "user", "text": "likes tea"},
            "your version must add in the memory file as the model's does, not add in user",
        ),
        (
            {"action": "add", "file": "memory", "text": "a", "old": "b"},
            "your version of the memory call is refused: memory arguments:",
        ),
    ],
)
async def test_a_version_of_another_action_or_file_leaves_the_approval_pending(
    nursery: trio.Nursery, broker: Owner, mine: dict[str, Any], why: str
) -> None:
    approval, frames = await broker.ask(nursery, ADD)
    decide = ApprovalDecide(id=approval, approve=True, arguments=json.dumps(mine))
    with pytest.raises(proto.RemoteError) as refused:
        await broker.owner(decide, Ok)
    assert refused.value.code == "revision-refused"
    assert refused.value.error.message.startswith(why)
    with pytest.raises(proto.RemoteError) as revised:
        await broker.owner(ApprovalRevise(id=approval, arguments=json.dumps(mine)), Ok)
    assert revised.value.error.message == refused.value.error.message
    with pytest.raises(ValueError, match="arguments go with an approval only"):
        ApprovalDecide(id=approval, approve=False, arguments=json.dumps(ADD))
    deny_with = {"id": approval, "approve": False, "arguments": json.dumps(ADD)}
    (denied,) = await broker.raw(proto.OWNER_BROKER, "approval_decide", deny_with)
    assert isinstance(denied, proto.Error)
    assert denied.code == "bad-frame"
    assert "arguments go with an approval only" in denied.message
    assert await broker.pending() == [approval]
    assert broker.audit() == []
    await broker.owner(ApprovalDecide(id=approval, approve=True), Ok)
    assert (await broker.reply(frames)).status == "ok"


async def test_approval_revise_answers_the_canonical_version_without_deciding(
    nursery: trio.Nursery, broker: Owner
) -> None:
    approval, _ = await broker.ask(nursery, ADD)
    mine = {"action": "add", "file": "memory", "text": "likes green tea"}
    revised = await broker.owner(
        ApprovalRevise(id=approval, arguments=json.dumps(mine, indent=1)), ApprovalRevised
    )
    assert revised == ApprovalRevised(id=approval, arguments=canonical(mine))
    assert await broker.pending() == [approval]
    with pytest.raises(proto.RemoteError) as unknown:
        await broker.owner(ApprovalRevise(id="ap-zzzzzz", arguments="{}"), ApprovalRevised)
    assert unknown.value.code == "unknown-approval"
    await broker.owner(ApprovalDecide(id=approval, approve=False), Ok)


async def test_only_memory_calls_can_be_changed(
    nursery: trio.Nursery, settings: Settings, tmp_path: Path
) -> None:
    (settings.home / "grants").mkdir(parents=True)
    (settings.home / "grants" / "r.toml").write_text(
        f'tool = "read_file"\nmode = "ask"\nmax_taint = "private"\nresult_class = "private"\n'
        f'untrusted = false\n[constraints]\npaths = ["{tmp_path}/**"]\n'
    )
    broker = Owner(settings)
    req = ToolRequest(
        session=SESSION,
        call=ToolCall(id="c1", name="read_file", arguments=json.dumps({"path": f"{tmp_path}/a"})),
        taint=Label(),
    )
    async with inmemory.open_exchange(proto.LOOP_BROKER, broker.role.handle_loop, req) as conv:
        pending = await conv.receive()
        assert isinstance(pending, ApprovalPending)
        other = json.dumps({"path": "/etc/shadow"})
        with pytest.raises(proto.RemoteError) as refused:
            await broker.owner(
                ApprovalDecide(id=pending.approval.id, approve=True, arguments=other), Ok
            )
        assert refused.value.error.message == (
            f"only memory calls can be changed before they are approved; approval "
            f"{pending.approval.id} is for read_file"
        )
        await broker.owner(ApprovalDecide(id=pending.approval.id, approve=False), Ok)
