"""brokerd's forget over real sockets: preview, the decision, retries and restarts.

memoryd and loopd are small roles of this file on their real broker sockets: each keeps
one JSON-lines store and answers the four forget kinds with proto's plan rules, so what
a forget changed, or left, is read from files, as for the real roles (whose own tests,
and the e2e test, cover their stores).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

import proto
from brokerd import Brokerd, Settings
from brokerd._forget import Ledger
from proto import (
    ApprovalPending,
    Forget,
    ForgetAbort,
    ForgetApplied,
    ForgetApply,
    ForgetEntry,
    ForgetLook,
    ForgetLooked,
    ForgetPrepare,
    ForgetPrepared,
    ForgetPreview,
    ForgetPreviewed,
    Forgotten,
    Holding,
    Label,
    Message,
    Ok,
    ServiceError,
    Surface,
    ToolCall,
    ToolRequest,
    ToolResponse,
)

CAP_S = 15
SECRET = "ZEBRA-7731"
OWNER = Surface(via="bxctl")
SESSION = "chat-abcdefghijklmnop"


def kind(message: Message) -> str:
    """A frame's tag: its `kind` on the wire."""
    return str(message.__struct_config__.tag)


class FakeRole:
    """memoryd's or loopd's forget side on its real broker socket; one store, `log.jsonl`.

    `refuse` names the kinds it answers with an error ("forget_prepare", "forget_apply").
    """

    def __init__(self, spec: proto.Socket[Any], socket: Path, root: Path, store: str) -> None:
        self.spec = spec
        self.socket = socket
        self.root = root
        self.store = store
        self.refuse: set[str] = set()
        self.seen: list[Message] = []
        self.near: list[str] = []
        self.entries: list[ForgetEntry] = []
        self._shutdown = trio.Event()
        self._stopped = trio.Event()
        root.mkdir(parents=True, exist_ok=True)

    @property
    def log(self) -> Path:
        return self.root / "log.jsonl"

    @property
    def plans(self) -> Path:
        return self.root / ".forget"

    def write(self, *values: Any) -> None:
        self.log.write_bytes(b"\n".join(json.dumps(v).encode() for v in values) + b"\n")

    async def start(self, nursery: trio.Nursery) -> None:
        self._shutdown, self._stopped = trio.Event(), trio.Event()

        async def serve(task_status: trio.TaskStatus[Path] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                await proto.serve_unix(
                    self.spec,
                    self.socket,
                    self.handle,
                    shutdown=self._shutdown,
                    task_status=task_status,
                )
            finally:
                self._stopped.set()

        await nursery.start(serve)

    async def stop(self) -> None:
        self._shutdown.set()
        with trio.fail_after(CAP_S):
            await self._stopped.wait()

    def _holding(self, count: int) -> list[Holding]:
        return [Holding(store=self.store, count=count, unit="lines")]

    def _plan(self, plan: str, text: str, *, committed: bool) -> proto.ForgetPlan:
        edits = proto.line_edits(self.log.read_bytes().split(b"\n"), text)
        return proto.ForgetPlan(
            plan=plan,
            committed=committed,
            edits=[proto.LinesEdit(path=self.log.name, lines=edits)] if edits else [],
            counts={self.store: len(edits)},
        )

    async def handle(self, request: proto.BrokerMemoryRequest, conn: proto.Connection) -> Message:
        self.seen.append(request)
        if kind(request) in self.refuse:
            raise ServiceError("disk-full", f"{self.store}: no space left on the device")
        match request:
            case ForgetLook(text=text):
                count = len(proto.line_edits(self.log.read_bytes().split(b"\n"), text))
                return ForgetLooked(
                    holdings=self._holding(count), entries=self.entries, near=self.near
                )
            case ForgetPrepare(plan=plan, text=text):
                written = self._plan(plan, text, committed=False)
                proto.write_plan(self.plans, written)
                return ForgetPrepared(plan=plan, holdings=self._holding(written.counts[self.store]))
            case ForgetApply(plan=plan, text=text):
                stored = proto.read_plan(self.plans, plan)
                if stored is None:
                    return ForgetApplied(plan=plan)
                if text is None:
                    stored = msgspec.structs.replace(stored, committed=True)
                else:
                    stored = self._plan(plan, text, committed=True)
                proto.write_plan(self.plans, stored)
                for edit in stored.edits:
                    proto.apply_edit(self.root, edit)
                proto.remove_plan(self.plans, plan)
                return ForgetApplied(plan=plan, holdings=self._holding(stored.counts[self.store]))
            case ForgetAbort(plan=plan):
                stored = proto.read_plan(self.plans, plan)
                if stored is not None and not stored.committed:
                    proto.remove_plan(self.plans, plan)
                return Ok()
            case ToolRequest():
                raise ServiceError("not-here", "this fake runs no tools")

    def kinds(self) -> list[str]:
        return [kind(request) for request in self.seen]


class World:
    """A home with brokerd, a fake memoryd and a fake loopd, each on its real socket."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        home = settings.home
        self.memoryd = FakeRole(
            proto.BROKER_MEMORY, settings.memory_socket, home / "memory", "journal"
        )
        self.loopd = FakeRole(
            proto.BROKER_LOOP, settings.loopd_socket, home / "sessions", "sessions"
        )
        self.memoryd.write(
            {"op": "add", "text": f"locker code: {SECRET}"}, {"op": "add", "text": "tea"}
        )
        self.loopd.write(
            {"role": "user", "content": f"my code is {SECRET.lower()}, ok?"},
            {"role": "tool", "arguments": json.dumps({"q": SECRET})},
            {"role": "assistant", "content": "noted"},
        )
        self.before = {role: role.log.read_bytes() for role in (self.memoryd, self.loopd)}
        self.role: Brokerd | None = None
        self.shutdown = trio.Event()
        self.stopped = trio.Event()
        self._brokerd_scope: trio.CancelScope | None = None

    @property
    def ledgers(self) -> Path:
        return self.settings.audit_dir / ".forget"

    async def start_brokerd(self, nursery: trio.Nursery, **grants: str) -> Brokerd:
        """Prepare and start brokerd as `serve` does, in a scope `kill_brokerd` cancels."""
        grants_dir = self.settings.grants_dir
        grants_dir.mkdir(parents=True, exist_ok=True)
        for name, text in grants.items():
            (grants_dir / f"{name}.toml").write_text(text)
        role = Brokerd(self.settings)
        role.prepare()

        self.shutdown, self.stopped = trio.Event(), trio.Event()

        async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with trio.CancelScope() as scope:
                self._brokerd_scope = scope
                async with trio.open_nursery() as work:
                    await role.start(work, self.shutdown)
                    task_status.started()
            self.stopped.set()

        with trio.fail_after(CAP_S):
            await nursery.start(run)
        self.role = role
        return role

    def kill_brokerd(self) -> None:
        """brokerd dies: every task of it stops where it is, no drain."""
        assert self._brokerd_scope is not None
        self._brokerd_scope.cancel()

    async def owner(self, request: Message, expect: type[Any]) -> Any:
        with trio.fail_after(CAP_S):
            return await proto.call(self.settings.admin_socket, request, expect)

    async def refused(self, request: Message) -> proto.RemoteError:
        with trio.fail_after(CAP_S), pytest.raises(proto.RemoteError) as refused:
            await proto.call(self.settings.admin_socket, request, Ok)
        return refused.value

    async def wait_finished(self, plan: str) -> None:
        assert self.role is not None
        with trio.fail_after(CAP_S):
            await self.role.forgets.wait_finished(plan)

    def unchanged(self) -> bool:
        return all(
            role.log.read_bytes() == self.before[role] for role in (self.memoryd, self.loopd)
        )

    def leftovers(self) -> list[Path]:
        """Plans and ledgers anywhere in the home."""
        return sorted(
            path
            for folder in (self.memoryd.plans, self.loopd.plans, self.ledgers)
            if folder.is_dir()
            for path in folder.iterdir()
        )


def holding_files(root: Path, text: str) -> list[Path]:
    """Every file under `root` whose bytes hold `text` in any case."""
    return [
        path
        for path in sorted(root.rglob("*"))
        if path.is_file() and text.lower().encode() in path.read_bytes().lower()
    ]


@pytest.fixture
def world(settings: Settings) -> World:
    return World(settings)


@pytest.fixture
async def up(nursery: trio.Nursery, world: World) -> World:
    """Both fake roles and brokerd running."""
    await world.memoryd.start(nursery)
    await world.loopd.start(nursery)
    await world.start_brokerd(nursery)
    return world


# -- preview ---------------------------------------------------------------------------


async def test_the_preview_merges_every_part_and_writes_nothing(up: World) -> None:
    up.memoryd.entries = [ForgetEntry(file="memory", entry=f"locker code: {SECRET}")]
    up.memoryd.near = [f"zebra {n} 7731" for n in range(12)]
    previewed = await up.owner(ForgetPreview(text=SECRET.lower()), ForgetPreviewed)
    assert previewed.holdings == [
        Holding(store="journal", count=1, unit="lines"),
        Holding(store="sessions", count=2, unit="lines"),
        Holding(store="audit", count=0, unit="records"),
    ]
    assert previewed.entries == up.memoryd.entries
    assert previewed.near == up.memoryd.near[:10]
    assert up.unchanged()
    assert up.leftovers() == []


async def test_a_preview_names_the_role_that_does_not_answer(
    nursery: trio.Nursery, world: World
) -> None:
    await world.memoryd.start(nursery)
    await world.start_brokerd(nursery)
    refused = await world.refused(ForgetPreview(text=SECRET))
    assert refused.error.message == "loopd is not running: start it (bxctl up), then ask again"
    assert world.unchanged()
    assert world.leftovers() == []


@pytest.mark.parametrize("text", ["x", "a\nb", "y" * 1001])
async def test_a_text_that_cannot_be_forgotten_is_refused(up: World, text: str) -> None:
    for request in (ForgetPreview(text=text), Forget(text=text, surface=OWNER)):
        refused = await up.refused(request)
        assert refused.code == "bad-forget"
        assert refused.error.message == proto.forget_problem(text)
    assert up.memoryd.seen == []
    assert up.loopd.seen == []


# -- forget ----------------------------------------------------------------------------


async def test_a_forget_takes_the_text_out_of_every_store_and_writes_it_nowhere(
    up: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    forgotten = await up.owner(Forget(text=SECRET, surface=OWNER, session=SESSION), Forgotten)
    assert forgotten.pending == []
    assert forgotten.conflicts == []
    assert forgotten.holdings == [
        Holding(store="journal", count=1, unit="lines"),
        Holding(store="sessions", count=2, unit="lines"),
        Holding(store="audit", count=0, unit="records"),
    ]
    assert up.memoryd.kinds() == ["forget_prepare", "forget_apply"]
    assert up.loopd.kinds() == ["forget_prepare", "forget_apply"]
    assert holding_files(up.settings.home, SECRET) == []
    assert up.loopd.log.read_text().count(proto.MARKER) == 2
    assert up.leftovers() == []
    await up.wait_finished(forgotten.plan)
    assert not any(SECRET.lower() in r.getMessage().lower() for r in caplog.records)
    assert any(forgotten.plan in r.getMessage() for r in caplog.records)


async def test_a_part_that_fails_to_prepare_aborts_everyone_and_nothing_changes(
    up: World,
) -> None:
    up.loopd.refuse.add("forget_prepare")
    refused = await up.refused(Forget(text=SECRET, surface=OWNER))
    assert refused.code == "forget-not-done"
    assert refused.error.message == (
        "nothing was forgotten: loopd could not do it: sessions: no space left on the device"
    )
    assert up.memoryd.kinds() == ["forget_prepare", "forget_abort"]
    assert up.loopd.kinds() == ["forget_prepare", "forget_abort"]
    assert up.unchanged()
    assert up.leftovers() == []


async def test_a_part_that_fails_to_apply_stays_pending_until_it_answers(
    up: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    up.loopd.refuse.add("forget_apply")
    forgotten = await up.owner(Forget(text=SECRET, surface=OWNER), Forgotten)
    assert forgotten.pending == ["loopd"]
    assert holding_files(up.settings.home, SECRET) == [up.loopd.log]
    ledger = msgspec.json.decode(
        (up.ledgers / f"{forgotten.plan}.ledger.json").read_bytes(), type=Ledger
    )
    assert (ledger.state, ledger.done) == ("committed", ["memoryd", "brokerd"])

    # loopd stops, then comes back able to apply: the retry finishes without the text
    await up.loopd.stop()
    up.loopd.refuse.clear()
    async with trio.open_nursery() as nursery:
        await up.loopd.start(nursery)
        await up.wait_finished(forgotten.plan)
        await up.loopd.stop()
    retried = [r for r in up.loopd.seen if isinstance(r, ForgetApply)][1:]
    assert retried
    assert all(r.text is None for r in retried)
    assert holding_files(up.settings.home, SECRET) == []
    assert up.leftovers() == []
    assert not any(SECRET.lower() in r.getMessage().lower() for r in caplog.records)


async def test_a_record_that_cannot_be_written_is_written_later_and_only_as_a_digest(
    up: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert up.role is not None
    audit = up.role.audit
    writable = trio.Event()
    asked: list[dict[str, Any]] = []
    append_forget = audit.append_forget

    async def full_until_writable(**fields: Any) -> None:
        asked.append(fields)
        if not writable.is_set():
            raise OSError(28, "No space left on device")
        await append_forget(**fields)

    monkeypatch.setattr(audit, "append_forget", full_until_writable)
    forgotten = await up.owner(Forget(text=SECRET, surface=OWNER, session=SESSION), Forgotten)
    assert forgotten.pending == ["brokerd"]
    assert holding_files(up.settings.home, SECRET) == []
    ledger = msgspec.json.decode(
        (up.ledgers / f"{forgotten.plan}.ledger.json").read_bytes(), type=Ledger
    )
    assert ledger.unfinished == []
    writable.set()
    await up.wait_finished(forgotten.plan)
    assert len(asked) >= 2
    assert all(fields == asked[0] for fields in asked)
    assert asked[0] == {
        "plan": forgotten.plan,
        "counts": {"journal": 1, "sessions": 2, "audit": 0},
        "digest": audit.forget_digest(SECRET),
        "surface": Surface(via="bxctl", uid=os.getuid()),
        "session": SESSION,
    }
    assert up.leftovers() == []


async def test_a_restarted_brokerd_finishes_a_decided_forget(
    nursery: trio.Nursery, up: World
) -> None:
    up.loopd.refuse.add("forget_apply")
    forgotten = await up.owner(Forget(text=SECRET, surface=OWNER), Forgotten)
    assert forgotten.pending == ["loopd"]
    up.kill_brokerd()
    up.loopd.refuse.clear()
    up.loopd.seen.clear()
    await up.start_brokerd(nursery)
    await up.wait_finished(forgotten.plan)
    # (the killed brokerd's last try may still reach loopd: applying is idempotent)
    assert up.loopd.seen
    assert all(r == ForgetApply(plan=forgotten.plan) for r in up.loopd.seen)
    assert holding_files(up.settings.home, SECRET) == []
    assert up.leftovers() == []


async def test_a_forget_left_to_finish_does_not_hold_up_a_shutdown(up: World) -> None:
    up.loopd.refuse.add("forget_apply")
    forgotten = await up.owner(Forget(text=SECRET, surface=OWNER), Forgotten)
    assert forgotten.pending == ["loopd"]
    up.shutdown.set()
    with trio.fail_after(CAP_S / 3):
        await up.stopped.wait()
    assert (up.ledgers / f"{forgotten.plan}.ledger.json").exists()


async def test_a_forget_left_preparing_is_aborted_at_start(
    nursery: trio.Nursery, world: World
) -> None:
    await world.memoryd.start(nursery)
    await world.loopd.start(nursery)
    plan = proto.new_plan_id()
    for role in (world.memoryd, world.loopd):
        with trio.fail_after(CAP_S):
            await proto.call(role.socket, ForgetPrepare(plan=plan, text=SECRET), ForgetPrepared)
    ledger = Ledger(plan=plan, state="preparing", parts=["memoryd", "loopd", "brokerd"])
    world.ledgers.mkdir(parents=True)
    (world.ledgers / f"{plan}.ledger.json").write_bytes(msgspec.json.encode(ledger))
    await world.start_brokerd(nursery)
    await world.wait_finished(plan)
    assert world.memoryd.kinds()[-1] == "forget_abort"
    assert world.loopd.kinds()[-1] == "forget_abort"
    assert not any(isinstance(r, ForgetApply) for r in world.memoryd.seen + world.loopd.seen)
    assert world.unchanged()
    assert world.leftovers() == []


# -- what else a forget reaches, and who may ask for one -------------------------------


def read_grant(notes: Path) -> str:
    return (
        'tool = "read_file"\nmode = "ask"\nmax_taint = "private"\nresult_class = "private"\n'
        f'untrusted = false\n[constraints]\npaths = ["{notes}/**"]\n'
    )


class Asked:
    """A read_file call sent as loopd sends it: its reply once brokerd gave one."""

    def __init__(self) -> None:
        self.announced = trio.Event()
        self.replied = trio.Event()
        self.reply: ToolResponse | None = None


async def ask(nursery: trio.Nursery, world: World, call: str, args: dict[str, str]) -> Asked:
    """Send a read_file call as loopd; return once brokerd announced its approval."""
    asked = Asked()
    request = ToolRequest(
        session=SESSION,
        call=ToolCall(id=call, name="read_file", arguments=json.dumps(args)),
        taint=Label(),
    )

    async def loopd() -> None:
        with trio.fail_after(CAP_S):
            async with proto.open_call(world.settings.loop_socket, request) as conversation:
                async for frame in conversation:
                    if isinstance(frame, ApprovalPending):
                        asked.announced.set()
                    elif isinstance(frame, ToolResponse):
                        asked.reply = frame
        asked.replied.set()

    nursery.start_soon(loopd)
    with trio.fail_after(CAP_S):
        await asked.announced.wait()
    return asked


async def test_a_pending_approval_holding_the_text_is_denied(
    nursery: trio.Nursery, world: World
) -> None:
    notes = world.settings.home.parent / "notes"
    await world.memoryd.start(nursery)
    await world.loopd.start(nursery)
    await world.start_brokerd(nursery, notes=read_grant(notes))
    holding = await ask(nursery, world, "c1", {"path": f"{notes}/{SECRET.lower()}.txt"})
    other = await ask(nursery, world, "c2", {"path": f"{notes}/tea.txt"})
    await world.owner(Forget(text=SECRET, surface=OWNER), Forgotten)
    with trio.fail_after(CAP_S):
        await holding.replied.wait()
    assert holding.reply is not None
    assert holding.reply.status == "denied"
    assert holding.reply.content == "the owner denied this call: forgotten by the owner"
    pending = await world.owner(proto.ApprovalsList(), proto.Approvals)
    assert [a.call_id for a in pending.pending] == ["c2"]
    assert not other.replied.is_set()


async def test_the_model_cannot_forget(up: World) -> None:
    def call(name: str, arguments: dict[str, str]) -> ToolRequest:
        return ToolRequest(
            session=SESSION,
            call=ToolCall(id="c1", name=name, arguments=json.dumps(arguments)),
            taint=Label(),
        )

    async def answer(request: ToolRequest) -> ToolResponse:
        with trio.fail_after(CAP_S):
            return await proto.call(up.settings.loop_socket, request, ToolResponse)

    unknown = await answer(call("nonesuch", {"text": "tea"}))
    for request in (
        call("forget", {"text": SECRET}),
        call("nonesuch", {"text": f"!forget {SECRET}"}),
        call("forget", {"text": f"/forget {SECRET}"}),
    ):
        got = await answer(request)
        assert got.status == unknown.status
        assert got.content == unknown.content.replace("nonesuch", request.call.name)
    with trio.fail_after(CAP_S), pytest.raises(proto.RemoteError) as wrong:
        await proto.call(up.settings.loop_socket, Forget(text=SECRET, surface=OWNER), Ok)
    assert wrong.value.code == "wrong-socket"
    assert up.memoryd.seen == []
    assert up.loopd.seen == []
    assert up.unchanged()
    assert up.leftovers() == []
