"""The character limits of the memory files (spec §3), defined in proto, by file."""

from __future__ import annotations

from proto import MEMORY_LIMIT, SOUL_LIMIT, USER_LIMIT, MemoryFile

__all__ = ["MEMORY_LIMIT", "SOUL_LIMIT", "USER_LIMIT", "file_name", "limit_for"]

_FILES: dict[str, tuple[str, int]] = {
    "memory": ("memory.md", MEMORY_LIMIT),
    "user": ("user.md", USER_LIMIT),
}


def _file(file: MemoryFile) -> tuple[str, int]:
    try:
        return _FILES[file]
    except (KeyError, TypeError):
        raise ValueError(f"unknown memory file {file!r}: expected 'memory' or 'user'") from None


def file_name(file: MemoryFile) -> str:
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
