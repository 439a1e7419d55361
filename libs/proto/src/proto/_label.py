"""Labels: a class (public < private < secret) and whether the text is untrusted."""

from __future__ import annotations

import enum

import msgspec

__all__ = ["Class", "Label"]


class Class(enum.StrEnum):
    """How sensitive a piece of text is; ordered public < private < secret."""

    public = "public"
    private = "private"
    secret = "secret"

    @property
    def rank(self) -> int:
        """The position of this class in the order public < private < secret."""
        return _RANK[self]

    def higher(self, other: Class) -> Class:
        """The higher of two classes."""
        return self if self.rank >= other.rank else other


_RANK = {Class.public: 0, Class.private: 1, Class.secret: 2}


class Label(msgspec.Struct, frozen=True, kw_only=True):
    """A result's class and trust; `class` on the wire."""

    class_: Class = msgspec.field(default=Class.private, name="class")
    untrusted: bool = False

    def join(self, other: Label) -> Label:
        """The stricter of two labels: the higher class, untrusted if either is."""
        return Label(
            class_=self.class_.higher(other.class_), untrusted=self.untrusted or other.untrusted
        )

    def at_least(self, floor: Class) -> Label:
        """This label with its class raised to `floor` when it is lower."""
        return Label(class_=self.class_.higher(floor), untrusted=self.untrusted)

    def describe(self) -> str:
        """The label as a human reads it: `private` or `public · untrusted`."""
        return f"{self.class_} · untrusted" if self.untrusted else str(self.class_)
