"""The runtimes: the composite one (with a real memoryd), the refusing one, stricter labels."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import trio

import proto
from brokerd import Settings
from brokerd._arguments import parse_arguments
from brokerd._grants import Grant, load_grants, parse_grant
from brokerd._local_tools import LocalRuntime
from brokerd._runtimes import (
    MEMORYD_GONE,
    MEMORYD_UNREACHABLE,
    REFUSING,
    Approved,
    Auto,
    CompositeRuntime,
    LabelledOutput,
    MemoryRuntime,
    RefusingRuntime,
    RunBy,
    RunOutput,
    RunRequest,
    run_call,
)
from memoryd import Memoryd
from memoryd._config import resolve
from proto import Class, Label, MemorydConfig, PathsSection

CAP_S = 10
KEY = b"k" * proto.KEY_BYTES


APPROVED = Approved(approval="ap-abcdef", surface=proto.Surface(via="bxctl", uid=1000))


def call(
    tool: str, args: dict[str, object], call_id: str = "c1", by: RunBy | None = None
) -> RunRequest:
    return RunRequest(
        session="chat-abcdefghijklmnop",
        call_id=call_id,
        tool=tool,
        arguments=parse_arguments(tool, json.dumps(args)),
        taint=Label(),
        by=by or Auto(),
    )


def builtin(tool: str) -> Grant:
    (found,) = load_grants(Path("/nonexistent")).find(tool)
    return found


@dataclasses.dataclass
class ScriptedRuntime:
    """Answers every call with `output` and remembers what it ran."""

    output: RunOutput
    ran: list[tuple[str, RunBy]] = dataclasses.field(default_factory=list)

    async def check(self, request: RunRequest, grant: Grant) -> RunOutput | None:
        return None

    async def run(self, request: RunRequest, grant: Grant) -> RunOutput:
        self.ran.append((request.tool, request.by))
        return self.output


class BrokenRuntime:
    async def check(self, request: RunRequest, grant: Grant) -> RunOutput | None:
        return None

    async def run(self, request: RunRequest, grant: Grant) -> RunOutput:
        raise RuntimeError("a runtime bug")


PUBLIC = Label(class_=Class.public)
PRIVATE = Label(class_=Class.private)
SECRET_UNTRUSTED = Label(class_=Class.secret, untrusted=True)
PUBLIC_UNTRUSTED = Label(class_=Class.public, untrusted=True)


@pytest.mark.parametrize(
    ("grant_label", "runtime_label", "result"),
    [
        (PRIVATE, None, PRIVATE),
        (PRIVATE, SECRET_UNTRUSTED, SECRET_UNTRUSTED),  # stricter: taken
        (PRIVATE, PUBLIC, PRIVATE),  # laxer: ignored
        (PUBLIC_UNTRUSTED, PRIVATE, Label(class_=Class.private, untrusted=True)),
        (SECRET_UNTRUSTED, PUBLIC, SECRET_UNTRUSTED),
    ],
)
async def test_the_result_label_is_the_stricter_of_grant_and_runtime(
    grant_label: Label, runtime_label: Label | None, result: Label
) -> None:
    grant = dataclasses.replace(
        builtin("recall"), result_class=grant_label.class_, untrusted=grant_label.untrusted
    )
    runtime = ScriptedRuntime(RunOutput("ok", "hits", runtime_label))
    output = await run_call(runtime, call("recall", {"query": "x"}), grant)
    assert output == LabelledOutput("ok", "hits", result)


async def test_a_runtime_that_crashes_answers_an_error() -> None:
    output = await run_call(BrokenRuntime(), call("recall", {"query": "x"}), builtin("recall"))
    assert output == LabelledOutput(
        "error", "recall failed inside brokerd; its log says why", PRIVATE
    )


async def test_the_refusing_runtime_refuses_with_its_sentence() -> None:
    grant = parse_grant(
        "shell",
        b'tool = "shell"\nmode = "auto"\nmax_taint = "secret"\nresult_class = "private"\n'
        b"untrusted = false\n",
    )
    refusing = RefusingRuntime()
    sentence = (
        'this brokerd runs no tools but recall and memory ([runtime] kind = "refusing"); '
        "shell did not run"
    )
    assert REFUSING.format(tool="shell") == sentence
    assert await refusing.check(call("shell", {}), grant) == RunOutput("error", sentence)
    assert await refusing.run(call("shell", {}), grant) == RunOutput("error", sentence)


@pytest.fixture
async def memoryd(nursery: trio.Nursery, short_dir: Path, settings: Settings) -> Memoryd:
    (short_dir / "soul.md").write_text("A test soul.\n")
    config = MemorydConfig(paths=PathsSection(home=str(settings.home)))
    role = Memoryd(resolve(config, config_dir=short_dir))
    role.memory.ensure(role.settings.soul_starter)
    with trio.fail_after(CAP_S):
        await role.start(nursery, trio.Event())
    return role


async def test_the_composite_runtime_sends_memory_calls_to_memoryd(
    memoryd: Memoryd, settings: Settings, approval_key: bytes, tmp_path: Path
) -> None:
    other = ScriptedRuntime(RunOutput("ok", "ran elsewhere"))
    memory = MemoryRuntime(settings.memory_socket, call_timeout_s=CAP_S, approval_key=approval_key)
    composite = CompositeRuntime(memory, other)
    edit = call("memory", {"action": "add", "file": "user", "text": "Owner: Ada."}, by=APPROVED)
    with trio.fail_after(CAP_S):
        assert await composite.check(edit, builtin("memory")) is None
        applied = await run_call(composite, edit, builtin("memory"))
        recalled = await run_call(composite, call("recall", {"query": "Ada"}), builtin("recall"))
        shell = await run_call(composite, call("shell", {}), builtin("recall"))
    assert applied == LabelledOutput(
        "ok",
        "user.md updated (11 of 1,375 characters); it takes effect in the next session.",
        PRIVATE,
    )
    assert memoryd.memory.path("user.md").read_text() == "Owner: Ada."
    assert recalled.status in ("ok", "error")  # memoryd answered (recall is part 2's)
    assert MEMORYD_UNREACHABLE.format(tool="recall") not in recalled.content
    assert shell.content == "ran elsewhere"
    assert other.ran == [("shell", Auto())]


async def test_memoryd_checks_the_approval_brokerd_forwards(
    memoryd: Memoryd, settings: Settings, approval_key: bytes
) -> None:
    runtime = MemoryRuntime(settings.memory_socket, call_timeout_s=CAP_S, approval_key=approval_key)
    edit = call("memory", {"action": "add", "file": "memory", "text": "x"})
    with trio.fail_after(CAP_S):
        output = await runtime.run(edit, builtin("memory"))
    assert output.status == "error"
    assert "need the owner's approval" in output.content
    assert memoryd.memory.path("memory.md").read_text() == ""


@pytest.mark.parametrize("tool", ["recall", "memory"])
async def test_memoryd_unreachable_is_the_fixed_sentence(settings: Settings, tool: str) -> None:
    composite = CompositeRuntime(
        MemoryRuntime(settings.memory_socket, call_timeout_s=CAP_S, approval_key=KEY),
        LocalRuntime(),
    )
    args: dict[str, object] = (
        {"query": "x"} if tool == "recall" else {"action": "add", "file": "user", "text": "y"}
    )
    with trio.fail_after(CAP_S):
        output = await run_call(composite, call(tool, args, by=APPROVED), builtin(tool))
    assert output.status == "error"
    assert output.content == (
        f"memoryd is unreachable, so {tool} did not run; try again later "
        "(runbook: memoryd-unreachable)"
    )


async def test_memoryd_too_slow_is_an_error(nursery: trio.Nursery, short_dir: Path) -> None:
    path = short_dir / "slow.sock"

    async def never_answers(request: proto.Message, conn: proto.Connection) -> proto.Message:
        await trio.sleep_forever()
        raise AssertionError

    await nursery.start(
        lambda task_status: proto.serve_unix(
            proto.BROKER_MEMORY, path, never_answers, shutdown=trio.Event(), task_status=task_status
        )
    )
    runtime = MemoryRuntime(path, call_timeout_s=0.2, approval_key=KEY)
    with trio.fail_after(CAP_S):
        output = await runtime.run(call("recall", {"query": "x"}), builtin("recall"))
    assert output == RunOutput(
        "error",
        "memoryd did not answer recall within 0.2 s; it may still have run "
        "(runbook: memoryd-unreachable)",
    )


async def test_a_memoryd_that_dies_during_a_call_is_named_with_its_runbook(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    # A server that takes the request and closes without a word, as a dying memoryd does.
    path = short_dir / "memory.sock"

    async def hang_up(stream: trio.SocketStream) -> None:
        await proto.read_frame(stream)
        await stream.aclose()

    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(path))
    sock.listen(1)
    nursery.start_soon(trio.serve_listeners, hang_up, [trio.SocketListener(sock)])
    runtime = MemoryRuntime(path, call_timeout_s=5, approval_key=bytes(32))
    [grant] = [g for g in load_grants(short_dir / "no-grants").find("recall")]
    with trio.fail_after(10):
        output = await runtime.run(call("recall", {"query": "x"}), grant)
    assert output.status == "error"
    assert output.content == MEMORYD_GONE.format(tool="recall")
