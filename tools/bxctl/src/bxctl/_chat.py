"""`bxctl chat`: talk to boxmaker, see its tool calls, and decide approvals inline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import assert_never

import httpx
import trio

import proto
from proto import (
    ApprovalDecide,
    ApprovalPending,
    AssistantText,
    BaselinePreview,
    BaselinePreviewReply,
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

from ._common import CommandError, Sockets, ask, inline, unreachable_sentence
from ._embedded import DEMO_NOTICE, embedded_configured
from ._owner import describe_approval

__all__ = ["chat", "model_hint"]

MODEL_PROBE_S = 3.0
IDLE_DEADLINE_S = 1000.0
"""How long a turn may send nothing: an approval waits up to brokerd's timeout (900 s)."""


async def model_hint(home: Path, *, after_timeout: bool = False) -> str | None:
    """A sentence for the owner when the configured model server does not answer.

    It is "unreachable" only when it does not answer a plain request for its models;
    a server that answers that but let a turn time out (`after_timeout`) is busy or slow.
    """
    try:
        preview = await ask(
            Sockets(home).path(proto.OWNER_LOOP),
            proto.OWNER_LOOP,
            BaselinePreview(),
            BaselinePreviewReply,
        )
    except CommandError:
        return None
    url = preview.model_url.rstrip("/")
    try:
        async with httpx.AsyncClient(timeout=MODEL_PROBE_S) as http:
            await http.get(f"{url}/models")
    except httpx.HTTPError:
        return (
            f"no model server answers at {url}. Start one that speaks the OpenAI API "
            "(llama.cpp's llama-server, vLLM, Ollama) there, or point boxmaker at yours: "
            f"set [model] url in {home / 'config' / 'loopd.toml'} (or run "
            "`bxctl init --model-url URL` on a new home) and restart `bxctl up`."
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


class _Printer:
    """The turn as it streams: the assistant's text rendered for the terminal, and lines.

    The text comes in pieces; how a backslash is shown depends on the character after
    it, so a piece's trailing backslashes wait for the next piece (or the next line).
    The output is exactly `proto.for_terminal` of the whole text.
    """

    def __init__(self) -> None:
        self.mid_line = False
        self.held = ""

    def text(self, text: str) -> None:
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
        if self.held:
            sys.stdout.write(proto.for_terminal(self.held))
            self.held = ""
        if self.mid_line:
            sys.stdout.write("\n")
        print(text, flush=True)
        self.mid_line = False


async def _decide_inline(home: Path, approval: PendingApproval, out: _Printer) -> None:
    out.line(describe_approval(approval))
    answer = await trio.to_thread.run_sync(_prompt, "approve? [y/N] ")
    approve = answer.strip().lower() in ("y", "yes")
    try:
        await ask(
            Sockets(home).path(proto.OWNER_BROKER),
            proto.OWNER_BROKER,
            ApprovalDecide(id=approval.id, approve=approve),
            Ok,
        )
    except CommandError as exc:
        out.line(f"  could not decide {inline(approval.id)}: {inline(str(exc))}")
        return
    out.line(f"  {'approved' if approve else 'denied'} {inline(approval.id)}")


def _prompt(text: str) -> str:
    try:
        return input(text)
    except EOFError:
        return ""


async def _turn(home: Path, session: str, text: str, *, ask_inline: bool) -> bool:
    out = _Printer()
    path = Sockets(home).path(proto.OWNER_LOOP)
    try:
        async with proto.open_call(path, Say(session=session, text=text)) as conversation:
            while True:
                # receive(), not `async for`: a return from inside the loop would leave
                # the frames generator to the garbage collector
                try:
                    with trio.fail_after(IDLE_DEADLINE_S):
                        frame = await conversation.receive()
                except proto.PeerClosed:
                    break
                except trio.TooSlowError:
                    raise CommandError(
                        f"loopd sent nothing for {IDLE_DEADLINE_S:g} s; the turn may still be "
                        f"running (`bxctl sessions show {session}` shows what it did)"
                    ) from None
                if isinstance(frame, AssistantText | ToolCalled | ToolResult | ApprovalPending):
                    await _show_event(home, frame, out, ask_inline=ask_inline)
                elif isinstance(frame, TurnDone):
                    out.line("")
                    return True
                elif isinstance(frame, proto.Error):
                    runbook = f" (runbook: {inline(frame.runbook)})" if frame.runbook else ""
                    out.line(f"error: {inline(frame.message)}{runbook}")
                    if frame.code == "model-error":
                        timed_out = "did not answer within" in frame.message
                        hint = await model_hint(home, after_timeout=timed_out)
                        if hint:
                            out.line(f"note: {inline(hint)}")
                    return False
    except proto.Unreachable as exc:
        raise CommandError(unreachable_sentence("loopd", path, exc.reason)) from None
    except (proto.ProtocolError, trio.BrokenResourceError) as exc:
        raise CommandError(f"loopd broke off the turn: {exc}") from None
    out.line("error: loopd closed the turn without an answer")
    return False


async def _show_event(home: Path, event: TurnEvent, out: _Printer, *, ask_inline: bool) -> None:
    match event:
        case AssistantText(text=text):
            out.text(text)
        case ToolCalled(call=call):
            out.line(f"  → {inline(call.name)} {inline(call.arguments)}")
        case ToolResult(status=status, content=content, label=label):
            first = content.strip(" \n").split("\n", 1)[0]
            shown = inline(first[:157]) + ("…" if len(first) > 157 else "")
            out.line(f"  ← {status}{_label(label)}: {shown}")
        case ApprovalPending(approval=approval):
            if ask_inline:
                await _decide_inline(home, approval, out)
            else:
                out.line(describe_approval(approval))
                shown = inline(approval.id)
                out.line(
                    f"  waiting for the owner: `bxctl approvals approve {shown}` "
                    f"or `bxctl approvals deny {shown}`"
                )
        case _:
            assert_never(event)


async def chat(home: Path, session: str | None, message: str | None) -> int:
    """Open (or resume) a session; send one message, or read messages until end of input."""
    opened = await ask(
        Sockets(home).path(proto.OWNER_LOOP),
        proto.OWNER_LOOP,
        SessionOpen(origin="bxctl", session=session),
        SessionOpened,
    )
    state = "new session" if opened.created else "resumed session"
    print(f"{state} {inline(opened.session)}", file=sys.stderr)
    if embedded_configured(home):
        notice = DEMO_NOTICE.format(config=home / "config" / "loopd.toml")
        print(f"note: {notice}", file=sys.stderr)
    hint = await model_hint(home)
    if hint:
        print(f"note: {inline(hint)}", file=sys.stderr)
    if message is not None:
        return 0 if await _turn(home, opened.session, message, ask_inline=False) else 1
    print("type a message and press Enter; Ctrl-D ends the chat", file=sys.stderr)
    while True:
        try:
            line = await trio.to_thread.run_sync(input, "you> ")
        except EOFError:
            print(file=sys.stderr)
            return 0
        if line.strip():
            await _turn(home, opened.session, line, ask_inline=True)
