"""The audit fails closed: a call whose decision cannot be recorded does not run.

Faults are injected where the disk reports them: `os.write`, `os.fsync` and `os.ftruncate`
fail with ENOSPC or EIO for the audit log's file (or the head file, or its temporary file)
only, under a brokerd prepared as `serve` prepares it, its handlers called over memory
streams.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import inmemory
import pytest
import trio
from brokerd_harness import grant, request

import proto
from brokerd import Brokerd, Settings
from brokerd._audit import AUDIT_UNWRITABLE, UNKNOWN_RESULT
from brokerd._config import resolve
from brokerd._outcomes import AUDIT_UNWRITABLE_SENTENCE
from brokerd._runtimes import RunOutput
from proto import (
    ApprovalDecide,
    ApprovalPending,
    AuditVerified,
    AuditVerify,
    BrokerdConfig,
    Ok,
    PathsSection,
    ToolResponse,
)

CAP_S = 10
RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"


class CountingRuntime:
    """Runs every call it is given, by noting it: what ran is what it noted."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def check(self, request: Any, grant: Any) -> RunOutput | None:
        return None

    async def run(self, request: Any, grant: Any) -> RunOutput:
        self.ran.append(request.call_id)
        return RunOutput("ok", f"ran {request.call_id}")


class Faults:
    """Makes `os.write` / `os.fsync` / `os.ftruncate` fail on chosen files, as a full or
    failing disk does."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rules: list[tuple[str, Callable[[str], bool], int, int]] = []
        real_write, real_fsync, real_ftruncate = os.write, os.fsync, os.ftruncate

        def write(fd: int, data: Any) -> int:
            self._check("write", fd)
            return real_write(fd, data)

        def fsync(fd: Any) -> None:
            self._check("fsync", fd if isinstance(fd, int) else fd.fileno())
            real_fsync(fd)

        def ftruncate(fd: int, length: int) -> None:
            self._check("ftruncate", fd)
            real_ftruncate(fd, length)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "ftruncate", ftruncate)

    def fail(self, op: str, target: Callable[[str], bool], code: int, *, after: int = 0) -> None:
        """Fail `op` on files whose path `target` accepts with `code`, after `after` successes."""
        self.rules.append((op, target, code, after))

    def clear(self) -> None:
        self.rules.clear()

    def _check(self, op: str, fd: int) -> None:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return
        for i, (rule_op, target, code, after) in enumerate(self.rules):
            if rule_op == op and target(path):
                if after:
                    self.rules[i] = (rule_op, target, code, after - 1)
                    return
                raise OSError(code, os.strerror(code))


def the_log(path: str) -> bool:
    return path.endswith(".jsonl") and "/audit/" in path


def the_head(path: str) -> bool:
    return path.endswith("/audit/head") or "/audit/.head." in path


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Faults:
    return Faults(monkeypatch)


@pytest.fixture
def settings(short_dir: Path) -> Settings:
    home = short_dir / "home"
    (home / "grants").mkdir(parents=True)
    (home / "grants" / "fake.toml").write_text(grant("fake", "auto"))
    (home / "grants" / "asked.toml").write_text(grant("asked", "ask"))
    (home / "grants" / "never.toml").write_text(grant("never", "deny"))
    return resolve(BrokerdConfig(paths=PathsSection(home=str(home))), config_dir=short_dir)


def prepared(settings: Settings, runtime: CountingRuntime) -> Brokerd:
    role = Brokerd(settings, runtime)
    role.prepare()
    return role


async def answer(role: Brokerd, req: proto.ToolRequest) -> ToolResponse:
    with trio.fail_after(CAP_S):
        frames = await inmemory.answer(proto.LOOP_BROKER, role.handle_loop, req)
    assert len(frames) == 1, frames
    assert isinstance(frames[0], ToolResponse)
    return frames[0]


async def verify(role: Brokerd) -> AuditVerified:
    with trio.fail_after(CAP_S):
        return await inmemory.call(
            proto.OWNER_BROKER, role.handle_owner, AuditVerify(), AuditVerified
        )


def records(settings: Settings) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(settings.audit_dir.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


FAULTS = [
    pytest.param("write", the_log, errno.ENOSPC, id="ENOSPC-write"),
    pytest.param("write", the_log, errno.EIO, id="EIO-write"),
    pytest.param("fsync", the_log, errno.ENOSPC, id="ENOSPC-fsync"),
    pytest.param("fsync", the_log, errno.EIO, id="EIO-fsync"),
    pytest.param("fsync", the_head, errno.EIO, id="EIO-fsync-head"),
]


def refusal(code: int, tool: str) -> str:
    return AUDIT_UNWRITABLE_SENTENCE.format(error=os.strerror(code), tool=tool)


@pytest.mark.parametrize(("op", "target", "code"), FAULTS)
async def test_an_unwritable_decision_refuses_the_call_and_nothing_runs(
    settings: Settings,
    faults: Faults,
    caplog: pytest.LogCaptureFixture,
    op: str,
    target: Callable[[str], bool],
    code: int,
) -> None:
    runtime = CountingRuntime()
    role = prepared(settings, runtime)
    assert (await answer(role, request("fake", {}, call="before"))).status == "ok"
    faults.fail(op, target, code)
    with caplog.at_level(logging.INFO):
        reply = await answer(role, request("fake", {"x": 1}, call="refused"))
    assert (reply.status, reply.content) == ("error", refusal(code, "fake"))
    assert reply.content.endswith(f"(runbook: {AUDIT_UNWRITABLE})")
    assert reply.label == proto.Label()  # brokerd's own words
    assert runtime.ran == ["before"]  # the tool never ran
    assert f"refused: its audit record cannot be written: [Errno {code}]" in caplog.text
    faults.clear()
    # Nothing of the refused call is on record, and the chain goes on intact.
    assert [(r["call"], r["status"]) for r in records(settings)] == [
        ("before", "started"),
        ("before", "ok"),
    ]
    assert await verify(role) == AuditVerified(records=2, ok=True)
    assert (await answer(role, request("fake", {}, call="after"))).status == "ok"
    assert runtime.ran == ["before", "after"]
    assert await verify(role) == AuditVerified(records=4, ok=True)
    # ... and across a restart.
    assert (await verify(prepared(settings, CountingRuntime()))).ok


async def test_a_head_line_that_could_not_be_taken_back_is_not_taken_for_tampering(
    settings: Settings, faults: Faults, caplog: pytest.LogCaptureFixture
) -> None:
    """The new head's fsync fails, and cutting it back fails too: the head on disk is one
    brokerd wrote (whether or not it reached the disk), not one someone changed."""
    runtime = CountingRuntime()
    role = prepared(settings, runtime)
    assert (await answer(role, request("fake", {}, call="before"))).status == "ok"
    faults.fail("fsync", the_head, errno.EIO)
    faults.fail("ftruncate", the_head, errno.EIO)
    reply = await answer(role, request("fake", {}, call="refused"))
    assert (reply.status, reply.content) == ("error", refusal(errno.EIO, "fake"))
    assert runtime.ran == ["before"]
    faults.clear()
    with caplog.at_level(logging.INFO):
        assert (await answer(role, request("fake", {}, call="after"))).status == "ok"
        assert await verify(role) == AuditVerified(records=4, ok=True)
    assert "audit-tampered" not in caplog.text
    assert [r["call"] for r in records(settings)] == ["before", "before", "after", "after"]
    assert (await verify(prepared(settings, CountingRuntime()))).ok


@pytest.mark.parametrize(("op", "target", "code"), FAULTS[:2])
async def test_an_approved_call_is_not_run_either(
    settings: Settings, faults: Faults, op: str, target: Callable[[str], bool], code: int
) -> None:
    runtime = CountingRuntime()
    role = prepared(settings, runtime)
    frames: list[proto.Message] = []
    with trio.fail_after(CAP_S):
        async with inmemory.open_exchange(
            proto.LOOP_BROKER, role.handle_loop, request("asked", {})
        ) as conversation:
            notice = await conversation.receive()
            assert isinstance(notice, ApprovalPending)
            faults.fail(op, target, code)
            decide = ApprovalDecide(id=notice.approval.id, approve=True)
            await inmemory.call(proto.OWNER_BROKER, role.handle_owner, decide, Ok)
            frames = [frame async for frame in conversation]
    (reply,) = frames
    assert isinstance(reply, ToolResponse)
    assert (reply.status, reply.content) == ("error", refusal(code, "asked"))
    assert runtime.ran == []
    faults.clear()
    assert records(settings) == []
    assert await verify(role) == AuditVerified(records=0, ok=True)


async def test_a_denial_is_still_answered_when_it_cannot_be_recorded(
    settings: Settings, faults: Faults, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing runs, so there is nothing to refuse: the model reads the denial."""
    role = prepared(settings, CountingRuntime())
    faults.fail("write", the_log, errno.ENOSPC)
    reply = await answer(role, request("never", {}))
    assert (reply.status, reply.content) == ("denied", "the grant never denies never")
    assert "could not be written" in caplog.text
    faults.clear()
    assert await verify(role) == AuditVerified(records=0, ok=True)


async def test_an_unwritable_outcome_is_logged_and_the_answer_goes_out(
    settings: Settings, faults: Faults, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = CountingRuntime()
    role = prepared(settings, runtime)
    faults.fail("write", the_log, errno.EIO, after=1)  # the decision is written, not the outcome
    reply = await answer(role, request("fake", {}, call="ran"))
    assert (reply.status, reply.content) == ("ok", "ran ran")
    assert runtime.ran == ["ran"]
    assert (
        "the audit record of the outcome of call ran could not be written: [Errno 5] "
        "Input/output error (runbook: audit-unwritable)"
    ) in caplog.text
    faults.clear()
    assert [(r["call"], r["status"]) for r in records(settings)] == [("ran", "started")]
    assert await verify(role) == AuditVerified(records=1, ok=True)
    # After a restart the session counts as having been sent the worst: its outcome is
    # not on record, and the answer went out.
    again = prepared(settings, CountingRuntime())
    assert again.decider.returned == {request("fake", {}).session: UNKNOWN_RESULT}


async def test_an_outcome_that_cannot_be_made_durable_after_its_answer_is_taken_back(
    settings: Settings, faults: Faults, caplog: pytest.LogCaptureFixture
) -> None:
    """An outcome's fsync follows its answer (issue 22); when it fails, the outcome is not
    on record, and the session counts as sent the worst, as when the write fails."""
    runtime = CountingRuntime()
    role = prepared(settings, runtime)
    faults.fail("fsync", the_log, errno.EIO, after=1)  # the decision's fsync, not the outcome's
    with trio.fail_after(CAP_S):
        async with trio.open_nursery() as nursery:
            role.audit.flush_in(nursery)
            reply = await answer(role, request("fake", {}, call="ran"))
            assert (reply.status, reply.content) == ("ok", "ran ran")
    assert runtime.ran == ["ran"]
    assert "audit records could not be made durable and were taken back" in caplog.text
    assert "(runbook: audit-unwritable)" in caplog.text
    faults.clear()
    assert [(r["call"], r["status"]) for r in records(settings)] == [("ran", "started")]
    assert await verify(role) == AuditVerified(records=1, ok=True)
    again = prepared(settings, CountingRuntime())
    assert again.decider.returned == {request("fake", {}).session: UNKNOWN_RESULT}
    assert (await verify(again)).ok


class StuckRuntime(CountingRuntime):
    async def run(self, request: Any, grant: Any) -> RunOutput:
        self.ran.append(request.call_id)
        await trio.sleep_forever()
        raise AssertionError


async def test_a_call_cut_off_by_shutdown_gets_its_outcome_recorded(settings: Settings) -> None:
    """No `started` record is left without its outcome by a clean stop."""
    runtime = StuckRuntime()
    role = prepared(settings, runtime)
    with trio.move_on_after(0.5):
        await inmemory.answer(proto.LOOP_BROKER, role.handle_loop, request("fake", {}, call="c"))
    assert runtime.ran == ["c"]
    assert [(r["status"], r.get("reason")) for r in records(settings)] == [
        ("started", None),
        ("error", "brokerd stopped before fake finished; it may have run in part"),
    ]
    assert await verify(role) == AuditVerified(records=2, ok=True)


def test_the_runbook_explains_the_refusal() -> None:
    text = RUNBOOK.read_text()
    assert f"\n## {AUDIT_UNWRITABLE}\n" in text
    entry = text.split(f"\n## {AUDIT_UNWRITABLE}\n", 1)[1].split("\n## ", 1)[0]
    assert "did not run" in entry
    assert "No space left on device" in entry
