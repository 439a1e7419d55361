"""Mattermost's inline Markdown parser and `Inspect`, ported: the text nodes mentions are read from.

From `server/public/shared/markdown`: inlines.go (ParseInlines, MergeInlineText), emoji.go
and inspect.go (autolinks and character references are in `_autolink.py`). Two of its details decide
what mentions: an escaped character becomes a text node whose range starts right after the
backslash, so `\\@name` merges back into `@name`; a character reference becomes a text node
shorter than its source, so `&#64;name` stays two nodes, `@` and `name`, and Inspect visits
each node alone (it calls its callback with nil after every node, which flushes the buffer in
app/notification.go getExplicitMentions).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ._autolink import character_reference, image_dimensions, url_autolink, www_autolink
from ._blocks import Block, Container, Paragraph, parse_blocks
from ._text import (
    Range,
    ReferenceDefinition,
    is_alphanumeric,
    is_escapable,
    is_whitespace,
    next_non_whitespace,
    parse_link_destination,
    parse_link_label,
    parse_link_title,
    relative_to_absolute,
)

MAX_POST_RUNES = 16383  # model.PostMessageMaxRunesV2; inspect.go refuses more than 4 bytes a rune


@dataclass(eq=False)
class Text:
    """A run of text and where it came from in the source."""

    text: str
    range: Range


@dataclass(eq=False)
class Other:
    """Any inline that is not text and has no children to visit (code span, break, emoji)."""

    kind: str


@dataclass(eq=False)
class WithChildren:
    """A link or image (visited) or an autolink (not visited by inspect.go)."""

    kind: str
    children: list[Inline] = field(default_factory=list)


Inline = Text | Other | WithChildren

_LINK_OR_IMAGE = ("inline_link", "inline_image", "reference_link", "reference_image")
_EMOJI = re.compile(r":([a-z0-9_\-+]+):\B", re.ASCII)
_TEXT_STOP = re.compile(r"[\r\n\\`&!\[\]wW:]")


def _is_word(c: str) -> bool:
    return c == "_" or is_alphanumeric(c)


@dataclass
class _Delimiter:
    image: bool
    text_node: int
    range: Range
    inactive: bool = False


class _InlineParser:
    """inlines.go inlineParser."""

    def __init__(self, md: str, ranges: list[Range], definitions: list[ReferenceDefinition]):
        self.ranges = ranges
        self.labels = [" ".join(d.label.split()).casefold() for d in definitions]
        self.raw = "".join(md[r.position : r.end] for r in ranges)
        self.pos = 0
        self.inlines: list[Inline] = []
        self.delimiters: list[_Delimiter] = []

    def _abs(self, position: int) -> int:
        return relative_to_absolute(self.ranges, position)

    def _text(self, text: str, at: int, length: int | None = None) -> None:
        start = self._abs(at)
        self.inlines.append(
            Text(text, Range(start, start + (len(text) if length is None else length)))
        )

    def parse(self) -> list[Inline]:
        while self.pos < len(self.raw):
            c = self.raw[self.pos]
            if c in "\r\n":
                self._line_ending()
            elif c == "\\":
                self._escape()
            elif c == "`":
                self._backticks()
            elif c == "&":
                self._character_reference()
            elif c in "![":
                self._link_delimiter()
            elif c == "]":
                self._look_for_link()
            elif c in "wW":
                if not self._autolink(c):
                    self._plain()
            elif c == ":":
                if not self._autolink(c) and not self._emoji():
                    self._plain()
            else:
                self._plain()
        return self.inlines

    def _line_ending(self) -> None:
        raw, p = self.raw, self.pos
        hard = (p >= 1 and raw[p - 1] == "\t") or (
            p >= 2 and raw[p - 1] == " " and (raw[p - 2] == "\t" or raw[p - 1] == " ")
        )
        self.inlines.append(Other("hard_break" if hard else "soft_break"))
        self.pos += 1
        if self.pos < len(raw) and raw[self.pos] == "\n":
            self.pos += 1

    def _escape(self) -> None:
        nxt = self.raw[self.pos + 1 : self.pos + 2]
        if nxt and is_escapable(nxt):
            self._text(nxt, self.pos + 1)
            self.pos += 2
        else:
            self._text("\\", self.pos)
            self.pos += 1

    def _backticks(self) -> None:
        raw = self.raw
        count = 1
        while self.pos + count < len(raw) and raw[self.pos + count] == "`":
            count += 1
        opening = raw[self.pos : self.pos + count]
        search = self.pos + count
        while search < len(raw):
            end = raw.find(opening, search)
            if end == -1:
                break
            if end + count < len(raw) and raw[end + count] == "`":
                search = end + count
                while search < len(raw) and raw[search] == "`":
                    search += 1
                continue
            self.pos = end + count
            self.inlines.append(Other("code_span"))
            return
        self._text(opening, self.pos)
        self.pos += count

    def _plain(self) -> None:
        raw, p = self.raw, self.pos
        m = _TEXT_STOP.search(raw, p)
        if m is None:
            self._text(raw[p:].rstrip(" \t\n\u000b\u000c\r"), p, len(raw) - p)
            self.pos = len(raw)
            return
        nxt = m.start() - p
        if raw[m.start()] in "\r\n":
            s = raw[p : p + nxt].rstrip(" \t\n\u000b\u000c\r")
            self._text(s, p)
        else:
            nxt = max(nxt, 1)  # 'w', 'W' and ':' may not start anything else
            self._text(raw[p : p + nxt], p)
        self.pos += nxt

    def _character_reference(self) -> None:
        start = self.pos
        self.pos += 1
        semicolon = self.raw.find(";", self.pos)
        s = character_reference(self.raw[self.pos : semicolon]) if semicolon != -1 else ""
        if s:
            self.pos = semicolon + 1
            self._text(s, start)
        else:
            self._text("&", start)

    def _link_delimiter(self) -> None:
        raw, p = self.raw, self.pos
        if raw[p] == "[":
            self._text("[", p)
            self.delimiters.append(_Delimiter(False, len(self.inlines) - 1, Range(p, p + 1)))
            self.pos += 1
        elif raw[p + 1 : p + 2] == "[":
            self._text("![", p)
            self.delimiters.append(_Delimiter(True, len(self.inlines) - 1, Range(p, p + 2)))
            self.pos += 2
        else:
            self._text("!", p)
            self.pos += 1

    def _inline_destination(self, position: int, image: bool) -> int | None:
        """inlines.go peekAtInlineLinkDestinationAndTitle: the position after `(...)`."""
        raw = self.raw
        if position >= len(raw) or raw[position] != "(":
            return None
        position = next_non_whitespace(raw, position + 1)
        if position >= len(raw):
            return None
        if raw[position] == ")":
            return position + 1
        destination = parse_link_destination(raw, position)
        if destination is None:
            return None
        position = destination[1]
        if image and position < len(raw) and is_whitespace(raw[position]):
            dims = next_non_whitespace(raw, position)
            if dims >= len(raw):
                return None
            if raw[dims] == "=":
                after = image_dimensions(raw, dims)
                if after is None:
                    return None
                position = after
        if position < len(raw) and is_whitespace(raw[position]):
            title_start = next_non_whitespace(raw, position)
            if title_start >= len(raw):
                return None
            if raw[title_start] == ")":
                return title_start + 1
            if raw[title_start] in "\"'(":
                title = parse_link_title(raw, title_start)
                if title is None:
                    return None
                position = title[1]
        closing = next_non_whitespace(raw, position)
        if closing >= len(raw) or raw[closing] != ")":
            return None
        return closing + 1

    def _look_for_link(self) -> None:
        if self.delimiters:
            d = self.delimiters[-1]
            if d.inactive:
                self.delimiters.pop()
            else:
                kind: str | None = None
                nxt = self._inline_destination(self.pos + 1, d.image)
                if nxt is not None:
                    kind = "inline_image" if d.image else "inline_link"
                else:
                    label = parse_link_label(self.raw, self.pos + 1)
                    if label is not None and label[0].end > label[0].position:
                        reference = self.raw[label[0].position : label[0].end]
                        nxt = label[1]
                    else:
                        reference = self.raw[d.range.end : self.pos]
                        nxt = label[1] if label is not None else self.pos + 1
                    if reference and " ".join(reference.split()).casefold() in self.labels:
                        kind = "reference_image" if d.image else "reference_link"
                self.delimiters.pop()
                if kind is not None and nxt is not None:
                    children = self.inlines[d.text_node + 1 :]
                    del self.inlines[d.text_node :]
                    self.inlines.append(WithChildren(kind, children))
                    self.pos = nxt
                    if not d.image:
                        for earlier in self.delimiters:
                            if not earlier.image:
                                earlier.inactive = True
                    return
        self._text("]", self.pos)
        self.pos += 1

    def _autolink(self, c: str) -> bool:
        if any(not d.inactive for d in self.delimiters):
            return False
        if c == ":":
            link = url_autolink(self.raw, self.pos)
            if link is None:
                return False
            rewind = self.raw.find(":", link.position, link.end) - link.position
            last = self.inlines[-1] if self.inlines else None
            if not isinstance(last, Text) or rewind > len(last.text):
                return False
            self.inlines[-1] = Text(
                last.text[: len(last.text) - rewind],
                Range(last.range.position, last.range.end - rewind),
            )
            self.pos -= rewind
        else:
            link = www_autolink(self.raw, self.pos)
            if link is None:
                return False
        start = self._abs(link.position)
        child = Text(
            self.raw[link.position : link.end], Range(start, start + link.end - link.position)
        )
        self.inlines.append(WithChildren("autolink", [child]))
        self.pos += link.end - link.position
        return True

    def _emoji(self) -> bool:
        if self.pos > 1 and _is_word(self.raw[self.pos - 1]):
            return False
        m = _EMOJI.match(self.raw, self.pos)
        if m is None:
            return False
        self.inlines.append(Other("emoji"))
        self.pos = m.end()
        return True


def merge_inline_text(inlines: list[Inline]) -> list[Inline]:
    """inlines.go MergeInlineText: join text nodes whose source ranges touch."""
    merged: list[Inline] = []
    for inline in inlines:
        last = merged[-1] if merged else None
        if (
            isinstance(inline, Text)
            and isinstance(last, Text)
            and last.range.end == inline.range.position
        ):
            merged[-1] = Text(last.text + inline.text, Range(last.range.position, inline.range.end))
        else:
            merged.append(inline)
    return merged


def _visit(inline: Inline) -> Iterator[str]:
    if isinstance(inline, Text):
        yield inline.text
    elif isinstance(inline, WithChildren) and inline.kind in _LINK_OR_IMAGE:
        for child in inline.children:
            yield from _visit(child)


def _paragraphs(block: Block) -> Iterator[Paragraph]:
    if isinstance(block, Paragraph):
        yield block
    elif isinstance(block, Container):
        for child in block.children:
            yield from _paragraphs(child)


def text_nodes(markdown: str) -> Iterator[str]:
    """Each text node inspect.go shows a callback, in order: what mentions are read from."""
    if len(markdown.encode()) > 4 * MAX_POST_RUNES:
        return
    document, definitions = parse_blocks(markdown)
    for paragraph in _paragraphs(document):
        inlines = _InlineParser(markdown, paragraph.text, definitions).parse()
        for inline in merge_inline_text(inlines):
            yield from _visit(inline)
