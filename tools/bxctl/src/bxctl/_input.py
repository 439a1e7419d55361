"""The owner's lines for `bxctl chat`: a terminal's, with editing and history, or a pipe's.

On a terminal prompt_toolkit reads each line in a trio worker thread (it runs its own
asyncio loop there; boxmaker's code stays trio-only), owning the terminal while it
reads: Ctrl-C and Ctrl-D are keys then, not signals. Anything else is read line by
line, as a script writes it.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from ._history import HISTORY_FILE

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.application import Application

    from ._prompt_history import PromptHistory

__all__ = ["Interrupted", "Lines", "Reader", "Terminal", "history_in"]


class Interrupted(Exception):
    """Ctrl-C (the key, or a SIGINT) while the owner was being asked something."""


class Reader(Protocol):
    """Where the owner's lines come from: a terminal, or a script's standard input."""

    async def read(self, prompt: str, *, history: bool, default: str = "") -> str:
        """The owner's next line (`history`: Up pages through their earlier messages).

        Nothing read is kept until `remember` is called with it. `default` is text the
        line starts with, for the owner to edit (a terminal's only).

        Raises:
            EOFError: the input ended (Ctrl-D).
            Interrupted: Ctrl-C, or `interrupt` was called.
        """
        ...

    def interrupt(self) -> None:
        """End the read in progress (if any) as Ctrl-C would: a SIGINT came."""
        ...

    def remember(self, line: str) -> None:
        """Keep `line`, a message the owner sent to the model, in the history."""
        ...


class Lines:
    """Standard input that is not a terminal: plain lines, each prompt printed before it.

    One task reads ahead by one line in a worker thread, so a read that Ctrl-C abandons
    leaves no thread behind to swallow the next line.
    """

    def __init__(self, nursery: trio.Nursery) -> None:
        self._send, self._lines = trio.open_memory_channel[str](0)
        self._reading: trio.CancelScope | None = None
        nursery.start_soon(self._pump)

    async def _pump(self) -> None:
        # Bytes, decoded here: a line that is not UTF-8 keeps its bytes (as surrogates,
        # which the chat refuses to send, naming the byte) instead of ending the chat.
        read = sys.stdin.buffer.readline
        async with self._send:
            while line := await trio.to_thread.run_sync(read, abandon_on_cancel=True):
                await self._send.send(line.decode(errors="surrogateescape"))

    async def read(self, prompt: str, *, history: bool, default: str = "") -> str:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        with trio.CancelScope() as self._reading:
            try:
                return (await self._lines.receive()).removesuffix("\n")
            except trio.EndOfChannel:
                raise EOFError from None
        raise Interrupted

    def interrupt(self) -> None:
        if self._reading is not None:
            self._reading.cancel()

    def remember(self, line: str) -> None:
        """A script's lines are its own: nothing is kept."""


class Terminal:
    """A terminal: prompt_toolkit's line editing and history, in a worker thread.

    The thread owns the terminal while it reads, so trio waits for it (a prompt is never
    abandoned: the terminal would be left raw); a SIGINT ends the read from trio's side
    by asking the prompt's own event loop to exit.
    """

    def __init__(self, history: PromptHistory) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import DummyHistory
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent, merge_key_bindings
        from prompt_toolkit.keys import Keys

        keys = KeyBindings()

        @keys.add("c-c")
        def _clear_or_leave(event: KeyPressEvent) -> None:
            if event.current_buffer.text:
                event.current_buffer.reset()  # Ctrl-C on a line with text clears it
            else:
                event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

        # Typed escape sequences such as Esc [31m parse as mouse events that
        # prompt_toolkit's own handler cannot unpack: it crashed the prompt ("Unhandled
        # exception in event loop"). The chat uses no mouse: they are dropped here.
        no_mouse = KeyBindings()

        @no_mouse.add(Keys.Vt100MouseEvent)
        def _ignore(event: KeyPressEvent) -> None:
            pass

        self.history = history
        self._lines: PromptSession[str] = PromptSession(
            history=history, key_bindings=merge_key_bindings([keys, no_mouse])
        )
        # answers (y/N, an edited entry) are never kept: not even in memory, where Up
        # would bring back a text forgotten since
        self._answers: PromptSession[str] = PromptSession(
            history=DummyHistory(), key_bindings=no_mouse
        )
        self._active: PromptSession[str] | None = None
        self._said_unkept = False

    async def read(self, prompt: str, *, history: bool, default: str = "") -> str:
        session = self._lines if history else self._answers
        if history:
            self.history.refresh()
        self._active = session
        try:
            return await trio.to_thread.run_sync(
                functools.partial(session.prompt, prompt, default=default)
            )
        except KeyboardInterrupt:
            raise Interrupted from None
        finally:
            self._active = None

    def interrupt(self) -> None:
        session = self._active
        app = session.app if session is not None else None
        if app is not None and app.loop is not None:
            app.loop.call_soon_threadsafe(_exit_interrupted, app)

    def remember(self, line: str) -> None:
        try:
            self.history.keep(line)
        except OSError as exc:
            if not self._said_unkept:  # once: every later line fails the same way
                self._said_unkept = True
                why = exc.strerror or exc
                print(
                    f"note: this line is not kept: cannot write {self.history.file} ({why})",
                    file=sys.stderr,
                )


def _exit_interrupted(app: Application[str]) -> None:
    """In the prompt's own thread: end it as Ctrl-C would, unless it has just ended."""
    if app.is_running and app.future is not None and not app.future.done():
        app.exit(exception=KeyboardInterrupt, style="class:aborting")


def history_in(home: Path) -> tuple[PromptHistory, str | None]:
    """The history in `{home}/chat_history` (0600), or one kept in memory and why."""
    from ._prompt_history import PromptHistory

    path = home / HISTORY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
    except OSError as exc:
        why = f"lines typed now are not kept: cannot write {path} ({exc.strerror or exc})"
        return PromptHistory(None), why
    return PromptHistory(path), None
