"""The history the chat's prompt pages through (Up): the owner's messages, nothing else.

prompt_toolkit appends every line the prompt accepts to its history; this one keeps a
line only when the chat says so (`keep`), after it has read the line as a message for the
model, so a command line (`/forget TEXT`) is never written to `chat_history`. A forget
(this chat's, or `bxctl memory forget` while the chat is open) rewrites the file; the
strings prompt_toolkit keeps loaded are then dropped and read again before the next
prompt (`refresh`), so Up never brings a forgotten line back.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit.history import History

import proto

from ._history import entry_bytes, history_texts

__all__ = ["PromptHistory"]


class PromptHistory(History):
    """The owner's messages, in `{home}/chat_history`, or in memory only (`file` None).

    Only the thread that prompts uses it (`keep` and `forget` run between prompts).
    """

    def __init__(self, file: Path | None) -> None:
        super().__init__()
        self.file = file
        self._unsaved: list[str] = []  # oldest first; the history when there is no file
        self._loaded_from: tuple[int, ...] | None = None

    def _identity(self) -> tuple[int, ...] | None:
        """What changes when the file is rewritten (a forget renames a new file over it)."""
        if self.file is None:
            return None
        try:
            found = os.stat(self.file)
        except OSError:
            return None
        return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns

    def load_history_strings(self) -> Iterable[str]:
        """Newest first, as prompt_toolkit wants them."""
        if self.file is None:
            return list(reversed(self._unsaved))
        self._loaded_from = self._identity()
        try:
            data = self.file.read_bytes()
        except OSError:
            return []
        return list(reversed(history_texts(data)))

    def store_string(self, string: str) -> None:
        """Append one message to the file in one write (FileHistory's format)."""
        if self.file is None:
            self._unsaved.append(string)
            return
        data = entry_bytes(string, datetime.datetime.now())
        fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self._loaded_from = self._identity()

    def append_string(self, string: str) -> None:
        """What the prompt calls when it accepts a line: nothing yet (`keep` decides)."""

    def keep(self, string: str) -> None:
        """Keep a message the owner sent, unless it repeats the last one (as prompt_toolkit)."""
        strings = self.get_strings()
        if strings and strings[-1] == string:
            return
        super().append_string(string)

    def refresh(self) -> None:
        """Before a prompt: if the file was rewritten (a forget), load it again."""
        if self.file is not None and self._identity() != self._loaded_from:
            self._reload()

    def _reload(self) -> None:
        # History's constructor is what empties the strings it keeps loaded; the next
        # prompt loads them again from load_history_strings.
        History.__init__(self)

    def unsaved_holding(self, needle: str) -> int:
        """How many messages kept in memory only (no file) hold `needle`."""
        return sum(proto.holds(line, needle) for line in self._unsaved)

    def forget(self, needle: str) -> int:
        """After the file is rewritten without `needle`: drop what still holds it here.

        The strings loaded from the file are read again before the next prompt; messages
        kept in memory only are dropped now. How many of those held it.
        """
        count = self.unsaved_holding(needle)
        self._unsaved = [line for line in self._unsaved if not proto.holds(line, needle)]
        self._reload()
        return count
