"""The errors of `entries`: a file that does not parse, and an edit that is refused."""

from __future__ import annotations

from typing import Literal

__all__ = ["EditRefused", "EntriesError", "ParseError", "RefusalCode"]

RefusalCode = Literal[
    "over-limit",
    "no-match",
    "duplicate",
    "bad-entry",
    "consolidate-missing",
    "consolidate-repeated",
    "consolidate-unknown",
]
"""Why an edit was refused; stable, for the tool result and the journal."""


class EntriesError(Exception):
    """Base of the errors of `entries`; `str(exc)` is a sentence the model and the owner can act on.

    Every subclass sets `code`, a stable machine-readable reason.
    """

    code: str


class ParseError(EntriesError):
    """memory.md or user.md cannot be read as a list of entries; the owner must fix it by hand.

    Attributes:
        name: The file's name, e.g. "memory.md".
        entry: The number (1-based) of the offending entry.
    """

    code = "unparsable"

    def __init__(self, message: str, *, name: str, entry: int) -> None:
        super().__init__(message)
        self.name = name
        self.entry = entry


class EditRefused(EntriesError):
    """An edit that cannot be applied to the file as it is now; nothing was changed.

    Args:
        code: Why, one of `RefusalCode`.
        message: The sentence for the model and the owner.
    """

    def __init__(self, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.code: RefusalCode = code
