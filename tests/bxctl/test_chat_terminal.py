"""`bxctl chat` in a real terminal (a pty, driven by pexpect) against the real roles.

Line editing, the history (kept across chats in the home), Ctrl-C cancelling a turn
while the chat goes on, inline approvals, and the command that resumes the session.
Every wait is on something the terminal or the roles show, never a fixed sleep.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pexpect
import pytest
from scripted_model import Step
from stack import Stack, running_stack

import proto

pytestmark = pytest.mark.slow

CAP_S = 60  # generous: the machine may be loaded
UP, LEFT, BACKSPACE, CTRL_C, CTRL_D = "\x1b[A", "\x1b[D", "\x7f", "\x03", "\x04"


@contextmanager
def chat(stack: Stack, *args: str) -> Iterator[pexpect.spawn[str]]:
    """`bxctl chat --home HOME ARGS` in a pty of 40 x 200, as the owner runs it."""
    env = dict(os.environ, TERM="xterm")
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"  # pexpect does not answer cursor-position requests
    child = pexpect.spawn(
        sys.executable,
        ["-m", "bxctl", "chat", "--home", str(stack.home), *args],
        env=env,
        encoding="utf-8",
        timeout=CAP_S,
        dimensions=(40, 200),
    )
    try:
        yield child
    finally:
        child.close(force=True)


def ask(child: pexpect.spawn[str], *keys: str) -> None:
    """Type at the prompt, then Enter."""
    for key in keys:
        child.send(key)
    child.send("\r")


def answered(child: pexpect.spawn[str], text: str) -> None:
    """The assistant's text, then the prompt again (the turn has ended: it is on disk)."""
    child.expect_exact(text)
    child.expect_exact("you>")


def cancelled(child: pexpect.spawn[str]) -> None:
    child.expect_exact("(turn cancelled; what was said is kept. Ctrl-D or Ctrl-C leaves)")
    child.expect_exact("you>")


def leaves_with_the_resume_hint(child: pexpect.spawn[str], stack: Stack, session: str) -> None:
    child.expect_exact(
        f"to go on with this session: bxctl chat --session {session} --home {stack.home}"
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def session_of(child: pexpect.spawn[str]) -> str:
    """A resumed session's id, once the chat shows its first prompt."""
    child.expect(r"resumed session (chat-[a-z0-9]+)")
    assert isinstance(child.match, re.Match)
    session: str = child.match.group(1)
    child.expect_exact("you>")
    return session


def begun(child: pexpect.spawn[str]) -> str:
    """The id of the session the first message has begun."""
    child.expect(r"new session (chat-[a-z0-9]+)")
    assert isinstance(child.match, re.Match)
    session: str = child.match.group(1)
    return session


def records(stack: Stack, session: str) -> list[dict[str, Any]]:
    text = (stack.home / "sessions" / session / proto.LOG_FILE).read_text()
    return [json.loads(line) for line in text.splitlines()]


def said(stack: Stack, session: str) -> list[str]:
    return [r["content"] for r in records(stack, session) if r["type"] == "user"]


def bxctl(stack: Stack, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "bxctl", *args, "--home", str(stack.home)],
        capture_output=True,
        encoding="utf-8",
        timeout=CAP_S,
        check=True,
    )
    return done.stdout


def test_line_editing_and_the_history_across_chats(short_dir: Path) -> None:
    steps = [Step(text=t) for t in ("Hello there.", "Tuesday.", "Hello again.", "Kept.", "Yes.")]
    with running_stack(short_dir, *steps) as stack:
        with chat(stack) as child:
            child.expect_exact("you>")
            ask(child, "helo", LEFT, "l")  # the arrow moves the cursor; nothing else is sent
            session = begun(child)
            answered(child, "Hello there.")
            ask(child, "what dat", BACKSPACE, "y?")
            answered(child, "Tuesday.")
            ask(child, UP, UP)  # the message before the last
            answered(child, "Hello again.")
            ask(child, "discard me", CTRL_C, "kept")  # Ctrl-C on a line with text clears it
            answered(child, "Kept.")
            child.send(CTRL_D)
            leaves_with_the_resume_hint(child, stack, session)
        assert said(stack, session) == ["hello", "what day?", "hello", "kept"]
        history = stack.home / "chat_history"
        assert stat.S_IMODE(history.stat().st_mode) == 0o600

        with chat(stack, "--session", session) as child:  # the history is the home's
            assert session_of(child) == session
            ask(child, UP)
            answered(child, "Yes.")
            child.kill(signal.SIGINT)  # `kill -INT` while the prompt owns the terminal
            leaves_with_the_resume_hint(child, stack, session)
        assert said(stack, session)[-1] == "kept"


EDIT = '{"action":"add","file":"memory","text":"The Heron launch moved to Thursday."}'
OTHER_EDIT = '{"action":"add","file":"user","text":"Prefers tea."}'


def test_ctrl_c_cancels_a_turn_and_approvals_are_asked_inline(short_dir: Path) -> None:
    writing, release = threading.Event(), threading.Event()

    def slow(request: dict[str, Any]) -> Step:  # the model server's thread
        writing.set()
        release.wait(CAP_S)
        return Step(text="Too late.")

    with running_stack(short_dir) as stack:
        stack.model.respond = slow
        try:
            with chat(stack) as child:
                child.expect_exact("you>")

                # 1. Ctrl-C while the model writes: the turn is cancelled, the chat goes on
                ask(child, "tell me a long story")
                session = begun(child)
                assert writing.wait(CAP_S)
                child.send(CTRL_C)
                cancelled(child)
                stack.script(Step(text="Back again."))
                ask(child, "are you there?")
                answered(child, "Back again.")
                assert [r["type"] for r in records(stack, session)] == ["user", "user", "assistant"]
                assert f"chat client of {session} left; cancelling its turn" in stack.log("loopd")

                # 2. approved inline: the edit is applied
                stack.script(Step(tool_calls=[("memory", EDIT)]), Step(text="Noted."))
                ask(child, "remember: Heron moved to Thursday")
                child.expect_exact('"text":"The Heron launch moved to Thursday."}')  # exactly
                child.expect_exact("approve? [y/N, e to edit, or a reason to deny]")
                child.send("y\r")
                child.expect(r"approved ap-[a-z0-9]+")
                answered(child, "Noted.")
                shown = bxctl(stack, "memory", "show")
                assert "The Heron launch moved to Thursday." in shown

                # 3. denied inline with a reason: the model reads it
                stack.script(Step(tool_calls=[("memory", OTHER_EDIT)]), Step(text="As you wish."))
                ask(child, "I like tea")
                child.expect_exact("approve? [y/N, e to edit, or a reason to deny]")
                child.send("not today\r")
                child.expect(r"denied ap-[a-z0-9]+ \(not today\)")
                answered(child, "As you wish.")
                tool = stack.model.request_json(-1)["messages"][-1]
                assert tool["content"] == "denied: the owner denied this call: not today"
                assert "Prefers tea." not in (stack.home / "memory" / "user.md").read_text()

                # 4. Ctrl-C at the approval: the turn is cancelled, the approval withdrawn
                stack.script(Step(tool_calls=[("memory", OTHER_EDIT)]), Step(text="Fine."))
                ask(child, "I like tea, really")
                child.expect_exact("approve? [y/N, e to edit, or a reason to deny]")
                child.send(CTRL_C)
                cancelled(child)
                ask(child, "never mind")
                answered(child, "Fine.")
                result = [r for r in records(stack, session) if r["type"] == "tool_result"][-1]
                assert result["content"].startswith("error: interrupted: ")
                deadline = time.monotonic() + CAP_S
                while (listed := bxctl(stack, "approvals", "list")) != "no approvals pending\n":
                    assert time.monotonic() < deadline, listed  # brokerd settles it
                    time.sleep(0.1)

                # 5. Ctrl-C at the prompt (the second after a cancel) leaves
                child.send(CTRL_C)
                leaves_with_the_resume_hint(child, stack, session)
        finally:
            release.set()


def test_escape_sequences_typed_at_the_prompt_are_dropped_not_a_crash(short_dir: Path) -> None:
    # Esc [31m typed (not pasted) parses as a mouse event, which prompt_toolkit's own
    # handler could not unpack: "Unhandled exception in event loop", then a stuck prompt.
    with running_stack(short_dir, Step(text="Noted.")) as stack:
        with chat(stack) as child:
            child.expect_exact("you>")
            ask(child, "my \x1b[31mred\x1b[0m car")
            session = begun(child)
            answered(child, "Noted.")
            child.send(CTRL_D)
            leaves_with_the_resume_hint(child, stack, session)
            assert "Unhandled exception" not in (child.before or "")
        assert said(stack, session) == ["my red car"]


def test_a_command_line_is_never_kept_in_the_history(short_dir: Path) -> None:
    with running_stack(short_dir, Step(text="Hi."), Step(text="Again.")) as stack:
        with chat(stack) as child:
            child.expect_exact("you>")
            ask(child, "hello")
            session = begun(child)
            answered(child, "Hi.")
            ask(child, "/help")
            child.expect_exact("/forget TEXT")
            child.expect_exact("you>")
            ask(child, UP)  # the last message, not the command typed after it
            answered(child, "Again.")
            child.send(CTRL_D)
            leaves_with_the_resume_hint(child, stack, session)
        assert said(stack, session) == ["hello", "hello"]
        history = (stack.home / "chat_history").read_text()
        assert "/help" not in history
        assert history.count("+hello\n") == 1  # a repeat of the last is kept once


def test_a_chat_left_after_a_command_begins_no_session(short_dir: Path) -> None:
    with running_stack(short_dir) as stack:
        with chat(stack) as child:
            child.logfile_read = seen = io.StringIO()
            child.expect_exact("you>")
            ask(child, "/help")
            child.expect_exact("/forget TEXT")
            child.expect_exact("you>")
            child.send(CTRL_D)
            child.expect(pexpect.EOF)
            child.close()
        assert child.exitstatus == 0
        assert "new session chat-" not in seen.getvalue()
        assert "to go on with this session" not in seen.getvalue()
        sessions = stack.home / "sessions"
        assert not sessions.exists() or list(sessions.iterdir()) == []
