"""Small text helpers for the sentences roles say."""

from __future__ import annotations

__all__ = ["lower_first"]


def lower_first(text: str) -> str:
    """Lower-case a message's first letter, unless it starts an acronym ("JSON is …").

    msgspec and the TOML parser start their messages with a capital; ours continue a
    sentence ("memory arguments: expected `str`, …").
    """
    if text[:2].isupper():
        return text
    return text[:1].lower() + text[1:]
