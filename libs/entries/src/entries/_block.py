"""The memory block that starts every session's prompt."""

from __future__ import annotations

from collections.abc import Sequence

from ._format import chars, lf, render
from ._limits import MEMORY_LIMIT, USER_LIMIT

__all__ = ["BLOCK_START", "memory_block_of", "render_block", "soul_text"]

_EMPTY = "(empty)"
BLOCK_START = "# soul.md\n"
"""The memory block's first line: loopd appends it after system.md and a blank line."""


def memory_block_of(system: str) -> str | None:
    """The memory block in a session's system prompt, or None if it has none.

    loopd writes `system.md` (its trailing newlines trimmed), a blank line, then the block,
    so the block starts at the first blank line followed by `# soul.md`: system.md is the
    owner's own file, and a soul.md holding that line would come after it anyway.
    """
    if system.startswith(BLOCK_START):
        return system
    at = system.find("\n\n" + BLOCK_START)
    return None if at < 0 else system[at + 2 :]


def soul_text(text: str) -> str:
    """soul.md as the block shows it and its limit counts it: LF line ends, trimmed."""
    return lf(text).strip()


def render_block(*, soul: str, memory: Sequence[str], user: Sequence[str]) -> str:
    """The memory block: soul.md, then memory.md and user.md with their sizes.

    The caller checks the limits first: memoryd refuses to serve a block with a file over
    its limit.

    Args:
        soul: soul.md's text, as read.
        memory: memory.md's entries.
        user: user.md's entries.

    Returns:
        The block, with no trailing newline; an empty file shows `(empty)`.
    """
    return "\n\n".join(
        [
            f"# soul.md\n{soul_text(soul) or _EMPTY}",
            _section("memory.md", memory, MEMORY_LIMIT),
            _section("user.md", user, USER_LIMIT),
        ]
    )


def _section(name: str, entries: Sequence[str], limit: int) -> str:
    size = f"{chars(entries):,} of {limit:,} characters"
    return f"# {name} ({size})\n{render(entries) or _EMPTY}"
