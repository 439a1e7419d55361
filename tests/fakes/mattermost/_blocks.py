"""Mattermost's server-side Markdown block parser, ported to find the text a mention can be in.

Mattermost does not parse mentions with a CommonMark library: it uses its own partial parser,
`server/public/shared/markdown` (blocks.go, lines.go, markdown.go, paragraph.go,
block_quote.go, list.go, indented_code.go, fenced_code.go, reference_definition.go). It knows
only documents, paragraphs, block quotes, lists, indented and fenced code: a `# heading` or an
HTML block is a paragraph to it. Positions here are character offsets where Go uses bytes;
nothing the mention rules depend on differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._text import (
    Range,
    ReferenceDefinition,
    count_indentation,
    parse_lines,
    parse_reference_definition,
    trim_left_space,
    trim_right_space,
)

MAX_NESTING_DEPTH = 32  # blocks.go, MM-69445


# Blocks


@dataclass(eq=False)
class Block:
    """blocks.go Block: the base of every block."""

    md: str

    def continuation(self, indentation: int, r: Range) -> tuple[int, Range] | None:
        """The rest of a line this open block accepts, or None."""
        return None

    def add_line(self, indentation: int, r: Range) -> bool:
        """Take a whole line (code blocks do)."""
        return False

    def close(self) -> None:
        """Called when the block can take no more lines."""

    def allows_block_starts(self) -> bool:
        """Whether a new block may start inside this one."""
        return True


@dataclass(eq=False)
class Container(Block):
    """A block that holds other blocks (ContainerBlock)."""

    children: list[Block] = field(default_factory=list)

    def add_child(self, blocks: list[Block]) -> list[Block] | None:
        """Adopt the first of `blocks`; return the blocks that are now open."""
        self.children.append(blocks[0])
        return blocks


@dataclass(eq=False)
class Document(Container):
    """The root block."""

    def continuation(self, indentation: int, r: Range) -> tuple[int, Range] | None:
        """A document accepts every line."""
        return indentation, r


@dataclass(eq=False)
class Paragraph(Block):
    """paragraph.go: the only block whose text is parsed for inlines."""

    text: list[Range] = field(default_factory=list)
    definitions: list[ReferenceDefinition] = field(default_factory=list)

    def continuation(self, indentation: int, r: Range) -> tuple[int, Range] | None:
        """A paragraph goes on while lines are not blank."""
        if not self.md[r.position : r.end].strip():
            return None
        return indentation, r

    def close(self) -> None:
        """Strip leading reference definitions and surrounding space."""
        while True:
            for i in range(len(self.text)):
                self.text[i] = trim_left_space(self.md, self.text[i])
                if self.text[i].position < self.text[i].end:
                    break
            if not self.text or (
                self.text[0].position < self.text[0].end and self.md[self.text[0].position] != "["
            ):
                break
            parsed = parse_reference_definition(self.md, self.text)
            if parsed is None:
                break
            self.definitions.append(parsed[0])
            self.text = parsed[1]
        for i in range(len(self.text) - 1, -1, -1):
            self.text[i] = trim_right_space(self.md, self.text[i])
            if self.text[i].position < self.text[i].end:
                break


def new_paragraph(md: str, r: Range) -> Paragraph | None:
    """paragraph.go newParagraph."""
    if not md[r.position : r.end].strip():
        return None
    return Paragraph(md, text=[r])


@dataclass(eq=False)
class BlockQuote(Container):
    """block_quote.go."""

    def continuation(self, indentation: int, r: Range) -> tuple[int, Range] | None:
        """A quote goes on at a line starting with `>`."""
        if indentation > 3:
            return None
        s = self.md[r.position : r.end]
        if not s or s[0] != ">":
            return None
        remaining = Range(r.position + 1, r.end)
        indent, chars = count_indentation(self.md, remaining)
        if indent > 0:
            indent -= 1
        return indent, Range(remaining.position + chars, remaining.end)


def block_quote_start(md: str, indent: int, r: Range, depth: int) -> list[Block] | None:
    """block_quote.go blockQuoteStart."""
    if indent > 3 or depth >= MAX_NESTING_DEPTH:
        return None
    s = md[r.position : r.end]
    if not s or s[0] != ">":
        return None
    block = BlockQuote(md)
    position = r.position + 1
    if len(s) > 1 and s[1] == " ":
        position += 1
    r = Range(position, r.end)
    indent, chars = count_indentation(md, r)
    result: list[Block] = [block]
    inner = block_start_or_paragraph(
        md, indent, Range(r.position + chars, r.end), [], [], depth + 1
    )
    if inner:
        block.children.append(inner[0])
        result.extend(inner)
    return result


@dataclass(eq=False)
class ListItem(Container):
    """list.go ListItem."""

    indentation: int = 0

    def continuation(self, indentation: int, r: Range) -> tuple[int, Range] | None:
        """An item goes on at lines indented past its marker (or blank, once it has a child)."""
        if not self.md[r.position : r.end].strip():
            return None if not self.children else (0, r)
        if indentation < self.indentation:
            return None
        return indentation - self.indentation, r


@dataclass(eq=False)
class List(Container):
    """list.go List."""

    is_ordered: bool = False
    bullet_or_delimiter: str = ""

    def continuation(self, indentation: int, r: Range) -> tuple[int, Range] | None:
        """A list accepts every line; its items decide."""
        if not self.md[r.position : r.end].strip():
            return 0, r
        return indentation, r

    def add_child(self, blocks: list[Block]) -> list[Block] | None:
        """Adopt an item, or the item of a one-item list of the same kind."""
        first = blocks[0]
        if isinstance(first, ListItem):
            self.children.append(first)
            return blocks
        if (
            isinstance(first, List)
            and len(first.children) == 1
            and first.is_ordered == self.is_ordered
            and first.bullet_or_delimiter == self.bullet_or_delimiter
        ):
            return self.add_child(blocks[1:])
        return None


def _list_marker(md: str, r: Range) -> tuple[bool, int, str, int, Range] | None:
    """list.go parseListMarker: (ordered, start, bullet or delimiter, width, rest)."""
    digits = n = 0
    i = r.position
    while i < r.end and "0" <= md[i] <= "9":
        digits += 1
        n = n * 10 + int(md[i])
        i += 1
    if digits > 0:
        if digits > 9 or r.position + digits >= r.end:
            return None
        nxt = md[r.position + digits]
        if nxt not in ".)":
            return None
        return True, n, nxt, digits + 1, Range(r.position + digits + 1, r.end)
    if r.position >= r.end or md[r.position] not in "-+*":
        return None
    return False, 0, md[r.position], 1, Range(r.position + 1, r.end)


def list_start(
    md: str, indent: int, r: Range, matched: list[Block], unmatched: list[Block], depth: int
) -> list[Block] | None:
    """list.go listStart."""
    after_list = bool(matched) and isinstance(matched[-1], List)
    if (not after_list and indent > 3) or depth >= MAX_NESTING_DEPTH:
        return None
    marker = _list_marker(md, r)
    if marker is None:
        return None
    ordered, start, bullet, width, remaining = marker
    blank = not md[remaining.position : remaining.end].strip()
    if (
        matched
        and not unmatched
        and isinstance(matched[-1], Paragraph)
        and (blank or (ordered and start != 1))
    ):
        return None
    after_marker, chars = count_indentation(md, remaining)
    if not blank and after_marker < 1:
        return None
    remaining = Range(remaining.position + chars, remaining.end)
    consumed = 1 if blank or after_marker >= 5 else after_marker
    item = ListItem(md, indentation=indent + width + consumed)
    lst = List(md, is_ordered=ordered, bullet_or_delimiter=bullet, children=[item])
    result: list[Block] = [lst, item]
    inner = block_start_or_paragraph(md, after_marker - consumed, remaining, [], [], depth + 1)
    if inner:
        item.children.append(inner[0])
        result.extend(inner)
    return result


@dataclass(eq=False)
class IndentedCode(Block):
    """indented_code.go: its text is never searched for mentions."""

    def continuation(self, indentation: int, r: Range) -> tuple[int, Range] | None:
        """Code goes on at indented or blank lines."""
        if indentation >= 4:
            return indentation - 4, r
        if not self.md[r.position : r.end].strip():
            return 0, r
        return None

    def add_line(self, indentation: int, r: Range) -> bool:
        """Every line is code."""
        return True

    def allows_block_starts(self) -> bool:
        """Nothing starts inside code."""
        return False


def indented_code_start(
    md: str, indentation: int, r: Range, matched: list[Block], unmatched: list[Block]
) -> list[Block] | None:
    """indented_code.go indentedCodeStart: it cannot interrupt a paragraph."""
    if unmatched:
        if isinstance(unmatched[-1], Paragraph):
            return None
    elif matched and isinstance(matched[-1], Paragraph):
        return None
    if indentation < 4 or not md[r.position : r.end].strip():
        return None
    return [IndentedCode(md)]


@dataclass(eq=False)
class FencedCode(Block):
    """fenced_code.go: its text is never searched for mentions."""

    fence: str = "```"
    closed: bool = False

    def continuation(self, indentation: int, r: Range) -> tuple[int, Range] | None:
        """A fence takes every line until it is closed."""
        return None if self.closed else (indentation, r)

    def add_line(self, indentation: int, r: Range) -> bool:
        """A line of code, or the closing fence."""
        s = self.md[r.position : r.end]
        rest = s[len(self.fence) :].strip()
        if indentation <= 3 and s.startswith(self.fence) and all(c == s[0] for c in rest):
            self.closed = True
        return True

    def allows_block_starts(self) -> bool:
        """Nothing starts inside code."""
        return False


def fenced_code_start(md: str, r: Range) -> list[Block] | None:
    """fenced_code.go fencedCodeStart: a backtick fence's info string has no backtick."""
    s = md[r.position : r.end]
    if not s.startswith(("```", "~~~")):
        return None
    length = 3
    while length < len(s) and s[length] == s[0]:
        length += 1
    if "`" in md[r.position + length : r.end]:
        return None
    return [FencedCode(md, fence=s[:length])]


def block_start(
    md: str, indentation: int, r: Range, matched: list[Block], unmatched: list[Block], depth: int
) -> list[Block] | None:
    """blocks.go blockStart."""
    if r.position >= r.end:
        return None
    return (
        block_quote_start(md, indentation, r, depth)
        or list_start(md, indentation, r, matched, unmatched, depth)
        or indented_code_start(md, indentation, r, matched, unmatched)
        or fenced_code_start(md, r)
    )


def block_start_or_paragraph(
    md: str, indentation: int, r: Range, matched: list[Block], unmatched: list[Block], depth: int
) -> list[Block] | None:
    """blocks.go blockStartOrParagraph."""
    start = block_start(md, indentation, r, matched, unmatched, depth)
    if start:
        return start
    paragraph = new_paragraph(md, r)
    return [paragraph] if paragraph else None


def _close(blocks: list[Block], definitions: list[ReferenceDefinition]) -> None:
    for block in blocks:
        block.close()
        if isinstance(block, Paragraph):
            definitions.extend(block.definitions)


def _adopt(
    open_blocks: list[Block], last: int, new: list[Block], defs: list[ReferenceDefinition]
) -> bool:
    for i in range(last, -1, -1):
        container = open_blocks[i]
        if isinstance(container, Container):
            added = container.add_child(new)
            if added is not None:
                _close(open_blocks[i + 1 :], defs)
                open_blocks[i + 1 :] = added
                return True
    return False


def parse_blocks(md: str) -> tuple[Document, list[ReferenceDefinition]]:
    """blocks.go ParseBlocks."""
    document = Document(md)
    definitions: list[ReferenceDefinition] = []
    open_blocks: list[Block] = [document]
    for line in parse_lines(md):
        indentation, chars = count_indentation(md, line)
        r = Range(line.position + chars, line.end)
        last = 0
        for i, block in enumerate(open_blocks):
            cont = block.continuation(indentation, r)
            if cont is None:
                break
            indentation, r = cont
            more, more_chars = count_indentation(md, r)
            r = Range(r.position + more_chars, r.end)
            indentation += more
            last = i
        if open_blocks[last].allows_block_starts():
            new = block_start(
                md, indentation, r, open_blocks[: last + 1], open_blocks[last + 1 :], last + 1
            )
            if new and _adopt(open_blocks, last, new, definitions):
                continue
        tail = open_blocks[-1]
        if isinstance(tail, Paragraph) and md[r.position : r.end].strip():
            tail.text.append(r)
            continue
        _close(open_blocks[last + 1 :], definitions)
        del open_blocks[last + 1 :]
        if open_blocks[last].add_line(indentation, r):
            continue
        paragraph = new_paragraph(md, r)
        if paragraph is not None:
            _adopt(open_blocks, last, [paragraph], definitions)
    _close(open_blocks, definitions)
    return document, definitions
