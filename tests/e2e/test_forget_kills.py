"""A role killed at each step of a forget, a day passing, a restart: the forget ends as decided.

Real roles as processes in a real home. Between brokerd and each role's broker socket
sits a relay (brokerd's `[memory] socket` and `[loop] socket` point at it) that passes
every frame on and stops at one step of the forget: a role's prepare or apply, just
before the role gets it or just after it answered. There the test kills a role
(SIGKILL), moves every forget file under the home a day into the past (nothing may decide
a plan's fate by its age), and starts what it killed again, as `bxctl up` would.

Then: a forget decided before the kill finishes by itself, no file holds the text, the
audit log verifies and records the forget; one killed before its decision is aborted
everywhere and holds nothing back from being given again; no plan is left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from scripted_model import Step
from stack import Stack, files_holding, open_session, running_stack, say

import proto

CAP_S = 90
SECRET = "ZEBRA-7731"
ME = proto.Surface(via="bxctl", uid=os.getuid())
FORGET_DIRS = ("memory/.forget", "sessions/.forget", "audit/.forget")


@dataclass
class Stop:
    """Where the relay stops: a role's request of a kind, before it gets it or once it answered."""

    kind: str
    when: str
    then: Callable[[], Awaitable[None]]
    reached: trio.Event


class Relay:
    """brokerd's way to one role's broker socket, passing every frame, stopping once at `stop`."""

    def __init__(self, spec: proto.Socket[Any], listen: Path, target: Path) -> None:
        self.spec = spec
        self.listen = listen
        self.target = target
        self.stop: Stop | None = None

    async def serve(self, nursery: trio.Nursery, shutdown: trio.Event) -> None:
        await nursery.start(
            lambda task_status: proto.serve_unix(
                self.spec, self.listen, self.handle, shutdown=shutdown, task_status=task_status
            )
        )

    async def handle(self, request: proto.Message, conn: proto.Connection) -> proto.Message:
        kind = str(request.__struct_config__.tag)
        await self._stop_at(kind, "before")
        try:
            reply = await proto.call(self.target, request, proto.Message, deadline_s=CAP_S)
        except proto.RemoteError as exc:
            raise proto.ServiceError(exc.error.code, exc.error.message, exc.error.runbook) from None
        except proto.Unreachable as exc:
            raise proto.ServiceError("unreachable", str(exc)) from None
        except proto.CallFailed as exc:
            raise proto.ServiceError("broken", str(exc)) from None
        await self._stop_at(kind, "after")
        return reply

    async def _stop_at(self, kind: str, when: str) -> None:
        stop = self.stop
        if stop is None or (stop.kind, stop.when) != (kind, when):
            return
        self.stop = None
        stop.reached.set()
        await stop.then()
        # what brokerd sees of a role that died under its request
        raise proto.ServiceError("broken", "the connection broke (the role was killed)")


def age_a_day(home: Path) -> None:
    """Every forget file under the home as if written a day earlier."""
    then = time.time() - 86400
    for directory in FORGET_DIRS:
        for path in (home / directory).glob("*"):
            os.utime(path, (then, then))


def plans_left(home: Path) -> list[Path]:
    """Plans and ledgers anywhere (each part's `ended.jsonl` stays: it is no plan)."""
    return [p for d in FORGET_DIRS for p in (home / d).glob("fg-*")]


@pytest.fixture
def relayed(short_dir: Path) -> Iterator[Stack]:
    with running_stack(short_dir) as stack:
        config = stack.home / "config" / "brokerd.toml"
        text = config.read_text()
        for section, name in (("[memory]", "r-memory.sock"), ("[loop]", "r-loop.sock")):
            text = text.replace(section, f'{section}\nsocket = "{short_dir / name}"', 1)
        config.write_text(text)
        stack.restart("brokerd")
        yield stack


def kill(stack: Stack, role: str) -> None:
    os.kill(stack.processes[role].process.pid, signal.SIGKILL)
    stack.processes.pop(role).kill()  # reaped


async def restart(stack: Stack, *roles: str) -> None:
    for role in roles:
        await trio.to_thread.run_sync(stack.start, role)


async def tell_it(stack: Stack) -> None:
    """The secret in memory.md, the journal, the audit log, a session (log, baseline), the index."""
    with trio.fail_after(CAP_S):
        await proto.call(
            stack.socket(proto.OWNER_BROKER),
            proto.MemoryEdit(
                arguments=f'{{"action": "add", "file": "memory", "text": "Locker: {SECRET}"}}',
                surface=ME,
            ),
            proto.ToolResponse,
        )
    session = await open_session(stack)
    stack.script(Step(text=f"Noted: {SECRET.lower()}."))
    await say(stack, session, f"my locker code is {SECRET}")
    assert len(files_holding(stack.home, SECRET)) >= 5


async def forget(stack: Stack) -> proto.Forgotten | None:
    """The owner's forget; None when brokerd died under it."""
    with trio.fail_after(CAP_S), contextlib.suppress(proto.CallBroken, proto.NoReply):
        return await proto.call(
            stack.socket(proto.OWNER_BROKER),
            proto.Forget(text=SECRET, surface=ME),
            proto.Forgotten,
            deadline_s=CAP_S,
        )
    return None


async def settled(stack: Stack) -> None:
    """Wait until brokerd has no forget in flight (its ledgers gone)."""
    with trio.fail_after(CAP_S):
        while list((stack.home / "audit/.forget").glob("*.ledger.json")):  # noqa: ASYNC110 (another process's files)
            await trio.sleep(0.1)


async def audit_says(stack: Stack) -> proto.AuditVerified:
    with trio.fail_after(CAP_S):
        return await proto.call(
            stack.socket(proto.OWNER_BROKER), proto.AuditVerify(), proto.AuditVerified
        )


STEPS = [
    (role, kind, when)
    for role in ("memoryd", "loopd")
    for kind in ("forget_prepare", "forget_apply")
    for when in ("before", "after")
]


@pytest.mark.parametrize(("role", "kind", "when"), STEPS)
async def test_a_role_killed_at_a_step_is_waited_for_and_the_forget_finishes(
    relayed: Stack, short_dir: Path, role: str, kind: str, when: str
) -> None:
    stack = relayed

    async def killed_a_day_then_back() -> None:
        kill(stack, role)
        age_a_day(stack.home)
        await restart(stack, role)

    async with relaying(stack, short_dir) as relays:
        await tell_it(stack)
        relays[role].stop = Stop(kind, when, killed_a_day_then_back, trio.Event())
        forgotten = await forget(stack)
    assert relays[role].stop is None, "the step was reached"
    assert forgotten is not None
    assert (forgotten.left, forgotten.lost, forgotten.conflicts) == ([], [], [])
    await settled(stack)
    assert files_holding(stack.home, SECRET) == []
    assert plans_left(stack.home) == []
    verified = await audit_says(stack)
    assert verified.ok, verified.broken_at
    assert [f.plan for f in verified.forgets] == [forgotten.plan]


BROKERD_STEPS = [
    ("memoryd", "forget_prepare", "after", False),  # not decided yet: aborted at start
    ("memoryd", "forget_apply", "before", True),  # decided, nothing applied
    ("loopd", "forget_apply", "before", True),  # memoryd applied
    ("loopd", "forget_apply", "after", True),  # memoryd and loopd applied, the audit not
]


@pytest.mark.parametrize(("relay_of", "kind", "when", "decided"), BROKERD_STEPS)
async def test_brokerd_killed_at_a_step_then_a_day_down_ends_the_forget_as_decided(
    relayed: Stack, short_dir: Path, relay_of: str, kind: str, when: str, decided: bool
) -> None:
    stack = relayed

    async def power_cut() -> None:  # brokerd first, then the others: a day down
        for role in ("brokerd", "memoryd", "loopd"):
            kill(stack, role)

    async with relaying(stack, short_dir) as relays:
        await tell_it(stack)
        relays[relay_of].stop = Stop(kind, when, power_cut, trio.Event())
        assert await forget(stack) is None  # the owner sees the connection break
        assert relays[relay_of].stop is None, "the step was reached"
        age_a_day(stack.home)
        await restart(stack, "memoryd", "loopd", "brokerd")
        await settled(stack)
        verified = await audit_says(stack)
        assert verified.ok, verified.broken_at
        assert plans_left(stack.home) == []
        if decided:
            assert files_holding(stack.home, SECRET) == []
            assert len(verified.forgets) == 1
        else:  # never decided: nothing was forgotten, and nothing says so; asked again
            assert len(files_holding(stack.home, SECRET)) >= 5
            assert verified.forgets == []
            again = await forget(stack)
            assert again is not None
            assert again.left == []
            assert files_holding(stack.home, SECRET) == []
    stack.script(Step(text="back"))
    await say(stack, await open_session(stack), "still there?")


@contextlib.asynccontextmanager
async def relaying(stack: Stack, short_dir: Path) -> AsyncIterator[dict[str, Relay]]:
    """The relays between brokerd and memoryd's and loopd's broker sockets, serving."""
    relays = {
        "memoryd": Relay(
            proto.BROKER_MEMORY, short_dir / "r-memory.sock", stack.socket(proto.BROKER_MEMORY)
        ),
        "loopd": Relay(
            proto.BROKER_LOOP, short_dir / "r-loop.sock", stack.socket(proto.BROKER_LOOP)
        ),
    }
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        for relay in relays.values():
            await relay.serve(nursery, shutdown)
        yield relays
        shutdown.set()
