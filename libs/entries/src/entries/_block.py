"""The memory block that starts every session's prompt (spec §4)."""

from __future__ import annotations

from collections.abc import Sequence

from ._format import chars, lf, render
from ._limits import MEMORY_LIMIT, USER_LIMIT

__all__ = ["render_block", "soul_text"]

_EMPTY = "(empty)"


def soul_text(text: str) -> str:
    """soul.md as the block shows it and its limit counts it: LF line ends, trimmed."""
    return lf(text).strip()


def render_block(*, soul: str, memory: Sequence[str], user: Sequence[str]) -> str:
    """The memory block: soul.md, then memory.md and user.md with their sizes.

    The caller checks the limits first: memoryd refuses to serve a block with a file over
    its limit (spec §4).

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
