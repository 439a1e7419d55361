"""The chat's input history, `{home}/chat_history`: its format, and a forget in it.

The file is in prompt_toolkit's `FileHistory` format, which the chat's prompt pages
through: each entry is a blank line, a `# <time>` line, then one `+<line>` line per line
of what the owner typed. It is bxctl's own file (no role reads it), so a forget asks
bxctl about it (`entries`' `Ask("surface", …)`) as brokerd asks each role about its
stores. An input history has no shape to keep: an entry holding the text goes whole.
Only the owner's messages for the model are ever kept in it (`_chat`: a command line,
`/forget TEXT` above all, never is).

This module loads no prompt_toolkit: `bxctl memory forget` runs without it.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass
from pathlib import Path

import proto

__all__ = [
    "HISTORY_FILE",
    "HISTORY_STORE",
    "HISTORY_UNIT",
    "Chunk",
    "chunks",
    "entry_bytes",
    "forget_in_file",
    "history_texts",
    "look_in_file",
    "scrub",
]

HISTORY_FILE = "chat_history"
"""The owner's past lines, in the home (0600): what they typed is as private as the sessions."""

HISTORY_STORE = "chat history"
"""The store's name in a forget's preview (`entries.STORES` says it to the owner)."""

HISTORY_UNIT = "lines"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One entry as the file holds it: the lines before it (`head`), then its `+` lines.

    Each line keeps its newline (the file's last line may have none). Only the file's first
    chunk can have no head, and only its last no `+` lines.
    """

    head: tuple[bytes, ...]
    text: tuple[bytes, ...]


def _lines(data: bytes) -> list[bytes]:
    """`data`'s lines with their newlines, split as prompt_toolkit reads them (at newlines only)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def chunks(data: bytes) -> list[Chunk]:
    """The file's chunks, in order; joined back they are `data`, byte for byte."""
    found: list[Chunk] = []
    head: list[bytes] = []
    text: list[bytes] = []
    for line in _lines(data):
        if line.startswith(b"+"):
            text.append(line)
            continue
        if text:
            found.append(Chunk(tuple(head), tuple(text)))
            head, text = [], []
        head.append(line)
    if head or text:
        found.append(Chunk(tuple(head), tuple(text)))
    return found


def _decoded(line: bytes) -> str:
    return line.decode("utf-8", errors="replace")  # as prompt_toolkit reads each line


def history_texts(data: bytes) -> list[str]:
    """The entries as prompt_toolkit loads them, oldest first."""
    texts = []
    for chunk in chunks(data):
        if chunk.text:
            # prompt_toolkit drops the last character, the final line's `\n`
            texts.append("".join(_decoded(line)[1:] for line in chunk.text)[:-1])
    return texts


def entry_bytes(text: str, time: datetime.datetime) -> bytes:
    """One entry as prompt_toolkit's `FileHistory` appends it."""
    lines = "".join(f"+{line}\n" for line in text.split("\n"))
    return f"\n# {time}\n{lines}".encode(errors="replace")


def scrub(data: bytes, needle: str) -> tuple[bytes, int]:
    """`data` with every entry holding `needle` (any case) dropped whole; how many lines held it.

    A line of an entry's head that holds it (a `# <time>` line, when what is forgotten is
    a date) becomes a blank line: still a separator, so the entries around it stay apart.
    The rest is kept, byte for byte and in order. The count is one per dropped entry (a
    message the owner typed) and one per blanked line.
    """
    kept: list[bytes] = []
    count = 0
    for chunk in chunks(data):
        # the whole line, `+` and all: no line of the file may hold it afterwards
        if any(proto.holds(_decoded(line), needle) for line in chunk.text):
            count += 1
            continue
        for line in chunk.head:
            if proto.holds(_decoded(line), needle):
                count += 1
                line = b"\n" if line.endswith(b"\n") else b""
            kept.append(line)
        kept.extend(chunk.text)
    return b"".join(kept), count


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def look_in_file(path: Path, needle: str) -> int:
    """How many lines of the history at `path` hold `needle` (`scrub`'s count); writes nothing.

    Raises:
        OSError: the file cannot be read.
    """
    return scrub(_read(path), needle)[1]


def forget_in_file(path: Path, needle: str) -> int:
    """Rewrite the history at `path` without `needle` (`scrub`), atomically; the count.

    Raises:
        OSError: the file cannot be read or rewritten (it is left as it was).
    """
    data = _read(path)
    scrubbed, count = scrub(data, needle)
    if count:
        proto.write_atomically(path, scrubbed)
        # write_atomically gives a group-shared home's files 0640; this one is the owner's
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)
    return count
