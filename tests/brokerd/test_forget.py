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
from lines_store import LinesStore
from lines_store import holding_files as lines_holding

import proto
from brokerd import Brokerd, Settings
from brokerd._forget import ForgetLedger
from proto import (
    ApprovalPending,
    Forget,
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
WAIT_S = 1.0
"""How long these tests' brokerd waits for a part that is not running."""
SECRET = "ZEBRA-7731"
OWNER = Surface(via="bxctl")
SESSION = "chat-abcdefghijklmnop"


def kind(message: Message) -> str:
    """A frame's tag: its `kind` on the wire."""
    return str(message.__struct_config__.tag)


class FakeRole:
    """memoryd's or loopd's forget side on its real broker socket: proto's part, one store.

    The part is the real `proto.ForgetPart`; its store is one JSON-lines file (`log.jsonl`,
    `lines_store.LinesStore`). `refuse` names the kinds it answers with an error
    ("forget_prepare", "forget_apply").
    """

    def __init__(self, spec: proto.Socket[Any], socket: Path, root: Path, store: str) -> None:
        self.spec = spec
        self.socket = socket
        self.root = root
        self.lines = LinesStore(root, "memoryd" if store == "journal" else "loopd", store)
        self.part = proto.ForgetPart(self.lines)
        self.refuse: set[str] = set()
        self.stop_after: str | None = None
        """A kind after whose answer the role stops (it died): its socket goes."""
        self.seen: list[Message] = []
        self.near: list[str] = []
        self.entries: list[ForgetEntry] = []
        self._shutdown = trio.Event()
        self._stopped = trio.Event()

    @property
    def log(self) -> Path:
        return self.lines.log

    @property
    def plans(self) -> Path:
        return self.root / proto.PLAN_DIR

    def write(self, *values: Any) -> None:
        self.lines.write(*values)

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

    async def handle(self, request: proto.BrokerMemoryRequest, conn: proto.Connection) -> Message:
        self.seen.append(request)
        if kind(request) in self.refuse:
            raise ServiceError("disk-full", f"{self.lines.store}: no space left on the device")
        match request:
            case ForgetLook():
                looked = await self.part.handle(request)
                assert isinstance(looked, ForgetLooked)
                return msgspec.structs.replace(looked, entries=self.entries, near=self.near)
            case ToolRequest():
                raise ServiceError("not-here", "this fake runs no tools")
            case _:
                answer = await self.part.handle(request)
                if kind(request) == self.stop_after:
                    self.stop_after = None
                    self._shutdown.set()
                return answer

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
        role.forgets.wait_s = WAIT_S
        role.forgets.tell_every_s = WAIT_S / 5
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
        """Plans and ledgers anywhere in the home (each part's list of ended plans stays)."""
        return sorted(
            path
            for folder in (self.memoryd.plans, self.loopd.plans, self.ledgers)
            if folder.is_dir()
            for path in folder.iterdir()
            if path.name != proto.ENDED_FILE
        )


def holding_files(root: Path, text: str) -> list[Path]:
    """Every file under `root` whose bytes hold `text` folded."""
    return lines_holding(root, text)


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
    assert refused.error.message == (
        "loopd is not running (waited 1 s for it); nothing was changed; start it (bxctl up), "
        "then forget the text again"
    )
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
    assert (forgotten.left, forgotten.lost, forgotten.denied) == ([], [], [])
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
        "nothing was forgotten: loopd could not do it: sessions: no space left on the device; "
        "forget the text again once that is put right"
    )
    await up.wait_finished(up.memoryd.seen[0].plan)  # type: ignore[attr-defined]
    assert up.memoryd.kinds() == ["forget_prepare", "forget_abort"]
    assert up.loopd.kinds() == ["forget_prepare", "forget_abort"]
    assert up.unchanged()
    assert up.leftovers() == []


async def test_a_part_that_fails_to_apply_stays_left_until_it_answers(
    up: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    up.loopd.refuse.add("forget_apply")
    forgotten = await up.owner(Forget(text=SECRET, surface=OWNER), Forgotten)
    assert [(left.part, left.why) for left in forgotten.left] == [
        ("loopd", "loopd could not do it: sessions: no space left on the device")
    ]
    assert forgotten.left[0].holdings == [Holding(store="sessions", count=2, unit="lines")]
    assert holding_files(up.settings.home, SECRET) == [up.loopd.log]
    ledger = msgspec.json.decode(
        (up.ledgers / f"{forgotten.plan}.ledger.json").read_bytes(), type=ForgetLedger
    )
    assert (ledger.state, ledger.done) == ("committed", ["memoryd", "brokerd"])

    # loopd stops, then comes back able to apply: brokerd finishes it, the text in hand
    await up.loopd.stop()
    up.loopd.refuse.clear()
    async with trio.open_nursery() as nursery:
        await up.loopd.start(nursery)
        await up.wait_finished(forgotten.plan)
        await up.loopd.stop()
    retried = [r for r in up.loopd.seen if isinstance(r, ForgetApply)][1:]
    assert retried
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
    assert [left.part for left in forgotten.left] == ["brokerd"]
    assert holding_files(up.settings.home, SECRET) == []
    ledger = msgspec.json.decode(
        (up.ledgers / f"{forgotten.plan}.ledger.json").read_bytes(), type=ForgetLedger
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
    assert [left.part for left in forgotten.left] == ["loopd"]
    up.kill_brokerd()
    up.loopd.refuse.clear()
    up.loopd.seen.clear()
    await up.start_brokerd(nursery)
    await up.wait_finished(forgotten.plan)
    # (the killed brokerd's last try, the text in hand, may still reach loopd: applying is
    # idempotent, and the restarted one, which has no text, is answered all the same)
    assert ForgetApply(plan=forgotten.plan) in up.loopd.seen
    assert holding_files(up.settings.home, SECRET) == []
    assert up.leftovers() == []


async def test_a_forget_left_to_finish_does_not_hold_up_a_shutdown(up: World) -> None:
    up.loopd.refuse.add("forget_apply")
    forgotten = await up.owner(Forget(text=SECRET, surface=OWNER), Forgotten)
    assert [left.part for left in forgotten.left] == ["loopd"]
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
    ledger = ForgetLedger(plan=plan, state="preparing", parts=["memoryd", "loopd", "brokerd"])
    world.ledgers.mkdir(parents=True)
    (world.ledgers / f"{plan}.ledger.json").write_bytes(msgspec.json.encode(ledger))
    await world.start_brokerd(nursery)
    await world.wait_finished(plan)
    assert world.memoryd.kinds()[-1] == "forget_abort"
    assert world.loopd.kinds()[-1] == "forget_abort"
    assert not any(isinstance(r, ForgetApply) for r in world.memoryd.seen + world.loopd.seen)
    assert world.unchanged()
    assert world.leftovers() == []


# -- a role that is not running ----------------------------------------------------------


async def owner_forget(world: World, progress: list[proto.Message]) -> Forgotten:
    with trio.fail_after(CAP_S):
        return await proto.call(
            world.settings.admin_socket,
            Forget(text=SECRET, surface=OWNER),
            Forgotten,
            deadline_s=CAP_S,
            on_progress=progress.append,
        )


async def test_a_role_that_died_before_the_decision_is_waited_for_the_owner_told(
    nursery: trio.Nursery, world: World
) -> None:
    await world.memoryd.start(nursery)
    await world.start_brokerd(nursery)  # loopd is down (restarting)

    async def back_soon() -> None:
        await trio.sleep(WAIT_S / 2)
        await world.loopd.start(nursery)

    nursery.start_soon(back_soon)
    progress: list[proto.Message] = []
    forgotten = await owner_forget(world, progress)
    assert forgotten.left == []
    assert holding_files(world.settings.home, SECRET) == []
    assert (
        proto.ForgetProgress(step="prepare", gone=["loopd"], waited_s=0, bound_s=int(WAIT_S))
        in progress
    )
    await world.wait_finished(forgotten.plan)
    assert world.leftovers() == []


async def test_a_role_gone_past_the_bound_before_the_decision_forgets_nothing(
    nursery: trio.Nursery, world: World
) -> None:
    await world.memoryd.start(nursery)
    await world.start_brokerd(nursery)
    refused = await world.refused(Forget(text=SECRET, surface=OWNER))
    assert refused.code == "forget-not-done"
    assert refused.error.message == (
        "nothing was forgotten: loopd is not running (waited 1 s for it); start it (bxctl up), "
        "then forget the text again"
    )
    assert world.unchanged()
    await world.loopd.start(nursery)  # back: it is told to abort, and the ledger goes
    plan = world.memoryd.seen[0].plan  # type: ignore[attr-defined]
    await world.wait_finished(plan)
    assert world.memoryd.kinds() == ["forget_prepare", "forget_abort"]
    assert world.loopd.kinds()[-1] == "forget_abort"
    assert world.leftovers() == []
    with pytest.raises(proto.RemoteError) as late:  # a prepare arriving late is barred
        await proto.call(world.loopd.socket, ForgetPrepare(plan=plan, text=SECRET), Ok)
    assert late.value.code == "forget-aborted"


async def test_a_role_gone_after_the_decision_is_named_and_finishes_once_back(
    nursery: trio.Nursery, up: World
) -> None:
    up.loopd.stop_after = "forget_prepare"  # it dies just after its plan is written
    progress: list[proto.Message] = []
    forgotten = await owner_forget(up, progress)
    assert [(left.part, left.why) for left in forgotten.left] == [
        ("loopd", "loopd is not running (waited 1 s for it)")
    ]
    assert forgotten.holdings == [
        Holding(store="journal", count=1, unit="lines"),
        Holding(store="audit", count=0, unit="records"),
    ]
    assert any(isinstance(p, proto.ForgetProgress) and p.gone == ["loopd"] for p in progress)
    assert holding_files(up.settings.home, SECRET) == [up.loopd.log]
    await up.loopd.start(nursery)
    await up.wait_finished(forgotten.plan)
    assert holding_files(up.settings.home, SECRET) == []
    assert up.leftovers() == []


async def test_a_role_that_lost_its_plan_is_never_counted_done(
    nursery: trio.Nursery, up: World, caplog: pytest.LogCaptureFixture
) -> None:
    up.loopd.refuse.add("forget_apply")
    forgotten = await up.owner(Forget(text=SECRET, surface=OWNER), Forgotten)
    up.kill_brokerd()
    for plan in up.loopd.plans.glob("fg-*.json"):
        plan.unlink()  # lost (a restore, a hand): loopd never heard of it now
    up.loopd.refuse.clear()
    await up.start_brokerd(nursery)
    await up.wait_finished(forgotten.plan)
    assert holding_files(up.settings.home, SECRET) == [up.loopd.log]  # the truth: still there
    lost = [r for r in caplog.records if r.levelname == "ERROR"]
    assert lost
    assert "no longer has its plan" in lost[0].getMessage()
    assert "finished everywhere" not in caplog.text
    assert up.leftovers() == []


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
    listed = await world.owner(proto.ApprovalsList(), proto.Approvals)
    forgotten = await world.owner(Forget(text=SECRET, surface=OWNER), Forgotten)
    assert forgotten.denied == [a.id for a in listed.pending if a.call_id == "c1"]
    with trio.fail_after(CAP_S):
        await holding.replied.wait()
    assert holding.reply is not None
    assert holding.reply.status == "denied"
    assert holding.reply.content == "the owner denied this call: forgotten by the owner"
    pending = await world.owner(proto.ApprovalsList(), proto.Approvals)
    assert [a.call_id for a in pending.pending] == ["c2"]
    assert not other.replied.is_set()


async def test_a_forget_that_did_not_happen_denied_no_approval(
    nursery: trio.Nursery, world: World
) -> None:
    notes = world.settings.home.parent / "notes"
    await world.memoryd.start(nursery)
    await world.loopd.start(nursery)
    await world.start_brokerd(nursery, notes=read_grant(notes))
    holding = await ask(nursery, world, "c1", {"path": f"{notes}/{SECRET.lower()}.txt"})
    world.loopd.refuse.add("forget_prepare")
    refused = await world.refused(Forget(text=SECRET, surface=OWNER))
    assert refused.error.message.startswith("nothing was forgotten: ")
    pending = await world.owner(proto.ApprovalsList(), proto.Approvals)
    assert [a.call_id for a in pending.pending] == ["c1"]
    assert not holding.replied.is_set()


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
