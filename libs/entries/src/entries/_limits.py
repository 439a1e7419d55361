"""The character limits of the memory files (spec §3), defined in proto, by file."""

from __future__ import annotations

from proto import MEMORY_LIMIT, SOUL_LIMIT, USER_LIMIT, MemoryFile

__all__ = ["MEMORY_LIMIT", "SOUL_LIMIT", "USER_LIMIT", "file_name", "limit_for"]

_NAMES: dict[str, str] = {"memory": "memory.md", "user": "user.md"}
_LIMITS: dict[str, int] = {"memory": MEMORY_LIMIT, "user": USER_LIMIT}


def file_name(file: MemoryFile) -> str:
    """The name of the file the memory tool calls `file`: "memory.md" or "user.md".

    Raises:
        ValueError: `file` is neither "memory" nor "user" (a programming error).
    """
    try:
        return _NAMES[file]
    except (KeyError, TypeError):
        raise ValueError(f"unknown memory file {file!r}: expected 'memory' or 'user'") from None


def limit_for(file: MemoryFile) -> int:
    """The limit of the file the memory tool calls `file`, in characters.

    Raises:
        ValueError: `file` is neither "memory" nor "user" (a programming error).
    """
    try:
        return _LIMITS[file]
    except (KeyError, TypeError):
        raise ValueError(f"unknown memory file {file!r}: expected 'memory' or 'user'") from None
