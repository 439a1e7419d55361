"""What the owner is told, written once and rendered for the terminal or for Markdown.

An `Answer` is our own words with the outside text in it marked (`Quote`: an entry, an
id, a role's sentence; `Block`: a text shown whole), so each surface says the same thing
and only the rendering differs: `to_terminal` reveals every hidden or live code point
(`proto.for_terminal`), `to_markdown` puts outside text in code spans and blocks, where no
markup or mention works (`proto.code_span`, `proto.code_block`). Our own words are plain
text that means nothing in Markdown; `Strong` is the one emphasis.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import proto

__all__ = [
    "Answer",
    "Block",
    "Line",
    "Quote",
    "Strong",
    "Table",
    "line",
    "to_markdown",
    "to_plain",
    "to_terminal",
]


@dataclass(frozen=True, slots=True)
class Quote:
    """Outside text inside a sentence: an entry, an id, a time, a role's sentence."""

    text: str


@dataclass(frozen=True, slots=True)
class Strong:
    """Our own words, emphasised where the surface can (bold in Markdown)."""

    text: str


Piece = str | Quote | Strong


@dataclass(frozen=True, slots=True)
class Line:
    """One line of our words and quotes, `depth` levels under the line it belongs to."""

    pieces: tuple[Piece, ...]
    depth: int = 0


@dataclass(frozen=True, slots=True)
class Block:
    """Outside text shown whole on its own lines (an entry, the memory block).

    `depth` is how far it is indented (0: not at all); `mark`, if any, starts each of its
    lines (`+` an entry added, `-` one removed).
    """

    text: str
    depth: int = 1
    mark: str = ""


@dataclass(frozen=True, slots=True)
class Table:
    """Rows of (how to write it, what it does): the commands' help."""

    rows: tuple[tuple[str, str], ...]


Part = Line | Block | Table


@dataclass(frozen=True, slots=True)
class Answer:
    """What the owner is told; `ok` is False when the command did not do what it asked."""

    parts: tuple[Part, ...]
    ok: bool = True

    def __add__(self, other: Answer) -> Answer:
        return Answer(self.parts + other.parts, ok=self.ok and other.ok)


def line(*pieces: Piece, depth: int = 0) -> Line:
    """A `Line` of these pieces."""
    return Line(pieces, depth)


def _terminal_piece(piece: Piece) -> str:
    match piece:
        case str():
            return piece
        case Quote(text=text):
            return proto.for_terminal(text, one_line=True)
        case Strong(text=text):
            return text


def to_terminal(answer: Answer) -> str:
    """The answer for a terminal: outside text revealed as `proto.for_terminal` does."""
    out: list[str] = []
    for part in answer.parts:
        match part:
            case Line(pieces=pieces, depth=depth):
                out.append("  " * depth + "".join(_terminal_piece(p) for p in pieces))
            case Block(text=text, depth=depth, mark=mark):
                prefix = "  " * depth + (f"{mark} " if mark else "  " if depth else "")
                out.extend(prefix + row for row in proto.for_terminal(text).split("\n"))
            case Table(rows=rows):
                width = max(len(usage) for usage, _ in rows)
                out.extend(f"{usage:<{width}}  {summary}" for usage, summary in rows)
    return "\n".join(out)


def _markdown_piece(piece: Piece) -> str:
    match piece:
        case str():
            return piece
        case Quote(text=text):
            return proto.code_span(text)
        case Strong(text=text):
            return f"**{text}**"


def to_markdown(answer: Answer) -> str:
    """The answer for Mattermost: outside text in code spans and blocks, our words as they are.

    A line under another (`depth` 1 and more) is an item of a list.
    """
    out: list[str] = []
    for part in answer.parts:
        match part:
            case Line(pieces=pieces, depth=depth):
                bullet = "  " * (depth - 1) + "- " if depth else ""
                out.append(bullet + "".join(_markdown_piece(p) for p in pieces))
            case Block(text=text, mark=mark):
                if mark:
                    marked = "\n".join(f"{mark} {row}" for row in text.split("\n"))
                    out.append(proto.code_block(marked, info="diff"))
                else:
                    out.append(proto.code_block(text))
            case Table(rows=rows):
                out.extend(f"- {proto.code_span(usage)}: {summary}" for usage, summary in rows)
    return "\n".join(out)


def to_plain(answer: Answer) -> str:
    """The answer's words and text, unrendered: what both renderings say (for tests, logs)."""
    return "\n".join(_plain(part) for part in answer.parts)


def _plain(part: Part) -> str:
    match part:
        case Line(pieces=pieces):
            return "".join(p if isinstance(p, str) else p.text for p in pieces)
        case Block(text=text):
            return text
        case Table(rows=rows):
            return "\n".join(f"{usage}: {summary}" for usage, summary in rows)


def lines(parts: Iterable[Part], *, ok: bool = True) -> Answer:
    """An answer of these parts."""
    return Answer(tuple(parts), ok=ok)
