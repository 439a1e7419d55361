"""The character limits of the memory files, defined in proto, by file."""

from __future__ import annotations

from proto import MEMORY_LIMIT, SOUL_LIMIT, USER_LIMIT, JournalFile, MemoryFile

__all__ = ["MEMORY_LIMIT", "SOUL_LIMIT", "USER_LIMIT", "file_name", "file_of", "limit_for"]

_FILES: dict[str, tuple[JournalFile, int]] = {
    "memory": ("memory.md", MEMORY_LIMIT),
    "user": ("user.md", USER_LIMIT),
}


def _file(file: MemoryFile) -> tuple[JournalFile, int]:
    try:
        return _FILES[file]
    except (KeyError, TypeError):
        raise ValueError(f"unknown memory file {file!r}: expected 'memory' or 'user'") from None


def file_name(file: MemoryFile) -> JournalFile:
    """The name of the file the memory tool calls `file`: "memory.md" or "user.md".

    Raises:
        ValueError: `file` is neither "memory" nor "user" (a programming error).
    """
    return _file(file)[0]


def limit_for(file: MemoryFile) -> int:
    """The limit of the file the memory tool calls `file`, in characters.

    Raises:
        ValueError: `file` is neither "memory" nor "user" (a programming error).
    """
    return _file(file)[1]


def file_of(name: JournalFile) -> MemoryFile:
    """What the memory tool calls the file `name`: "memory" for memory.md, "user" for user.md."""
    return "memory" if name == "memory.md" else "user"
