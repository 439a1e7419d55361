"""A forget and the turns around it: the model is never sent the text again.

loopd with its turns against the scripted model (which keeps every request), memoryd and
brokerd as test doubles, and brokerd's forget requests on loopd's broker-loop handler.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import inmemory
import pytest
import trio
import trio.testing
from loopd_harness import BLOCK, Harness, open_session, say, start_harness
from scripted_model import Step, serve_scripted_model

import proto
from proto import ForgetApplied, ForgetApply, Holding, TurnDone

CAP_S = 20
SECRET = "ZEBRA-7731"
PLAN = "fg-turnsplan0001"


def holders(home: Path) -> list[str]:
    root = home / "sessions"
    return [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*"))
        if p.is_file() and SECRET.lower() in p.read_bytes().decode(errors="replace").lower()
    ]


async def forget(h: Harness, text: str | None = SECRET) -> ForgetApplied:
    request = ForgetApply(plan=PLAN, text=text)
    return await inmemory.call(proto.BROKER_LOOP, h.loopd.handle_broker, request, ForgetApplied)


def sent_after(requests: list[bytes], start: int) -> list[bytes]:
    return [body for body in requests[start:] if SECRET.lower().encode() in body.lower()]


async def test_a_session_open_at_the_forget_resumes_without_ever_sending_the_text(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    steps = (
        Step(reasoning=f"the owner's code is {SECRET}", text=f"Noted: {SECRET.lower()}."),
        Step(text="I do not have it any more."),
    )
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.memoryd.block = BLOCK + f"\n§ Locker code: {SECRET}"
        opened = await open_session(h.chat)
        await say(h.chat, opened.session, f"my locker code is {SECRET}")
        before = len(model.requests)
        h.memoryd.updated.clear()
        applied = await forget(h)
        frames = await say(h.chat, opened.session, "what was my code?")
    assert sent_after(model.requests, 0) != []  # it was sent before the forget
    assert sent_after(model.requests, before) == []
    assert len(model.requests) == before + 1
    assert frames[-1] == TurnDone(text="I do not have it any more.")
    assert applied.holdings == [
        Holding(store="sessions", count=2, unit="messages", names=[opened.session]),
        Holding(store="baselines", count=1, unit="sessions", names=[opened.session]),
    ]
    assert applied.conflicts == []
    assert h.memoryd.updated[0] == opened.session  # told before the next turn's own
    assert holders(h.home) == []
    sent = model.request_json(before)
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert sent["messages"][1]["content"] == "my locker code is [forgotten]"


async def test_a_turn_waiting_for_approval_is_waited_for_and_its_answer_forgotten_too(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    edit = f'{{"action": "add", "file": "memory", "text": "Locker code: {SECRET}"}}'
    steps = (
        Step(tool_calls=[("memory", edit)]),
        Step(text=f"Saved {SECRET}."),  # said after the forget began: waited for
        Step(text="Which code?"),
    )
    order: list[str] = []
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.brokerd.ask.add("memory")
        h.brokerd.decided = trio.Event()
        opened = await open_session(h.chat)
        async with trio.open_nursery() as both:

            async def turn() -> None:
                await say(h.chat, opened.session, f"remember {SECRET}")
                order.append("turn")

            async def forgetting() -> None:
                await forget(h)
                order.append("forget")

            both.start_soon(turn)
            await h.brokerd.arrived.wait()  # the turn holds its lock, waiting for the owner
            both.start_soon(forgetting)
            await trio.testing.wait_all_tasks_blocked(cushion=0.2)
            h.brokerd.decided.set()
        before = len(model.requests)
        frames = await say(h.chat, opened.session, "what did you save?")
    assert order == ["turn", "forget"]
    assert holders(h.home) == []
    assert sent_after(model.requests, before) == []
    assert frames[-1] == TurnDone(text="Which code?")


async def test_a_busy_session_is_named_and_the_decided_plan_finishes_when_asked_again(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    edit = '{"action": "add", "file": "memory", "text": "UTC, always."}'
    steps = (Step(tool_calls=[("memory", edit)]), Step(text="Proposed."))
    with serve_scripted_model(*steps) as model, trio.fail_after(CAP_S):
        h = await start_harness(nursery, short_dir, model.url)
        h.loopd.settings = dataclasses.replace(h.loopd.settings, forget_wait_s=0.3)
        h.brokerd.ask.add("memory")
        h.brokerd.decided = trio.Event()
        opened = await open_session(h.chat)
        async with trio.open_nursery() as both:

            async def turn() -> None:
                await say(h.chat, opened.session, f"my code is {SECRET}; remember UTC")

            both.start_soon(turn)
            await h.brokerd.arrived.wait()
            with pytest.raises(proto.RemoteError) as refused:
                await forget(h)
            h.brokerd.decided.set()
        plan = h.loopd.forget_part.files.plans.read(PLAN)
        applied = await forget(h, text=None)
    assert refused.value.error.code == "session-busy"
    assert opened.session in refused.value.error.message
    assert SECRET.lower() not in refused.value.error.message.lower()
    assert plan is not None
    assert plan.stage == "committed"
    assert applied.holdings[0] == Holding(
        store="sessions", count=1, unit="messages", names=[opened.session]
    )
    assert holders(h.home) == []
