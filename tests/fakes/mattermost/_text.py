"""Text helpers of Mattermost's Markdown parser: ranges, lines, links, reference definitions.

Ported from `server/public/shared/markdown`: markdown.go (character classes, countIndentation,
trimLeftSpace, relativeToAbsolutePosition, trimBytesFromRanges, nextLine), lines.go
(ParseLines), links.go (parseLinkDestination, parseLinkTitle, parseLinkLabel) and
reference_definition.go. Positions are character offsets where Go uses bytes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """A slice of the markdown source, as Go's `Range{Position, End}`."""

    position: int
    end: int


_WHITESPACE = frozenset(" \t\n\u000b\u000c\r")


def is_whitespace(c: str) -> bool:
    """markdown.go isWhitespace: ASCII whitespace only."""
    return c in _WHITESPACE


def is_escapable(c: str) -> bool:
    """markdown.go isEscapable: ASCII punctuation."""
    return " " < c <= "~" and not c.isalnum()


def is_numeric(c: str) -> bool:
    """markdown.go isNumeric."""
    return "0" <= c <= "9"


def is_alphanumeric(c: str) -> bool:
    """markdown.go isAlphanumeric (ASCII)."""
    return is_numeric(c) or "a" <= c <= "z" or "A" <= c <= "Z"


def next_non_whitespace(text: str, position: int) -> int:
    """markdown.go nextNonWhitespace."""
    while position < len(text) and is_whitespace(text[position]):
        position += 1
    return position


def count_indentation(md: str, r: Range) -> tuple[int, int]:
    """markdown.go countIndentation: (columns, characters); a tab counts 4."""
    spaces = chars = 0
    for i in range(r.position, r.end):
        if md[i] == " ":
            spaces += 1
        elif md[i] == "\t":
            spaces += 4
        else:
            break
        chars += 1
    return spaces, chars


def trim_left_space(md: str, r: Range) -> Range:
    """markdown.go trimLeftSpace (which, as in Go, shortens the end)."""
    s = md[r.position : r.end]
    trimmed = s.lstrip("".join(_WHITESPACE))
    return Range(r.position, r.end - (len(s) - len(trimmed)))


def trim_right_space(md: str, r: Range) -> Range:
    """markdown.go trimRightSpace."""
    s = md[r.position : r.end]
    trimmed = s.rstrip("".join(_WHITESPACE))
    return Range(r.position, r.end - (len(s) - len(trimmed)))


def relative_to_absolute(ranges: list[Range], position: int) -> int:
    """markdown.go relativeToAbsolutePosition."""
    rem = position
    for r in ranges:
        length = r.end - r.position
        if rem < length:
            return r.position + rem
        rem -= length
    return ranges[-1].end if ranges else 0


def trim_from_ranges(ranges: list[Range], count: int) -> list[Range]:
    """markdown.go trimBytesFromRanges."""
    result: list[Range] = []
    rem = count
    for r in ranges:
        if rem == 0:
            result.append(r)
            continue
        length = r.end - r.position
        if rem < length:
            result.append(Range(r.position + rem, r.end))
            rem = 0
            continue
        rem -= length
    return result


def next_line(text: str, position: int) -> tuple[int, bool]:
    """markdown.go nextLine: (start of the next line, whether non-blank text was skipped)."""
    skipped = False
    i = position
    while i < len(text):
        c = text[i]
        if c == "\r":
            return (i + 2 if text[i + 1 : i + 2] == "\n" else i + 1), skipped
        if c == "\n":
            return i + 1, skipped
        if not is_whitespace(c):
            skipped = True
        i += 1
    return len(text), skipped


def parse_lines(md: str) -> list[Range]:
    """lines.go ParseLines: lines end after \\n, or before what follows a lone \\r."""
    lines: list[Range] = []
    start = 0
    after_cr = False
    for position, c in enumerate(md):
        if c == "\n":
            lines.append(Range(start, position + 1))
            start = position + 1
        elif after_cr:
            lines.append(Range(start, position))
            start = position
        after_cr = c == "\r"
    if start < len(md):
        lines.append(Range(start, len(md)))
    return lines


# Links (Go's links.go in shared/markdown)


def parse_link_destination(text: str, position: int) -> tuple[Range, int] | None:
    """links.go parseLinkDestination: (destination, next) or None."""
    if position >= len(text):
        return None
    if text[position] == "<":
        escaped = False
        for offset, c in enumerate(text[position + 1 :]):
            if escaped:
                escaped = False
                if is_escapable(c):
                    continue
            if c == "\\":
                escaped = True
            elif c == "<":
                break
            elif c == ">":
                return Range(position + 1, position + 1 + offset), position + 1 + offset + 1
            elif is_whitespace(c):
                break
    open_count = 0
    escaped = False
    for offset, c in enumerate(text[position:]):
        if escaped:
            escaped = False
            if is_escapable(c):
                continue
        if c == "\\":
            escaped = True
        elif c == "(":
            open_count += 1
        elif c == ")":
            if open_count < 1:
                return Range(position, position + offset), position + offset
            open_count -= 1
        elif is_whitespace(c):
            return Range(position, position + offset), position + offset
    return Range(position, len(text)), len(text)


def parse_link_title(text: str, position: int) -> tuple[Range, int] | None:
    """links.go parseLinkTitle."""
    if position >= len(text):
        return None
    closer = {'"': '"', "'": "'", "(": ")"}.get(text[position])
    if closer is None:
        return None
    start = position
    position += 1
    while position < len(text):
        c = text[position]
        if c == "\\":
            position += 1
            if position < len(text) and is_escapable(text[position]):
                position += 1
        elif c == closer:
            return Range(start + 1, position), position + 1
        else:
            position += 1
    return None


def parse_link_label(text: str, position: int) -> tuple[Range, int] | None:
    """links.go parseLinkLabel: labels of 1000 runes or more are refused."""
    if position >= len(text) or text[position] != "[":
        return None
    start = position
    position += 1
    while position < len(text):
        c = text[position]
        if c == "\\":
            position += 1
            if position < len(text) and is_escapable(text[position]):
                position += 1
        elif c == "[":
            return None
        elif c == "]":
            if position - start >= 1000:
                return None
            return Range(start + 1, position), position + 1
        else:
            position += 1
    return None


@dataclass(frozen=True)
class ReferenceDefinition:
    """reference_definition.go: `[label]: destination "title"`."""

    label: str


def parse_reference_definition(
    md: str, ranges: list[Range]
) -> tuple[ReferenceDefinition, list[Range]] | None:
    """reference_definition.go parseReferenceDefinition: the definition and the text left."""
    raw = "".join(md[r.position : r.end] for r in ranges)
    label = parse_link_label(raw, 0)
    if label is None:
        return None
    label_range, position = label
    if position >= len(raw) or raw[position] != ":":
        return None
    position += 1
    destination = parse_link_destination(raw, next_non_whitespace(raw, position))
    if destination is None:
        return None
    position = destination[1]
    definition = ReferenceDefinition(raw[label_range.position : label_range.end])
    if position < len(raw) and is_whitespace(raw[position]):
        title = parse_link_title(raw, next_non_whitespace(raw, position))
        if title is None:
            line_end, skipped = next_line(raw, position)
            if not skipped:
                return definition, trim_from_ranges(ranges, line_end)
            return None
        line_end, skipped = next_line(raw, title[1])
        if not skipped:
            return definition, trim_from_ranges(ranges, line_end)
    line_end, skipped = next_line(raw, position)
    if not skipped:
        return definition, trim_from_ranges(ranges, line_end)
    return None
