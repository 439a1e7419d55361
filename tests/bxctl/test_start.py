"""bxctl's start (issue 22): what a one-request command imports, and its quick route.

The start time itself is measured by `just bench cli`; these tests keep what makes it
fast: which modules a process loads (not how long they take), and that the quick
route, which skips cyclopts, runs exactly what cyclopts would.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
import trio
from bxctl_run import serve, write_session
from hypothesis import example, given
from hypothesis import strategies as st

import proto
from bxctl import _quick, app
from proto import Label, Message, PendingApproval

CAP_S = 30

NOT_FOR_ONE_REQUEST = {"cyclopts", "attr", "attrs", "rich", "httpx", "prompt_toolkit", "trio"}
"""What the quick commands never load: the parser, the terminal UI, HTTP, the event loop."""

NOT_FOR_HELP = NOT_FOR_ONE_REQUEST | {"msgspec", "proto", "entries"}


# -- the quick route runs what cyclopts runs ----------------------------------------------


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[str, tuple[object, ...], dict[str, object]]]]:
    """Each `_quick` command replaced by one that notes how it was called."""
    seen: list[tuple[str, tuple[object, ...], dict[str, object]]] = []

    def recorder(name: str) -> Callable[..., int]:
        def record(*args: object, **kwargs: object) -> int:
            seen.append((name, args, kwargs))
            return 0

        return record

    with contextlib.ExitStack() as stack:
        for quick in _quick.QUICK.values():
            name = quick.command.__name__
            stack.enter_context(mock.patch.object(_quick, name, recorder(name)))
        yield seen


PLAIN = [
    ["memory", "show"],
    ["approvals", "list"],
    ["approvals", "list", "--json"],
    ["sessions", "list"],
    ["sessions", "list", "--json"],
    ["recall", "Heron", "launch"],
    ["recall", "a=b", "x y", "memory", "show", "", " "],
]


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_the_plain_forms_take_the_quick_route(argv: list[str]) -> None:
    assert _quick.route(argv) is not None


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["memory"],
        ["memory", "show", "--help"],
        ["memory", "history"],
        ["approvals", "list", "--json", "--json"],
        ["approvals", "list", "--no-json"],
        ["sessions", "list", "-h"],
        ["recall"],
        ["recall", "Heron", "-k", "3"],
        ["recall", "--", "-x"],
        ["--version"],
    ],
    ids=" ".join,
)
def test_anything_else_goes_to_cyclopts(argv: list[str]) -> None:
    assert _quick.route(argv) is None


TOKENS = st.one_of(
    st.sampled_from(["--json", "-k", "3", "--", "-h", "--help", "", " ", "list", "show", "-"]),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=6),  # bxctl refuses Cs
)
HEADS = st.sampled_from([list(head) for head in _quick.QUICK])


def test_every_quick_command_is_a_cyclopts_command_calling_the_same_function() -> None:
    for head, quick in _quick.QUICK.items():
        argv = [*head, "word"] if quick.words else list(head)
        routed = _quick.route(argv)
        assert routed is not None, head
        with recording() as seen:
            app(argv, result_action="return_value")
        assert seen == [(quick.command.__name__, routed.args, routed.kwargs)], head


@given(head=HEADS, rest=st.lists(TOKENS, max_size=4))
@example(head=["recall"], rest=["Heron", "launch"])
def test_the_quick_route_calls_what_cyclopts_calls(head: list[str], rest: list[str]) -> None:
    argv = head + rest
    call = _quick.route(argv)
    if call is None:
        return  # cyclopts parses it, as before
    with recording() as seen:
        assert app(argv, result_action="return_value") == 0
    assert seen == [(call.command.__name__, call.args, call.kwargs)]


# -- what a process loads -------------------------------------------------------------


def imported(stderr: str) -> set[str]:
    """The top-level packages `python -X importtime` says a process imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and not line.endswith("imported package"):
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


async def bxctl_importtime(*args: str) -> tuple[str, set[str]]:
    """`bxctl ARGS` as a process: its output, and what it imported."""
    env = {k: v for k, v in os.environ.items() if k != "BOXMAKER_HOME"}
    with trio.fail_after(CAP_S):
        done = await trio.run_process(
            [sys.executable, "-X", "importtime", "-m", "bxctl", *args],
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    return done.stdout.decode(), imported(stderr)


async def test_the_quick_commands_load_no_parser_ui_http_or_event_loop(
    nursery: trio.Nursery, short_dir: Path
) -> None:
    pending = PendingApproval(
        id="ap-k3f9",
        session="chat-abcdefgh",
        call_id="call_1",
        tool="memory",
        arguments='{"action":"add","text":"prefers UTC"}',
        taint=Label(untrusted=True),
        time="2026-11-30T08:00:00Z",
    )

    async def memoryd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.MemoryBlock):
            return proto.MemoryBlockReply(text="# memory.md\nprefers UTC")
        assert isinstance(request, proto.OwnerRecall)
        return proto.OwnerRecalled(hits=[], label=Label())

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        assert isinstance(request, proto.ApprovalsList)
        return proto.Approvals(pending=[pending])

    await serve(nursery, short_dir, proto.LOOP_MEMORY, memoryd)
    await serve(nursery, short_dir, proto.OWNER_MEMORY, memoryd)
    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    write_session(short_dir, "chat-abcdefghij", created="t")
    home = ["--home", str(short_dir)]
    for argv, shown in (
        (["memory", "show"], "prefers UTC"),
        (["recall", "Heron"], "no matches for Heron"),
        (["approvals", "list"], "approval ap-k3f9: memory in session chat-abcdefgh"),
        (["approvals", "list", "--json"], '"id": "ap-k3f9"'),
        (["sessions", "list"], "chat-abcdefghij"),
    ):
        out, modules = await bxctl_importtime(*argv, *home)
        assert shown in out, argv
        assert not modules & NOT_FOR_ONE_REQUEST, argv


async def test_the_root_help_loads_no_parser_or_protocol() -> None:
    out, modules = await bxctl_importtime("--help")
    assert out.startswith("Usage: bxctl COMMAND")
    assert not modules & NOT_FOR_HELP
