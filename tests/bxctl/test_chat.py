"""`bxctl chat` in-process, against a test double of loopd (and brokerd) on real sockets.

What needs a real terminal (line editing, history, Ctrl-C as a key) is in
`test_chat_terminal.py`; here stdin is not a terminal, as for a script.
"""

from __future__ import annotations

import io
import queue
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from bxctl_run import Handler, serve
from scripted_model import Step, serve_scripted_model
from stack import running_stack

import proto
from bxctl import app
from bxctl._chat import decision, resume_hint
from bxctl._common import CommandError, failure_sentence
from proto import (
    ApprovalDecide,
    ApprovalPending,
    AssistantText,
    Label,
    Message,
    Ok,
    PendingApproval,
    Say,
    SessionOpened,
    TurnDone,
)

CAP_S = 20
SESSION = "chat-abcdefghijkl"


async def run(*argv: str) -> object:
    with trio.fail_after(CAP_S):
        return await app.run_async(list(argv), result_action="return_value")


def opening(request: Message, *, created: bool = True, home: Path | None = None) -> Message | None:
    """The answers to what `bxctl chat` asks before a turn (None for a `say`).

    With `home`, a `say` writes the session's baseline there, as loopd does at a
    session's first message (the chat's hint to go on names only a written session).
    """
    if isinstance(request, proto.SessionOpen):
        return SessionOpened(session=SESSION, created=created)
    if isinstance(request, proto.BaselinePreview):
        raise proto.ServiceError("internal", "no preview here")  # no model hint
    assert isinstance(request, proto.Say)
    if home is not None:
        (home / "sessions" / SESSION).mkdir(parents=True, exist_ok=True)
        (home / "sessions" / SESSION / proto.BASELINE_FILE).write_bytes(b"{}")
    return None


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("y", (True, None)),
        ("Yes ", (True, None)),
        ("", (False, None)),
        ("n", (False, None)),
        ("NO", (False, None)),
        ("  not today ", (False, "not today")),
        ("yes, but only memory.md", (False, "yes, but only memory.md")),
    ],
)
def test_an_approval_answer_is_y_n_or_a_reason_to_deny(
    answer: str, expected: tuple[bool, str | None]
) -> None:
    assert decision(answer) == expected


def test_the_resume_hint_names_the_home_only_when_one_was_given() -> None:
    assert (
        resume_hint(SESSION, None) == f"to go on with this session: bxctl chat --session {SESSION}"
    )
    hint = resume_hint(SESSION, Path("/tmp/my home"))
    assert hint.endswith(f"bxctl chat --session {SESSION} --home '/tmp/my home'")


async def test_the_demo_note_is_shown_once_per_session(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (short_dir / "config").mkdir(exist_ok=True)
    (short_dir / "config" / "loopd.toml").write_text('[model]\nurl = "embedded"\n')
    opened: list[bool] = []

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        answer = opening(request, created=not opened)
        if isinstance(answer, SessionOpened):
            opened.append(answer.created)
        return answer or TurnDone(text="hi")

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    assert await run("chat", "-m", "one", "--home", str(short_dir)) == 0
    first = capsys.readouterr().err
    (short_dir / "sessions" / SESSION).mkdir(parents=True)  # what the real loopd made
    (short_dir / "sessions" / SESSION / proto.BASELINE_FILE).write_bytes(b"{}")
    assert await run("chat", "--session", SESSION, "-m", "two", "--home", str(short_dir)) == 0
    second = capsys.readouterr().err
    assert opened == [True, False]
    assert "note: this is the embedded demo model" in first
    assert "resumed session" in second
    assert "demo model" not in second


def tea_approval(*, taint: Label) -> PendingApproval:
    """A memory edit of the session waiting for the owner."""
    return PendingApproval(
        id="ap-k3f9xy",
        session=SESSION,
        call_id="call_1",
        tool="memory",
        arguments='{"action":"add","file":"user","text":"likes tea"}',
        taint=taint,
        time="2026-11-30T00:00:00Z",
    )


async def test_a_reason_typed_at_the_approval_denies_with_it(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    approval = tea_approval(taint=Label(untrusted=True))
    decided = trio.Event()
    decisions: list[ApprovalDecide] = []

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if answer := opening(request, home=short_dir):
            return answer
        await conn.send(ApprovalPending(approval=approval))
        await decided.wait()
        await conn.send(AssistantText(text="As you wish."))
        return TurnDone(text="As you wish.")

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        assert isinstance(request, ApprovalDecide)
        decisions.append(request)
        decided.set()
        return Ok()

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    monkeypatch.setattr(sys, "stdin", piped(b"remember\nnot today\n"))
    assert await run("chat", "--home", str(short_dir)) == 0
    out, err = capsys.readouterr()
    assert decisions == [ApprovalDecide(id="ap-k3f9xy", approve=False, reason="not today")]
    assert "  ! this session has seen untrusted content\n" in out
    assert '    {"action":"add","file":"user","text":"likes tea"}\n' in out
    assert "approve? [y/N, e to edit, or a reason to deny] " in out
    assert "  denied ap-k3f9xy (not today)\n" in out
    assert "As you wish." in out
    assert err.endswith(
        f"\nto go on with this session: bxctl chat --session {SESSION} --home {short_dir}\n"
    )


def piped(data: bytes) -> io.TextIOWrapper:
    """A standard input that is a pipe holding `data`."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


class SlowStdin:
    """A standard input (not a terminal) whose lines come when the test types them."""

    def __init__(self) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self.buffer = self  # bxctl reads the bytes

    def type(self, line: str) -> None:
        self._lines.put(line)

    def readline(self) -> bytes:
        return self._lines.get().encode()

    def isatty(self) -> bool:
        return False


@pytest.fixture
def slow_stdin(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowStdin]:
    stdin = SlowStdin()
    monkeypatch.setattr(sys, "stdin", stdin)
    try:
        yield stdin
    finally:
        stdin.type("")  # the end: a reader thread still waiting returns


async def test_ctrl_c_cancels_the_turn_and_the_chat_goes_on(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    slow_stdin: SlowStdin,
) -> None:
    turns: list[str] = []
    waiting = trio.Event()
    left = trio.Event()
    again = trio.Event()

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if answer := opening(request, home=short_dir):
            return answer
        assert isinstance(request, proto.Say)
        turns.append(request.text)
        if len(turns) == 1:
            await conn.send(AssistantText(text="Once upon a"))
            waiting.set()
            await conn.wait_peer_gone()  # loopd cancels the turn when its client leaves
            left.set()
            return TurnDone(text="never read")
        again.set()
        return TurnDone(text="here")

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    slow_stdin.type("a story\n")
    async with trio.open_nursery() as chat:
        chat.start_soon(run, "chat", "--home", str(short_dir))
        await waiting.wait()
        signal.raise_signal(signal.SIGINT)  # Ctrl-C
        await left.wait()
        slow_stdin.type("still there?\n")
        await again.wait()
        await trio.testing.wait_all_tasks_blocked()  # the answer shown, the prompt waiting
        signal.raise_signal(signal.SIGINT)  # Ctrl-C at the prompt: leave
    assert turns == ["a story", "still there?"]
    out, err = capsys.readouterr()
    assert "Once upon a\n(turn cancelled; what was said is kept." in out
    assert "to go on with this session: bxctl chat --session" in err


async def test_a_refused_call_says_its_status_once_and_a_broken_turn_says_what_to_do(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = proto.ToolCall(id="c1", name="memory", arguments="{}")

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if answer := opening(request):
            return answer
        await conn.send(proto.ToolCalled(call=call))
        denied = "denied: the owner denied this call"
        await conn.send(
            proto.ToolResult(call=call, status="denied", content=denied, label=proto.Label())
        )
        stream = conn._stream  # then loopd dies in the middle of a frame
        await stream.send_all(b"\x00\x00\x00\x09{bad")
        await stream.aclose()
        return TurnDone(text="never sent")

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    with pytest.raises(CommandError) as broke:
        await run("chat", "-m", "hi", "--home", str(short_dir))
    captured = capsys.readouterr()
    assert "  ← denied: the owner denied this call\n" in captured.out
    assert "denied: denied" not in captured.out
    said = str(broke.value)
    assert said.startswith("the connection to loopd broke during the turn")
    assert f"bxctl sessions show {SESSION} --home {short_dir}" in said
    assert "Error" not in said  # no exception class names


async def test_a_turn_whose_loopd_was_killed_between_frames_says_what_to_do(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a SIGKILLed loopd: the kernel closes its socket, the client reads a clean end
    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if answer := opening(request):
            return answer
        await conn.send(proto.AssistantText(text="Once upon"))
        await conn._stream.aclose()
        return TurnDone(text="never sent")

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    assert await run("chat", "-m", "hi", "--home", str(short_dir)) == 1
    said = capsys.readouterr().out
    assert "Once upon" in said
    assert "error: the connection to loopd broke during the turn" in said
    assert f"bxctl sessions show {SESSION} --home {short_dir}" in said


async def test_a_line_that_is_not_utf8_is_not_sent_and_the_chat_goes_on(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said: list[str] = []

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if answer := opening(request):
            return answer
        assert isinstance(request, proto.Say)
        said.append(request.text)
        return TurnDone(text="ok")

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    monkeypatch.setattr(sys, "stdin", piped(b"caf\xe9 au lait\nna\xc3\xafve\n"))  # Latin-1, UTF-8
    assert await run("chat", "--home", str(short_dir)) == 0
    err = capsys.readouterr().err
    assert said == ["na\u00efve"]
    assert "bxctl: that line is not UTF-8 text (byte 0xe9 at byte 4); not sent\n" in err


async def test_an_approval_answer_that_is_not_utf8_leaves_the_approval_waiting(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    approval = tea_approval(taint=Label())
    decisions: list[Message] = []

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if answer := opening(request, home=short_dir):
            return answer
        await conn.send(ApprovalPending(approval=approval))
        return TurnDone(text="later, then")

    async def brokerd(request: Message, conn: proto.Connection) -> Message:
        decisions.append(request)
        return Ok()

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    await serve(nursery, short_dir, proto.OWNER_BROKER, brokerd)
    monkeypatch.setattr(sys, "stdin", piped(b"remember\nnot \xff today\n"))
    assert await run("chat", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    assert decisions == []
    assert (
        "  could not decide ap-k3f9xy: the answer is not UTF-8 text (byte 0xff at byte 5); "
        f"it still waits: `bxctl approvals list --home {short_dir}`\n"
    ) in out


def closed_port_url() -> str:
    """A loopback URL where nothing listens (the port was free a moment ago)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def failing_loopd(code: str, url: str) -> Handler:
    """loopd whose turn fails with the model error `code`, its model server at `url`."""

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.ModelInfo):
            return proto.ModelInfoReply(model="m", url=url)
        if answer := opening(request):
            return answer
        raise proto.ServiceError(code, "the model server failed", runbook="model-unavailable")

    return loopd


@pytest.mark.parametrize("code", ["model-unreachable", "model-timeout", "model-error"])
async def test_a_model_failure_with_no_server_there_says_to_start_one_or_point_at_it(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str], code: str
) -> None:
    url = closed_port_url()
    await serve(nursery, short_dir, proto.OWNER_LOOP, failing_loopd(code, url))
    assert await run("chat", "-m", "hi", "--home", str(short_dir)) == 1
    out = capsys.readouterr().out
    assert "error: the model server failed (runbook: model-unavailable)\n" in out
    assert f"note: no model server answers at {url}. Start one that speaks the OpenAI API" in out
    assert f"set [model] url in {short_dir / 'config' / 'loopd.toml'}" in out


async def test_a_model_timeout_from_a_server_that_answers_says_it_is_busy_or_slow(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve_scripted_model() as model:
        await serve(nursery, short_dir, proto.OWNER_LOOP, failing_loopd("model-timeout", model.url))
        assert await run("chat", "-m", "hi", "--home", str(short_dir)) == 1
    out = capsys.readouterr().out
    assert f"note: the model server at {model.url} answers, but it is busy or slow" in out
    assert "[model] timeout_s" in out
    assert "no model server answers" not in out


async def test_a_model_unreachable_from_a_server_that_answers_now_adds_no_note(
    nursery: trio.Nursery, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # it came back since: nothing to tell the owner beyond loopd's error
    with serve_scripted_model() as model:
        handler = failing_loopd("model-unreachable", model.url)
        await serve(nursery, short_dir, proto.OWNER_LOOP, handler)
        assert await run("chat", "-m", "hi", "--home", str(short_dir)) == 1
    out = capsys.readouterr().out
    assert "error: the model server failed" in out
    assert "note:" not in out


# -- a message over a frame's limit: the client's own error, before anything is sent -------

BIG = 5 * 1024 * 1024  # a 5 MiB message: what a pasted log or file can be
NEW = "chat-" + "a" * 26  # as long as a new session's id: a message is checked before one opens


def too_long(text: str, session: str = SESSION) -> str:
    """What the chat says of a `text` too long to send in `session`."""
    empty = len(proto.encode_frame(Say(session=session, text=""))) - proto.HEADER_BYTES
    return (
        f"error: this message is {len(text.encode()):,} bytes; a message can be at most about "
        f"{proto.MAX_FRAME - empty:,} bytes (proto's frame limit): shorten it\n"
    )


@pytest.mark.parametrize(
    ("failure", "says"),
    [
        (
            proto.RequestTooLarge(Path("/s"), "say", 5_242_901, proto.MAX_FRAME),
            "the message is too long to send: 5,242,901 bytes; a message can be at most about "
            "1 MiB",
        ),
        (
            proto.RequestTooLarge(Path("/s"), "memory_add", 2_000_000, proto.MAX_FRAME),
            "the request to loopd is too long to send: 2,000,000 bytes; a request can be at "
            "most about 1 MiB",
        ),
        (
            proto.BadRequest("the 'say' request cannot be sent to /s: not Unicode"),
            "the request to loopd cannot be sent: the 'say' request cannot be sent to /s: not "
            "Unicode",
        ),
    ],
)
def test_our_own_request_that_cannot_be_sent_is_said_as_ours(
    failure: proto.CallFailed, says: str
) -> None:
    sentence = failure_sentence("loopd", Path("/s"), failure)
    assert sentence == says
    assert "stopped" not in sentence
    assert "cannot be read" not in sentence


async def test_a_message_over_a_frames_limit_is_not_sent_and_the_chat_goes_on(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said: list[str] = []

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if answer := opening(request):
            return answer
        assert isinstance(request, proto.Say)
        said.append(request.text)
        return TurnDone(text="ok")

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    big = "x" * BIG
    assert await run("chat", "-m", big, "--home", str(short_dir)) == 1
    assert capsys.readouterr().out.endswith(too_long(big, NEW))
    monkeypatch.setattr(sys, "stdin", piped(f"{big}\nstill there?\n{big}\n".encode()))
    assert await run("chat", "--home", str(short_dir)) == 0
    out = capsys.readouterr().out
    assert too_long(big, NEW) in out  # before a session: none is opened for it
    assert too_long(big, SESSION) in out  # in the session: loopd is not sent it
    assert said == ["still there?"]  # the long one reached no loopd, the next one did


@pytest.mark.slow
async def test_chat_m_over_a_frames_limit_against_a_live_loopd_leaves_nothing_behind(
    short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_stack(short_dir, Step(text="Still here.")) as stack:
        home = str(stack.home)
        big = "y" * BIG
        assert await run("chat", "-m", big, "--home", home) == 1
        captured = capsys.readouterr()
        assert captured.out.endswith(too_long(big, NEW))
        assert "session" not in captured.err  # none opened for it
        assert not (stack.home / "sessions").exists() or not [
            p for p in (stack.home / "sessions").iterdir() if not p.name.startswith(".")
        ]
        assert await run("chat", "-m", "are you there?", "--home", home) == 0
        captured = capsys.readouterr()
        assert "Still here." in captured.out
        (session,) = re.findall(r"new session (chat-[a-z0-9]+)", captured.err)
        log = (stack.home / "sessions" / session / proto.LOG_FILE).read_text()
        assert "are you there?" in log
        assert "yyyy" not in log
        assert "ERROR" not in stack.log("loopd")


# -- a session begins at its first message --------------------------------------------


def session_folders(home: Path) -> list[str]:
    sessions = home / "sessions"
    return (
        sorted(p.name for p in sessions.iterdir() if not p.name.startswith("."))
        if sessions.is_dir()
        else []
    )


@pytest.mark.slow
async def test_a_chat_of_commands_only_creates_no_session_and_a_message_begins_one(
    short_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_stack(short_dir, Step(text="Hello there.")) as stack:
        home = str(stack.home)
        commands = "/help\n/remember likes green tea\n/memory\n/forget green tea\nn\n"
        monkeypatch.setattr(sys, "stdin", piped(commands.encode()))
        assert await run("chat", "--home", home) == 0
        only_commands = capsys.readouterr()
        assert session_folders(stack.home) == []
        assert "likes green tea" in only_commands.out  # the commands ran
        assert "session" not in only_commands.err  # neither "new session" nor a resume hint
        monkeypatch.setattr(sys, "stdin", piped(b"/help\nhi\n"))
        assert await run("chat", "--home", home) == 0
        with_a_message = capsys.readouterr()
    (session,) = session_folders(stack.home)
    err = with_a_message.err
    assert f"new session {session}" in err
    assert f"to go on with this session: bxctl chat --session {session}" in err
    # said when it was made: after /help's answer, before the model's
    assert with_a_message.out.index("/remember") < with_a_message.out.index("Hello there.")


@pytest.mark.slow
def test_a_5_mb_piped_message_is_the_clients_own_error_and_the_chat_goes_on(
    short_dir: Path,
) -> None:
    with running_stack(short_dir, Step(text="Still here.")) as stack:
        big = "z" * 5_000_000
        done = subprocess.run(
            [sys.executable, "-m", "bxctl", "chat", "--home", str(stack.home)],
            input=f"{big}\nare you there?\n",
            capture_output=True,
            encoding="utf-8",
            timeout=CAP_S,
            check=False,
        )
        assert "ERROR" not in stack.log("loopd")
    assert done.returncode == 0, done.stderr
    (session,) = re.findall(r"new session (chat-[a-z0-9]+)", done.stderr)
    empty = len(proto.encode_frame(Say(session=session, text=""))) - proto.HEADER_BYTES
    limit = proto.MAX_FRAME - empty
    assert (
        f"error: this message is 5,000,000 bytes; a message can be at most about {limit:,} "
        "bytes (proto's frame limit): shorten it\n"
    ) in done.stdout
    assert "Still here." in done.stdout
    assert "stopped" not in done.stdout + done.stderr


async def test_a_session_taken_back_is_opened_again_before_the_next_message(
    nursery: trio.Nursery,
    short_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # loopd took the session back (its first message was too long) and then restarted:
    # it knows the session no more, and the chat opens it again, by its id, first.
    asked: list[Message] = []

    async def loopd(request: Message, conn: proto.Connection) -> Message:
        if isinstance(request, proto.ModelInfo):
            raise proto.ServiceError("internal", "no model here")  # no model hint
        asked.append(request)
        if isinstance(request, proto.Say) and request.text.startswith("x"):
            return proto.Error(code="message-too-long", message="this message is about …")
        return opening(request, home=short_dir) or TurnDone(text="ok")

    await serve(nursery, short_dir, proto.OWNER_LOOP, loopd)
    monkeypatch.setattr(sys, "stdin", piped(b"x" * 30 + b"\nshort\n"))
    assert await run("chat", "--home", str(short_dir)) == 0
    kinds = [
        (type(r).__name__, r.text if isinstance(r, proto.Say) else getattr(r, "session", None))
        for r in asked
        if not isinstance(r, proto.BaselinePreview)
    ]
    assert kinds == [
        ("SessionOpen", None),
        ("Say", "x" * 30),
        ("SessionOpen", SESSION),  # again: it had no files
        ("Say", "short"),
    ]
    assert "to go on with this session" in capsys.readouterr().err
