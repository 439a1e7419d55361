"""brokerd in-process: decisions, approvals, audit and bad input through its handlers over
memory streams; which socket accepts what, and the drain at shutdown, over real sockets."""

from __future__ import annotations

import dataclasses
import json
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import inmemory
import msgspec
import pytest
import trio

import proto
from brokerd import Brokerd, Settings
from brokerd._runtimes import CompositeRuntime, MemoryRuntime, RunOutput
from brokerd._service import configured_runtime
from proto import (
    ApprovalDecide,
    ApprovalPending,
    Approvals,
    ApprovalsList,
    AuditVerified,
    AuditVerify,
    Class,
    Grants,
    GrantsList,
    Label,
    Message,
    Ok,
    ToolCall,
    ToolRequest,
    ToolResponse,
)

CAP_S = 10
SESSION = "chat-abcdefghijklmnop"
UNTRUSTED = Label(class_=Class.private, untrusted=True)
M = TypeVar("M", bound=Message)


def grant(tool: str, mode: str, *, max_taint: str = "private", extra: str = "") -> str:
    return (
        f'tool = "{tool}"\nmode = "{mode}"\nmax_taint = "{max_taint}"\n'
        f'result_class = "private"\nuntrusted = false\n{extra}'
    )


def request(tool: str, args: Any, *, call: str = "c1", taint: Label | None = None) -> ToolRequest:
    raw = args if isinstance(args, str) else json.dumps(args)
    return ToolRequest(
        session=SESSION, call=ToolCall(id=call, name=tool, arguments=raw), taint=taint or Label()
    )


def audit_records(home: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted((home / "audit").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def outcomes(home: Path) -> list[dict[str, Any]]:
    """The audit records of outcomes: all but the `started` records of calls that ran."""
    return [r for r in audit_records(home) if r["status"] != "started"]


class Broker:
    """A brokerd and the conversations a test has with it.

    In memory (its handlers behind `proto.serve_stream`), or, once `start`ed, over the
    sockets it serves.
    """

    def __init__(self, role: Brokerd, shutdown: trio.Event, *, sockets: bool) -> None:
        self.role = role
        self.settings = role.settings
        self.shutdown = shutdown
        self.sockets = sockets

    def open_loop(self, req: ToolRequest) -> AbstractAsyncContextManager[proto.Conversation]:
        """Send `req` as loopd does; the conversation yields brokerd's frames."""
        if self.sockets:
            return proto.open_call(self.settings.loop_socket, req)
        return inmemory.open_exchange(proto.LOOP_BROKER, self.role.handle_loop, req)

    async def call(self, req: ToolRequest) -> list[Message]:
        with trio.fail_after(CAP_S):
            async with self.open_loop(req) as conversation:
                return [frame async for frame in conversation]

    async def answer(self, req: ToolRequest) -> ToolResponse:
        frames = await self.call(req)
        assert len(frames) == 1, frames
        assert isinstance(frames[0], ToolResponse)
        return frames[0]

    async def owner(self, req: Message, expect: type[M]) -> M:
        with trio.fail_after(CAP_S):
            if self.sockets:
                return await proto.call(self.settings.admin_socket, req, expect)
            return await inmemory.call(proto.OWNER_BROKER, self.role.handle_owner, req, expect)

    async def pending(self) -> list[proto.PendingApproval]:
        return (await self.owner(ApprovalsList(), Approvals)).pending

    async def ask(self, nursery: trio.Nursery, req: ToolRequest) -> Asked:
        """Send `req` as loopd in the background; return once brokerd announced its approval."""
        asked = Asked()

        async def loopd() -> None:
            with trio.fail_after(CAP_S):
                async with self.open_loop(req) as conversation:
                    async for frame in conversation:
                        asked.frames.append(frame)
                        if isinstance(frame, ApprovalPending):
                            asked.announced.set()
            asked.done.set()

        nursery.start_soon(loopd)
        with trio.fail_after(CAP_S):
            await asked.announced.wait()
        return asked


class Asked:
    """The frames brokerd sent for one `ask` call, as they arrive."""

    def __init__(self) -> None:
        self.frames: list[Message] = []
        self.announced = trio.Event()
        self.done = trio.Event()

    @property
    def approval(self) -> proto.PendingApproval:
        first = self.frames[0]
        assert isinstance(first, ApprovalPending)
        return first.approval

    async def reply(self) -> ToolResponse:
        with trio.fail_after(CAP_S):
            await self.done.wait()
        assert len(self.frames) == 2, self.frames
        assert isinstance(self.frames[1], ToolResponse)
        return self.frames[1]


@pytest.fixture
def notes(home: Path) -> Path:
    folder = home.parent / "notes"
    folder.mkdir(parents=True)
    (folder / "q3.txt").write_text("launch on Thursday")
    return folder


def prepared(settings: Settings, runtime: Any = None, **grants: str) -> Brokerd:
    (settings.home / "grants").mkdir(parents=True, exist_ok=True)
    for name, text in grants.items():
        (settings.home / "grants" / f"{name}.toml").write_text(text)
    role = Brokerd(settings, runtime)
    role.prepare()
    return role


def in_memory(settings: Settings, runtime: Any = None, **grants: str) -> Broker:
    """brokerd prepared as `serve` prepares it, its handlers called over memory streams."""
    return Broker(prepared(settings, runtime, **grants), trio.Event(), sockets=False)


async def start(nursery: trio.Nursery, settings: Settings, **grants: str) -> Broker:
    """brokerd started as `serve` starts it: both sockets bound under the home."""
    role = prepared(settings, **grants)
    shutdown = trio.Event()
    with trio.fail_after(CAP_S):
        await role.start(nursery, shutdown)
    return Broker(role, shutdown, sockets=True)


def usual_grants(notes: Path) -> dict[str, str]:
    paths = f'[constraints]\npaths = ["{notes}/**"]\n'
    return {
        "files": grant("list_dir", "auto", extra=paths),
        "notes": grant("read_file", "ask", extra=paths),
        "shell": grant("shell", "deny"),
        "broken": grant("shell2", "sometimes"),
    }


@pytest.fixture
def broker(settings: Settings, notes: Path) -> Broker:
    return in_memory(settings, **usual_grants(notes))


@pytest.fixture
async def served(nursery: trio.Nursery, settings: Settings, notes: Path) -> Broker:
    return await start(nursery, settings, **usual_grants(notes))


async def test_auto_runs_and_is_audited(broker: Broker, notes: Path, home: Path) -> None:
    reply = await broker.answer(request("list_dir", {"path": str(notes)}))
    assert reply.status == "ok"
    assert reply.content == f"{notes}: 1 entries\nq3.txt (18 bytes)"
    assert reply.label == Label(class_=Class.private)
    started, record = audit_records(home)
    chain = ("status", "commits", "prev", "mac")  # commitments bind the record's place
    assert {k: v for k, v in started.items() if k not in chain} == {
        k: v for k, v in record.items() if k not in chain
    }
    assert record["prev"] == started["mac"]
    assert (started["status"], started["taint"]) == (
        "started",
        {"class": "private", "untrusted": False},
    )
    assert record["decision"] == "auto"
    assert record["grant"] == "files"
    assert record["arguments"] == json.dumps({"path": str(notes)}, separators=(",", ":"))
    assert record["status"] == "ok"
    assert "reason" not in record  # None is left out of the line


@pytest.mark.parametrize(
    ("req", "status", "content", "decision"),
    [
        (request("web_search", {"q": "x"}), "denied", "no grant for web_search", "denied"),
        (request("shell", {"cmd": "ls"}), "denied", "the grant shell denies shell", "denied"),
        (request("shell2", {}), "denied", "no grant for shell2", "denied"),
        (
            request("list_dir", {"path": "/"}, taint=Label(class_=Class.secret)),
            "denied",
            "this session has seen secret content; the grant files allows list_dir only up to "
            "private",
            "denied",
        ),
        (
            request("list_dir", {"path": "/etc"}),
            "denied",
            "'/etc' is outside the paths granted by files",
            "denied",
        ),
        (
            request("read_file", {"path": "../../etc/passwd"}),
            "error",
            "the path must be absolute, got '../../etc/passwd'",
            "refused",
        ),
        (request("recall", "launch window"), "error", "recall arguments are not JSON", "refused"),
        (
            request("memory", {"action": "add"}),
            "error",
            "memory arguments: object missing",
            "refused",
        ),
        (request("Bad Tool", {}), "error", "'Bad Tool' is not a tool name", "refused"),
    ],
)
async def test_refusals_say_exactly_why_and_nothing_is_asked(
    broker: Broker, home: Path, req: ToolRequest, status: str, content: str, decision: str
) -> None:
    reply = await broker.answer(req)
    assert (reply.status, reply.call_id) == (status, "c1")
    assert reply.content.startswith(content)
    (record,) = audit_records(home)
    assert (record["decision"], record["status"], record["tool"]) == (
        decision,
        status,
        req.call.name,
    )
    assert record["reason"] == reply.content
    assert await broker.pending() == []
    # brokerd keeps serving
    after = await broker.answer(
        request("list_dir", {"path": str(broker.settings.home.parent / "notes")})
    )
    assert after.status == "ok"


async def test_ask_waits_for_the_owner_then_runs(
    nursery: trio.Nursery, broker: Broker, notes: Path, home: Path
) -> None:
    req = request("read_file", {"path": f"{notes}/q3.txt"}, taint=UNTRUSTED)
    asked = await broker.ask(nursery, req)
    (listed,) = await broker.pending()
    assert listed == asked.approval
    assert listed.session == SESSION
    assert listed.tool == "read_file"
    assert listed.taint == UNTRUSTED
    assert listed.arguments == f'{{"path":"{notes}/q3.txt"}}'
    assert audit_records(home) == []
    assert await broker.owner(ApprovalDecide(id=listed.id, approve=True), Ok) == Ok()
    reply = await asked.reply()
    assert (reply.status, reply.content) == ("ok", "launch on Thursday")
    started, record = audit_records(home)
    assert (started["decision"], started["approval"], started["status"]) == (
        "approved",
        listed.id,
        "started",
    )
    assert (record["decision"], record["approval"], record["status"]) == (
        "approved",
        listed.id,
        "ok",
    )
    with pytest.raises(proto.RemoteError) as again:
        await broker.owner(ApprovalDecide(id=listed.id, approve=False), Ok)
    assert again.value.code == "already-decided"
    assert (
        again.value.error.message
        == f"approval {listed.id} was already settled: the owner approved it"
    )


async def test_the_owner_denies(
    nursery: trio.Nursery, broker: Broker, notes: Path, home: Path
) -> None:
    asked = await broker.ask(nursery, request("read_file", {"path": f"{notes}/q3.txt"}))
    listed = asked.approval
    await broker.owner(ApprovalDecide(id=listed.id, approve=False, reason="not today"), Ok)
    reply = await asked.reply()
    assert (reply.status, reply.content) == ("denied", "the owner denied this call: not today")
    (record,) = audit_records(home)
    assert (record["decision"], record["status"], record["approval"]) == (
        "denied",
        "denied",
        listed.id,
    )


async def test_an_unknown_approval_is_an_error(broker: Broker) -> None:
    with pytest.raises(proto.RemoteError) as unknown:
        await broker.owner(ApprovalDecide(id="ap-zzzzzz", approve=True), Ok)
    assert (unknown.value.code, unknown.value.error.message) == (
        "unknown-approval",
        "no pending approval 'ap-zzzzzz'",
    )


async def test_the_approval_times_out(settings: Settings, notes: Path) -> None:
    quick = dataclasses.replace(settings, approval_timeout_s=0.2)
    broker = in_memory(
        quick,
        notes=grant("read_file", "ask", extra=f'[constraints]\npaths = ["{notes}/**"]\n'),
    )
    frames = await broker.call(request("read_file", {"path": f"{notes}/q3.txt"}))
    reply = frames[-1]
    assert isinstance(reply, ToolResponse)
    assert (reply.status, reply.content) == ("denied", "approval timed out after 0.2 s")
    assert await broker.pending() == []
    assert audit_records(quick.home)[0]["reason"] == "approval timed out after 0.2 s"


async def test_loopd_disconnecting_withdraws_the_approval(
    broker: Broker, notes: Path, home: Path
) -> None:
    with trio.fail_after(CAP_S):
        async with broker.open_loop(
            request("read_file", {"path": f"{notes}/q3.txt"})
        ) as conversation:
            first = await conversation.receive()
            assert isinstance(first, ApprovalPending)
            assert len(await broker.pending()) == 1
    # brokerd noticed the hang-up on its own (open_loop waited for its handler to finish)
    assert await broker.pending() == []
    (record,) = audit_records(home)
    assert (record["decision"], record["approval"]) == ("denied", first.approval.id)
    assert record["reason"] == "loopd disconnected while the approval was pending"
    with pytest.raises(proto.RemoteError) as late:
        await broker.owner(ApprovalDecide(id=first.approval.id, approve=True), Ok)
    assert late.value.code == "already-decided"


def big_consolidate(marker: str) -> str:
    """A consolidate of 300 entries: about 656 KB of arguments, most of a frame."""
    items = [{"old": f"{marker} {i} " + "z" * 2150, "drop": True} for i in range(300)]
    return json.dumps({"action": "consolidate", "file": "memory", "entries": items})


async def test_approvals_that_outgrow_a_frame_are_listed_a_frame_at_a_time(
    nursery: trio.Nursery, served: Broker
) -> None:
    first = await served.ask(nursery, request("memory", big_consolidate("a"), call="c1"))
    second = await served.ask(nursery, request("memory", big_consolidate("b"), call="c2"))
    listed = await served.owner(ApprovalsList(), Approvals)
    assert [a.id for a in listed.pending] == [first.approval.id]
    assert listed.more == [second.approval.id]
    rest = await served.owner(ApprovalsList(ids=listed.more), Approvals)
    assert rest == Approvals(pending=[second.approval])
    await served.owner(ApprovalDecide(id=first.approval.id, approve=False), Ok)
    assert await served.pending() == [second.approval]  # one fits: no more
    gone = await served.owner(ApprovalsList(ids=[first.approval.id, "ap-zzzzzz"]), Approvals)
    assert gone == Approvals(pending=[])
    await served.owner(ApprovalDecide(id=second.approval.id, approve=False), Ok)


async def test_arguments_are_listed_raw_and_run_as_approved(
    nursery: trio.Nursery, settings: Settings, home: Path
) -> None:
    runtime = configured_runtime(settings, b"k" * proto.KEY_BYTES)
    broker = in_memory(settings, runtime)
    text = "**@channel** <b>hi</b>\u202e"
    raw = '{"action": "add", "file": "memory", "text": "' + text.replace("\u202e", "\\u202e") + '"}'
    asked = await broker.ask(nursery, request("memory", raw))
    listed = asked.approval
    canonical = json.dumps(
        {"action": "add", "file": "memory", "text": text},
        ensure_ascii=False,
        separators=(",", ":"),
    )
    assert listed.arguments == canonical  # raw on the wire: each client renders it
    await broker.owner(ApprovalDecide(id=listed.id, approve=True), Ok)
    reply = await asked.reply()
    assert reply.content == (
        "memoryd is unreachable, so memory did not run; try again later "
        "(runbook: memoryd-unreachable)"
    )
    (record,) = outcomes(home)
    assert (record["arguments"], record["decision"], record["status"]) == (
        canonical,
        "approved",
        "error",
    )


async def test_the_refusing_runtime_asks_nobody(settings: Settings, notes: Path) -> None:
    refusing = dataclasses.replace(settings, runtime="refusing")
    broker = in_memory(
        refusing,
        notes=grant("read_file", "ask", extra=f'[constraints]\npaths = ["{notes}/**"]\n'),
    )
    reply = await broker.answer(request("read_file", {"path": f"{notes}/q3.txt"}))
    assert reply.status == "error"
    assert reply.content.startswith("this brokerd runs no tools but recall and memory")
    assert audit_records(refusing.home)[0]["decision"] == "refused"


class HugeRuntime:
    async def check(self, request: Any, grant: Any) -> RunOutput | None:
        return None

    async def run(self, request: Any, grant: Any) -> RunOutput:
        return RunOutput("ok", "x" * (proto.MAX_FRAME + 1))


async def test_a_result_too_large_for_a_frame_is_an_error(settings: Settings) -> None:
    runtime = CompositeRuntime(
        MemoryRuntime(settings.memory_socket, call_timeout_s=1, approval_key=b"k" * 32),
        HugeRuntime(),
    )
    broker = in_memory(settings, runtime, big=grant("big", "auto"))
    reply = await broker.answer(request("big", {}))
    assert reply.status == "error"
    assert reply.content.startswith("the result of big is too large to pass on (frame of")
    assert audit_records(settings.home)[-1]["status"] == "error"


async def test_grants_list_shows_grants_and_problems(broker: Broker) -> None:
    listed = await broker.owner(GrantsList(), Grants)
    assert [g.name for g in listed.grants] == [
        "builtin-memory",
        "builtin-recall",
        "files",
        "notes",
        "shell",
    ]
    assert [(p.file, p.message) for p in listed.problems] == [
        ("broken.toml", "invalid enum value 'sometimes' - at `$.mode`")
    ]


async def test_audit_verify_over_the_owner_socket(broker: Broker, notes: Path, home: Path) -> None:
    for i in range(3):
        await broker.answer(request("list_dir", {"path": str(notes)}, call=f"c{i}"))
    assert await broker.owner(AuditVerify(), AuditVerified) == AuditVerified(records=6, ok=True)
    path = next((home / "audit").glob("*.jsonl"))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"call":"c0"', b'"call":"c9"')
    path.write_bytes(b"".join(lines))
    verdict = await broker.owner(AuditVerify(), AuditVerified)
    assert (verdict.ok, verdict.records) == (False, 6)
    assert verdict.broken_at is not None
    assert verdict.broken_at.startswith(
        f"{path.name} line 2: its MAC does not match (the record was changed"
    )


async def test_a_loopd_sent_approval_is_ignored(
    nursery: trio.Nursery, broker: Broker, notes: Path
) -> None:
    forged = proto.Authority(
        approval="ap-forged",
        token="f" * 64,
        decided=proto.OwnerApproved(surface=proto.Surface(via="bxctl")),
    )
    req = msgspec.structs.replace(
        request("read_file", {"path": f"{notes}/q3.txt"}), authority=forged
    )
    asked = await broker.ask(nursery, req)
    assert asked.approval.id != "ap-forged"
    await broker.owner(ApprovalDecide(id=asked.approval.id, approve=False), Ok)
    assert (await asked.reply()).status == "denied"


async def test_several_grants_for_a_tool_are_told_apart_by_their_paths(
    nursery: trio.Nursery, settings: Settings, home: Path
) -> None:
    base = home.parent
    for folder in ("docs", "notes", "both"):
        (base / folder).mkdir()
    broker = in_memory(
        settings,
        docs=grant("list_dir", "auto", extra=f'[constraints]\npaths = ["{base}/docs/**"]\n'),
        notes=grant("list_dir", "ask", extra=f'[constraints]\npaths = ["{base}/notes/**"]\n'),
        wide=grant("list_dir", "deny", extra=f'[constraints]\npaths = ["{base}/both/**"]\n'),
        wider=grant("list_dir", "auto", extra=f'[constraints]\npaths = ["{base}/both"]\n'),
    )
    docs = await broker.answer(request("list_dir", {"path": f"{base}/docs"}))
    assert (docs.status, docs.content) == ("ok", f"{base}/docs: empty")
    outside = await broker.answer(request("list_dir", {"path": "/etc"}))
    assert outside.status == "denied"
    assert outside.content == "; ".join(
        f"'/etc' is outside the paths granted by {name}"
        for name in ("docs", "notes", "wide", "wider")
    )
    overlap = await broker.answer(request("list_dir", {"path": f"{base}/both"}))
    assert (overlap.status, overlap.content) == (
        "denied",
        "the grants wide and wider all admit this list_dir call; make their paths or hosts "
        "disjoint (runbook: grants-invalid)",
    )
    relative = await broker.answer(request("list_dir", {"path": "docs"}))
    assert (relative.status, relative.content) == ("error", "the path must be absolute, got 'docs'")
    records = outcomes(home)
    assert [(r.get("grant"), r["decision"]) for r in records] == [
        ("docs", "auto"),
        (None, "denied"),
        (None, "denied"),
        (None, "refused"),
    ]
    asked = await broker.ask(nursery, request("list_dir", {"path": f"{base}/notes"}))
    await broker.owner(ApprovalDecide(id=asked.approval.id, approve=True), Ok)
    assert (await asked.reply()).content == f"{base}/notes: empty"
    assert audit_records(home)[-1]["grant"] == "notes"


# -- over real Unix sockets: which socket accepts what, and the drain at shutdown -------


async def test_approvals_are_reachable_from_the_owner_socket_only(served: Broker) -> None:
    for path, req in (
        (served.settings.loop_socket, ApprovalsList()),
        (served.settings.loop_socket, ApprovalDecide(id="ap-abcdef", approve=True)),
        (served.settings.loop_socket, AuditVerify()),
        (served.settings.admin_socket, request("list_dir", {"path": "/"})),
    ):
        with trio.fail_after(CAP_S), pytest.raises(proto.RemoteError) as wrong:
            await proto.call(path, req, Ok)
        assert wrong.value.code == "wrong-socket"


async def test_shutdown_withdraws_pending_approvals(
    nursery: trio.Nursery, served: Broker, notes: Path
) -> None:
    asked = await served.ask(nursery, request("read_file", {"path": f"{notes}/q3.txt"}))
    served.shutdown.set()
    reply = await asked.reply()
    assert reply.content == "the owner did not decide before boxmaker stopped; the call did not run"
