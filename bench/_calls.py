"""`just bench turn`'s tool-call turns: one owner's message, ten calls of a trivial auto tool.

The model (bench/turn.py's instant server) answers a message starting with `CALLS_MARK`
with a `call_tool` of `list_dir` on an empty folder, then, after each result, another
one, until `CALLS` results follow the owner's message; then a text answer. Each call is a
model reply of its own, as an agent's calls usually are, so loopd runs them one after
another. brokerd decides each under an `auto` grant made for the bench, audits it (a
`started` record before the call runs, its outcome after), runs it in its local runtime
and answers.

A call's own overhead is timed by the chat client, as the owner's terminal sees it: from
the `tool_called` event to the `tool_result` event (loopd asks brokerd, brokerd decides,
audits, runs and audits, loopd appends the result to the session's log and tells the
client), minus the tool's own work (`os.listdir` of the same empty folder, timed here).
Printed beside it, in the same run: brokerd's part alone (a `list_dir` request on the
loop-broker socket), the bare costs of the run (a Unix-socket round trip, an fsync) and
the floor those make: a round trip and the fsyncs the rules ask for.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

import proto
from proto import Label, Say, ToolCall, ToolRequest, ToolResponse

CALLS = 10
"""Tool calls in a tool-call turn."""
CALLS_MARK = "(tools) "
"""How the owner's message tells the model to make `CALLS` calls first."""
TARGET_CALL_P50_MS = 3.0
TARGET_CALL_P99_MS = 6.0
FLOOR_FSYNCS = 3
"""The fsyncs a call must wait for: brokerd's `started` record and its head before the
call runs, and loopd's `tool_result` record before the owner's client is told."""
_json = msgspec.json.Encoder()


def grant(folder: Path) -> str:
    """An `auto` grant of `list_dir` inside `folder` (bench-made: the home's own are `ask`)."""
    return (
        "# made by just bench turn: list the bench's empty folder without asking\n"
        'tool = "list_dir"\nmode = "auto"\nmax_taint = "private"\n'
        'result_class = "private"\nuntrusted = false\n'
        f"[constraints]\npaths = [{_json.encode(str(folder) + '/**').decode()}]\n"
    )


def calls_made(body: bytes) -> int | None:
    """In a request of a tool-call turn, how many results follow the owner's message; else None.

    `messages` comes last in loopd's body, so the owner's last message is near the end.
    """
    owner = body.rfind(b'"role":"user"')
    if owner < 0 or not body.startswith(b'"role":"user","content":"' + CALLS_MARK.encode(), owner):
        return None
    return body.count(b'"role":"tool"', owner)


def call_event(folder: Path) -> dict[str, object]:
    """The streamed delta of one `call_tool` of `list_dir` on `folder`."""
    arguments = _json.encode({"name": "list_dir", "arguments": {"path": str(folder)}}).decode()
    call = {
        "index": 0,
        "id": "call_0",
        "type": "function",
        "function": {"name": "call_tool", "arguments": arguments},
    }
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


@dataclass
class CallTimes:
    """Per call: the chat client's `tool_called` → `tool_result` time, in seconds."""

    calls: list[float] = field(default_factory=list)
    turns: list[float] = field(default_factory=list)
    """Whole tool-call turns: wall time minus the model's."""
    broker: list[float] = field(default_factory=list)
    """brokerd's part: a `list_dir` request on the loop-broker socket, alone."""
    tool: list[float] = field(default_factory=list)
    """The tool's own work: `os.listdir` of the folder."""
    cpu: dict[str, list[float]] = field(default_factory=dict)
    """Per role, its CPU time in each tool-call turn."""


async def say_calls(chat: Path, session: str, text: str, times: CallTimes) -> float:
    """Say a tool-call turn; note each call's time; return the turn's wall time."""
    started = time.perf_counter()
    called: dict[str, float] = {}
    async with proto.open_call(chat, Say(session=session, text=CALLS_MARK + text)) as call:
        while True:
            frame = await call.receive()
            now = time.perf_counter()
            match frame:
                case proto.ToolCalled(call=tool):
                    called[tool.id] = now
                case proto.ToolResult(call=tool, status=status, content=content):
                    if status != "ok":
                        raise SystemExit(f"the bench's list_dir failed: {status}: {content}")
                    times.calls.append(now - called.pop(tool.id))
                case proto.TurnDone():
                    if len(called) or not times.calls:
                        raise SystemExit("a tool-call turn ended without its results")
                    return now - started
                case proto.Error(code=code, message=message):
                    raise SystemExit(f"the turn failed: {code}: {message}")
                case _:
                    pass


async def broker_leg(loop_broker: Path, session: str, folder: Path, n: int) -> float:
    """brokerd's part of one call alone: a `list_dir` request on the loop-broker socket."""
    arguments = _json.encode({"path": str(folder)}).decode()
    request = ToolRequest(
        session=session,
        call=ToolCall(id=f"bench-list-{n}", name="list_dir", arguments=arguments),
        taint=Label(),
    )
    started = time.perf_counter()
    answer = await proto.call(loop_broker, request, ToolResponse)
    spent = time.perf_counter() - started
    if answer.status != "ok":
        raise SystemExit(f"brokerd's list_dir failed: {answer.status}: {answer.content}")
    return spent


def tool_work(folder: Path) -> float:
    """The tool's own work, as the local runtime does it at least: list the folder."""
    started = time.perf_counter()
    os.listdir(folder)
    return time.perf_counter() - started


def report(
    times: CallTimes, plain_p50: float, bare: dict[str, list[float]], pct: Callable[..., float]
) -> None:
    """Print the per-call figures beside their floor and the issue's targets."""

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:6.2f}"

    tool = pct(times.tool, 0.5)
    own = [c - tool for c in times.calls]
    floor = pct(bare["bare socket"], 0.5) + FLOOR_FSYNCS * pct(bare["bare fsync"], 0.5)
    per_call = (pct(times.turns, 0.5) - plain_p50) / CALLS
    print(
        f"tool calls: {len(times.turns)} turns of {CALLS} calls of list_dir (auto), one per "
        "model reply; ms, p50 p99"
    )
    print(f"  {'a call (tool_called → tool_result)':<40} {ms(pct(own, 0.5))} {ms(pct(own, 0.99))}")
    print(
        f"  {'  brokerd alone (loop-broker socket)':<40} "
        f"{ms(pct(times.broker, 0.5))} {ms(pct(times.broker, 0.99))}"
    )
    print(f"  {'  the tool itself (listdir)':<40} {ms(tool)}")
    print(
        f"  {'a turn of 10 calls, minus a plain turn':<40} "
        f"{ms(pct(times.turns, 0.5) - plain_p50)}   ({ms(per_call)} a call, with its model reply)"
    )
    for role, spent in times.cpu.items():
        print(
            f"  {'  CPU of ' + role + ' per call (p50 turn)':<40} {ms(pct(spent, 0.5) / CALLS)}"
            "   (the turn's model replies included)"
        )
    print(
        f"  {'floor: a round trip and ' + str(FLOOR_FSYNCS) + ' fsyncs':<40} {ms(floor)}"
        "   (bare figures of this run)"
    )
    for title, value, target in (
        ("a call's overhead p50", pct(own, 0.5), TARGET_CALL_P50_MS),
        ("a call's overhead p99", pct(own, 0.99), TARGET_CALL_P99_MS),
    ):
        verdict = "holds" if value * 1000 <= target else "MISSED"
        print(f"  {title:<28} {value * 1000:6.2f} ms   target <= {target:g} ms: {verdict}")
