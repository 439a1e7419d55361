"""`bxctl chat`: talk to boxmaker, see its tool calls, and decide approvals inline.

On a terminal the owner's lines are read with prompt_toolkit (line editing, and the
history in `{home}/chat_history`), in a worker thread that owns the terminal while it
reads; there Ctrl-C is a key (it clears the line, or leaves on an empty one) and Ctrl-D
leaves. During a turn the terminal is the kernel's again and Ctrl-C is a SIGINT, which
the chat receives through trio (`open_signal_receiver`, so trio raises no
KeyboardInterrupt) and turns into cancelling the turn: the connection to loopd closes,
and loopd cancels the turn on its side and keeps what was said. Standard input that is
not a terminal (a script's pipe) is read line by line without prompt_toolkit.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, assert_never

import msgspec
import trio

import entries
import proto
from proto import (
    ApprovalDecide,
    ApprovalPending,
    Approve,
    AssistantText,
    Deny,
    ModelInfo,
    ModelInfoReply,
    Ok,
    PendingApproval,
    Say,
    SessionOpen,
    SessionOpened,
    ToolCalled,
    ToolResult,
    TurnDone,
    TurnEvent,
)

from ._common import (
    CommandError,
    Sockets,
    ask,
    bxctl,
    failure_sentence,
    inline,
    not_utf8,
    program,
    unreachable_sentence,
)
from ._embedded import DEMO_NOTICE, embedded_configured
from ._input import Interrupted, Lines, Reader, Terminal, history_in
from ._owner import describe_approval, with_text

if TYPE_CHECKING:
    from rich.progress import Progress

    from ._prompt_history import PromptHistory

__all__ = ["chat", "decision", "model_hint", "resume_hint"]

MODEL_PROBE_S = 3.0
PROMPT = "you> "
APPROVE_PROMPT = "approve? [y/N, e to edit, or a reason to deny] "
EDIT_PROMPT = "your text> "


async def model_hint(home: Path, *, after_timeout: bool = False) -> str | None:
    """A sentence for the owner when the configured model server does not answer.

    It is "unreachable" only when it does not answer a plain request for its models;
    a server that answers that but let a turn time out (`after_timeout`) is busy or slow.
    """
    try:
        info = await trio.to_thread.run_sync(
            ask, Sockets(home).path(proto.OWNER_LOOP), proto.OWNER_LOOP, ModelInfo(), ModelInfoReply
        )
    except CommandError:
        return None
    import httpx  # here: a `chat -m` that goes well never needs it (60 ms of import)

    url = info.url.rstrip("/")
    try:
        async with httpx.AsyncClient(timeout=MODEL_PROBE_S) as http:
            await http.get(f"{url}/models")
    except (httpx.HTTPError, httpx.InvalidURL):
        # InvalidURL is no HTTPError: a URL loopd's config admits (any non-space after
        # http://) that httpx cannot fetch is a server nobody can reach there, not a crash.
        return (
            f"no model server answers at {url}. Start one that speaks the OpenAI API "
            "(llama.cpp's llama-server, vLLM, Ollama) there, or point boxmaker at yours: "
            f"set [model] url in {home / 'config' / 'loopd.toml'} (or run "
            f"`{program()} init --model-url URL` on a new home) and restart `{bxctl('up')}`."
        )
    if after_timeout:
        return (
            f"the model server at {url} answers, but it is busy or slow: it did not finish "
            "the answer in time. Try again in a moment, or give it longer with [model] "
            f"timeout_s in {home / 'config' / 'loopd.toml'}."
        )
    return None


def _label(label: proto.Label) -> str:
    parts = [] if label.class_ == proto.Class.private else [str(label.class_)]
    if label.untrusted:
        parts.append("untrusted")
    return f" ({', '.join(parts)})" if parts else ""


class _Spinner:
    """A spinner with the elapsed seconds on a terminal's stderr while nothing is shown.

    rich redraws it from its own thread, so the trio thread is never blocked; it is
    cleared before anything is printed (`stop`), so it never mixes with the turn's text.
    """

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
        self._progress: Progress | None = None

    def start(self, what: str) -> None:
        """Spin, saying `what` (rendered for the terminal already) is being waited for."""
        if not self.enabled or self._progress is not None:
            return
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn

        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}… {task.elapsed:.1f} s", markup=False),
            console=Console(stderr=True, force_terminal=True),
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        progress.add_task(what, total=None)
        progress.start()
        self._progress = progress

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class _Printer:
    """The turn as it streams: the assistant's text rendered for the terminal, and lines.

    The text comes in pieces; how a backslash is shown depends on the character after
    it, so a piece's trailing backslashes wait for the next piece (or the next line).
    The output is exactly `proto.for_terminal` of the whole text.
    """

    def __init__(self) -> None:
        self.mid_line = False
        self.held = ""
        self.spinner = _Spinner()

    def waiting(self, what: str) -> None:
        """Nothing to show until loopd's next frame: spin, unless the text is mid-line."""
        if not self.mid_line:
            self.spinner.start(what)

    def text(self, text: str) -> None:
        self.spinner.stop()
        text = self.held + text
        kept = len(text.rstrip("\\"))
        self.held = text[kept:]
        shown = proto.for_terminal(text[:kept])
        if shown:
            sys.stdout.write(shown)
            sys.stdout.flush()
            self.mid_line = not shown.endswith("\n")
        if self.held:
            self.mid_line = True

    def line(self, text: str) -> None:
        self.spinner.stop()
        if self.held:
            sys.stdout.write(proto.for_terminal(self.held))
            self.held = ""
        if self.mid_line:
            sys.stdout.write("\n")
        print(text, flush=True)
        self.mid_line = False


Decide = Callable[[PendingApproval, _Printer], Awaitable[None]]
"""Asks the owner about an approval during the turn (None: they decide elsewhere)."""


def decision(answer: str) -> tuple[bool, str | None]:
    """The owner's answer to `approve?` as (approve, reason).

    `y` approves; `n` or nothing denies; any other text denies with itself as the reason
    (the model reads it).
    """
    said = answer.strip()
    if said.lower() in ("y", "yes"):
        return True, None
    if said.lower() in ("", "n", "no"):
        return False, None
    return False, said


def edit_in_editor(arguments: str) -> str | None:
    """`arguments`, pretty-printed in a temporary file opened in $VISUAL or $EDITOR (vi).

    Returns what the owner saved, or None when the editor failed or left nothing.
    """
    editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
    pretty = msgspec.json.format(arguments.encode(), indent=2).decode()
    with tempfile.TemporaryDirectory(prefix="bxctl-") as directory:
        path = Path(directory) / "arguments.json"
        path.write_text(pretty + "\n")
        try:
            done = subprocess.run([*editor, str(path)], check=False)
        except OSError as exc:
            print(f"  cannot start the editor {inline(shlex.join(editor))}: {exc.strerror}")
            return None
        saved = path.read_text(errors="replace").strip()
    if done.returncode != 0 or not saved:
        return None
    return saved


async def _send_decision(
    home: Path,
    approval: PendingApproval,
    answer: str,
    out: _Printer,
    *,
    arguments: str | None = None,
) -> None:
    problem = not_utf8(answer)
    if problem is not None:
        out.line(
            f"  could not decide {inline(approval.id)}: the answer is not UTF-8 text "
            f"({problem}); it still waits: `{bxctl('approvals list')}`"
        )
        return
    approve, reason = decision(answer)
    verdict: Approve | Deny = Approve() if approve else Deny(reason=reason)
    request = ApprovalDecide.deciding(approval.id, verdict)
    if arguments is not None:
        mine = Approve(version=arguments)
        request = ApprovalDecide.deciding(approval.id, mine, surface=proto.Surface(via="bxctl"))
    try:
        path = Sockets(home).path(proto.OWNER_BROKER)
        await trio.to_thread.run_sync(ask, path, proto.OWNER_BROKER, request, Ok)
    except CommandError as exc:
        out.line(f"  could not decide {inline(approval.id)}: {inline(str(exc))}")
        return
    said = f" ({inline(reason)})" if reason else ""
    if arguments is not None:
        said = " with your version: " + inline(arguments)
    out.line(f"  {'approved' if approve else 'denied'} {inline(approval.id)}{said}")


async def _turn(
    home: Path, session: str, text: str, out: _Printer, *, decide: Decide | None
) -> bool:
    path = Sockets(home).path(proto.OWNER_LOOP)
    try:
        async with proto.open_turn(path, Say(session=session, text=text)) as turn:
            out.waiting("thinking")
            async for item in turn:
                match item:
                    case TurnDone():
                        out.line("")
                        return True
                    case ToolCalled(call=call):
                        await _show_event(home, item, out, decide=decide)
                        out.waiting(f"running {inline(call.name)}")
                    case AssistantText() | ToolResult() | ApprovalPending():
                        await _show_event(home, item, out, decide=decide)
                        out.waiting("thinking")
                    case _:
                        assert_never(item)
    except proto.RemoteError as exc:
        frame = exc.error
        runbook = f" (runbook: {inline(frame.runbook)})" if frame.runbook else ""
        out.line(f"error: {inline(frame.message)}{runbook}")
        if frame.code in MODEL_FAILURES:
            hint = await model_hint(home, after_timeout=frame.code == "model-timeout")
            if hint:
                out.line(f"note: {inline(hint)}")
        return False
    except proto.RequestTooLarge as exc:
        # nothing was sent: the session goes on
        out.line(f"error: {too_long(text, exc.size, exc.limit)}")
        return False
    except proto.BadRequest as exc:
        out.line(f"error: {failure_sentence('loopd', path, exc)}")
        return False
    except proto.Unreachable as exc:
        raise CommandError(unreachable_sentence("loopd", path, exc.reason)) from None
    except proto.CallTimedOut:
        raise CommandError(
            f"loopd sent nothing for {proto.TURN_IDLE_S:g} s; the turn may still be "
            f"running (`{bxctl('sessions show ' + session)}` shows what it did)"
        ) from None
    except proto.NoReply:
        # the connection ended cleanly between frames: loopd was killed or stopped mid-turn
        out.line(f"error: {_broken_turn(session, '')}")
        return False
    except proto.CallFailed as exc:
        # a reset or a torn frame: loopd stopped or restarted mid-turn
        said = str(exc) if isinstance(exc, proto.BadReply) else ""
        raise CommandError(_broken_turn(session, said)) from None
    finally:
        out.spinner.stop()
    # the turn's iterator ends only after its turn_done, which returned above
    raise AssertionError("a turn ended without its turn_done")  # pragma: no cover


def too_long(text: str, frame: int, limit: int) -> str:
    """A message over a frame's `limit`, in the message's own bytes (its `frame` adds a few)."""
    size = len(text.encode())
    most = limit - (frame - size)
    return (
        f"this message is {size:,} bytes; a message can be at most about {most:,} bytes "
        "(proto's frame limit): shorten it"
    )


def over_a_frame(text: str) -> str | None:
    """What a message too long for any frame is told; None when it fits.

    Checked before a new session is opened for it, so that it opens none: a session's
    id is as long as `NEW_ID_SHAPE`.
    """
    try:
        proto.encode_frame(Say(session=NEW_ID_SHAPE, text=text))
    except proto.FrameTooLarge as exc:
        return too_long(text, exc.size, exc.limit)
    return None


NEW_ID_SHAPE = "chat-" + "a" * 26
"""An id as long as loopd's new ones (`chat-` and 26 characters)."""


MODEL_FAILURES = frozenset({"model-error", "model-timeout", "model-unreachable"})
"""loopd's codes for a turn the model server failed (runbook: model-unavailable)."""


def _broken_turn(session: str, said: str) -> str:
    """The turn's connection ended without its answer: what happened, what to do."""
    return (
        "the connection to loopd broke during the turn (loopd stopped or restarted"
        + (f": {inline(said)}" if said else "")
        + f"); `{bxctl('sessions show ' + session)}` shows what the turn did, and the "
        "next message goes on from there"
    )


async def _show_event(
    home: Path, event: TurnEvent, out: _Printer, *, decide: Decide | None
) -> None:
    match event:
        case AssistantText(text=text):
            out.text(text)
        case ToolCalled(call=call):
            out.line(f"  → {inline(call.name)} {inline(call.arguments)}")
        case ToolResult(status=status, content=content, label=label):
            # a refusal's content starts with its status ("denied: …"): said once
            first = content.removeprefix(f"{status}: ").strip(" \n").split("\n", 1)[0]
            shown = inline(first[:157]) + ("…" if len(first) > 157 else "")
            out.line(f"  ← {status}{_label(label)}: {shown}")
        case ApprovalPending(approval=approval):
            out.line(describe_approval(approval))
            if decide is not None:
                await decide(approval, out)
            else:
                shown = inline(approval.id)
                out.line(
                    f"  waiting for the owner: `{bxctl('approvals approve ' + shown)}` "
                    f"or `{bxctl('approvals deny ' + shown)}`"
                )
        case _:
            assert_never(event)


def resume_hint(session: str, home_option: Path | None) -> str:
    """The command that goes on with `session` (with `--home` when one was given)."""
    command = [*program().split(), "chat", "--session", session]
    if home_option is not None:
        command += ["--home", str(home_option.expanduser().absolute())]
    return f"to go on with this session: {shlex.join(command)}"


class _Conversation:
    """The owner's lines, one turn each, until they leave; Ctrl-C cancels a turn.

    The conversation itself is loopd's: the chat keeps no copy of what was said, so
    nothing it shows or sends later can bring back a text forgotten meanwhile.
    """

    def __init__(
        self, home: Path, session: _Session, reader: Reader, history: PromptHistory | None = None
    ) -> None:
        self.home = home
        self.session = session
        self.reader = reader
        self.history = history
        self.turn: trio.CancelScope | None = None
        self.leaving = False

    async def watch_interrupts(self, signals: AsyncIterator[int]) -> None:
        """SIGINT (Ctrl-C while no prompt owns the terminal): cancel the turn, or leave."""
        async for _ in signals:
            if self.turn is not None and not self.turn.cancel_called:
                self.turn.cancel()
            else:
                self.leaving = True  # a second Ctrl-C
            self.reader.interrupt()

    async def run(self) -> None:
        while not self.leaving:
            try:
                line = await self.reader.read(PROMPT, history=True)
            except (EOFError, Interrupted):
                return
            if not line.strip():
                continue
            problem = not_utf8(line)
            if problem is not None:
                sys.stderr.write(f"bxctl: that line is not UTF-8 text ({problem}); not sent\n")
                continue
            # Only the owner's own typed line is ever parsed as a command,
            # and only a message for the model is kept in the history: a command line is
            # not (`/forget TEXT` would keep the very text it forgets).
            match entries.parse_command(line, "/"):
                case entries.ForModel(text=text):
                    self.reader.remember(line)
                    line = text
                case entries.NotACommand(word=word):
                    print(
                        f"/{inline(word)} is not a command, so nothing was sent; /help lists "
                        "them, and //text sends /text to the model"
                    )
                    continue
                case entries.Usage(problem=problem):
                    print(inline(problem))
                    continue
                case command:
                    try:
                        await trio.to_thread.run_sync(self.command, command)
                    except CommandError as exc:
                        sys.stderr.write(f"bxctl: {inline(str(exc))}\n")
                    continue
            if self.session.id is None and (refused := over_a_frame(line)):
                print(f"error: {refused}")
                continue
            session = await self.session.open()
            out = _Printer()
            with trio.CancelScope() as self.turn:
                await _turn(self.home, session, line, out, decide=self.decide)
            if self.turn.cancelled_caught:
                out.line("(turn cancelled; what was said is kept. Ctrl-D or Ctrl-C leaves)")
            self.turn = None

    def command(self, command: entries.OwnerCommand) -> None:
        """One of the chat's own commands (`/help` lists them), in a worker thread.

        It runs as `bxctl memory …` does, asking y/N on the chat's own input.
        """
        from ._memory import OwnFiles, run_owner_command

        run_owner_command(
            self.home,
            command,
            confirm=self.confirm,
            session=self.session.id,
            where="chat",
            own=OwnFiles(self.home, self.history),
        )

    def confirm(self, ask: entries.Confirm) -> bool:
        """y/N for a chat command, asked on the chat's own input (from the worker thread)."""
        print(entries.to_terminal(ask.question), flush=True)
        read = partial(self.reader.read, entries.yes_no(ask.proposal), history=False)
        try:
            answer = trio.from_thread.run(read)
        except (EOFError, Interrupted):
            return False
        return answer.strip().lower() in ("y", "yes")

    async def decide(self, approval: PendingApproval, out: _Printer) -> None:
        """Ask inline; Ctrl-C here cancels the turn, and with it the approval."""
        while True:
            try:
                answer = await self.reader.read(APPROVE_PROMPT, history=False)
            except EOFError:
                answer = ""
            except Interrupted:
                if self.turn is not None:
                    self.turn.cancel()
                return
            if answer.strip().lower() not in ("e", "edit"):
                await _send_decision(self.home, approval, answer, out)
                return
            try:
                arguments = await self.edit(approval)
            except Interrupted:
                arguments = None
            if arguments is None:
                out.line("  edit cancelled; the call still waits for your answer")
                continue
            await _send_decision(self.home, approval, "y", out, arguments=arguments)
            return

    async def edit(self, approval: PendingApproval) -> str | None:
        """The owner's version of a memory call's arguments, or None to ask again.

        An add or a replace: the proposed text as a line to edit. A consolidate: the
        arguments as JSON in $EDITOR. Empty, or not the same kind of edit: None.
        """
        try:
            args = (
                proto.parse_memory_args(approval.arguments) if approval.tool == "memory" else None
            )
        except proto.ToolArgsError:
            args = None
        if isinstance(args, proto.MemoryAdd | proto.MemoryReplace):
            try:
                text = await self.reader.read(EDIT_PROMPT, history=False, default=args.text)
            except EOFError:
                return None
            if not text.strip() or not_utf8(text) is not None:
                return None
            return with_text(approval, text)
        if isinstance(args, proto.MemoryConsolidate):
            edited = await trio.to_thread.run_sync(edit_in_editor, approval.arguments)
            if edited is None:
                return None
            try:
                mine = proto.parse_memory_args(edited)
            except proto.ToolArgsError as exc:
                print(f"  that is not a memory call: {inline(str(exc))}")
                return None
            if not isinstance(mine, proto.MemoryConsolidate) or mine.file != args.file:
                print(f"  that is not a consolidate of {inline(args.file)}")
                return None
            return edited
        print("  only a memory add, replace or consolidate can be edited; answer y or n")
        return None


async def _converse(home: Path, session: _Session, home_option: Path | None) -> None:
    """Read the owner's lines until they leave, then say how to come back."""
    failure: CommandError | None = None
    try:
        # Signals reach only the main thread; run elsewhere (a test's worker thread),
        # the chat has no Ctrl-C of its own.
        interrupts = (
            trio.open_signal_receiver(signal.SIGINT)
            if threading.current_thread() is threading.main_thread()
            else contextlib.nullcontext(None)
        )
        with interrupts as signals:
            async with trio.open_nursery() as background:
                reader: Reader
                history: PromptHistory | None = None
                if sys.stdin.isatty() and sys.stdout.isatty():
                    history, problem = history_in(home)
                    if problem:
                        print(f"note: {inline(problem)}", file=sys.stderr)
                    reader = Terminal(history)
                    print(
                        "type a message and press Enter; Ctrl-C cancels a turn, Ctrl-D leaves",
                        file=sys.stderr,
                    )
                else:
                    reader = Lines(background)
                conversation = _Conversation(home, session, reader, history)
                if signals is not None:
                    background.start_soon(conversation.watch_interrupts, signals)
                try:
                    await conversation.run()
                except CommandError as exc:
                    failure = exc  # raised below, not wrapped in the nursery's group
                background.cancel_scope.cancel()
    finally:
        if session.written():
            assert session.id is not None
            print(f"\n{inline(resume_hint(session.id, home_option))}", file=sys.stderr)
    if failure is not None:
        raise failure


class _Session:
    """The chat's session: resumed at once (`--session`), or begun at the first message.

    A new session is loopd's copy of memory in a baseline and a folder under the home,
    which loopd writes at its first message: a chat that only runs commands (`/help`,
    `/remember`), or whose every message was refused, leaves none.
    """

    def __init__(self, home: Path, resume: str | None) -> None:
        self.home = home
        self.resume = resume
        self.id: str | None = None
        """The session's id once it is open; None until then."""

    def written(self) -> bool:
        """Whether the session has its files: loopd writes them at its first message."""
        if self.id is None:
            return False
        return (self.home / "sessions" / self.id / proto.BASELINE_FILE).is_file()

    async def open(self) -> str:
        """The session's id, opening it (and saying so) the first time.

        Opened again, quietly, while it has no files: loopd took it back (its first
        message was refused), and a loopd restarted since would not know it any more.
        """
        if self.id is not None:
            if not await trio.to_thread.run_sync(self.written):
                await trio.to_thread.run_sync(
                    ask,
                    Sockets(self.home).path(proto.OWNER_LOOP),
                    proto.OWNER_LOOP,
                    SessionOpen(origin="bxctl", session=self.id),
                    SessionOpened,
                )
            return self.id
        opened = await trio.to_thread.run_sync(
            ask,
            Sockets(self.home).path(proto.OWNER_LOOP),
            proto.OWNER_LOOP,
            SessionOpen(origin="bxctl", session=self.resume),
            SessionOpened,
        )
        state = "new session" if opened.created else "resumed session"
        print(f"{state} {inline(opened.session)}", file=sys.stderr)
        if opened.created and embedded_configured(self.home):
            # once per session: a resumed one (every `-m` after the first) has seen it
            notice = DEMO_NOTICE.format(
                config=self.home / "config" / "loopd.toml", program=program()
            )
            print(f"note: {notice}", file=sys.stderr)
        self.id = opened.session
        return self.id


async def chat(
    home: Path, session: str | None, message: str | None, *, home_option: Path | None = None
) -> int:
    """Resume a session, or begin one at the first message; send one or read until they leave.

    `home_option` is `--home` as given, for the command that resumes the session.
    """
    chosen = _Session(home, session)
    if session is not None:
        await chosen.open()  # a mistyped id is said at once, not after the first message
    if message is None:
        # Before the owner types: a server that is down is said now, not after a message.
        # One message (`-m`, scripts) goes at once; a failed turn says the same hint.
        hint = await model_hint(home)
        if hint:
            print(f"note: {inline(hint)}", file=sys.stderr)
    if message is not None:
        if chosen.id is None and (refused := over_a_frame(message)):
            print(f"error: {refused}")
            return 1
        done = await _turn(home, await chosen.open(), message, _Printer(), decide=None)
        return 0 if done else 1
    await _converse(home, chosen, home_option)
    return 0
