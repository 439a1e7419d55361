"""The memory block a new session starts with, rendered fresh each time."""

from __future__ import annotations

import entries

from ._files import MemoryDir

__all__ = ["memory_block"]


def memory_block(memory: MemoryDir) -> str:
    """Render the block from the files as they are now; `MemoryUnavailable` if it cannot be.

    A file over its limit, unreadable or unparsable refuses the whole block: a session
    that silently starts without memory is what this prevents.
    """
    return entries.render_block(
        soul=memory.read_soul(),
        memory=memory.read_entries("memory"),
        user=memory.read_entries("user"),
    )
