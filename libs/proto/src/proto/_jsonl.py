"""Reading JSON-lines files: session logs, the edit journal, the audit log, the recall log.

Every such file is appended one whole line at a time (`append_line`), so a reader meets
three things: complete lines that decode into the file's record type, complete lines
that do not (damage: a hand edit, a bug, a disk error), and at most one last line
without its newline (a write in progress, or torn by a crash). `JsonLines` yields the
complete lines, decoded or with the reason they are not, and never the torn tail;
`read` collects a whole file and says what it skipped, so no reader skips silently.

A line longer than `max_line_bytes` is damage too; it is skipped without being held in
memory (only its first `max_line_bytes` are kept, for a caller that wants to look).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

import msgspec

from ._text import lower_first

__all__ = ["MAX_LINE_BYTES", "JsonLines", "Line", "Read"]

T = TypeVar("T")

MAX_LINE_BYTES = 16 << 20
"""A longer line is damage, not a record: no context window or journal entry holds one."""

_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True, slots=True)
class Line(Generic[T]):
    """One complete line of a file: where it is, its bytes, and its record or the problem."""

    number: int
    """1-based, as editors count."""
    start: int
    """The byte offset where the line begins."""
    end: int
    """The byte offset just after its newline: where the next line begins."""
    raw: bytes
    """The line without its newline (for an over-long line, its first bytes only)."""
    record: T | None
    """The decoded record; None when the line is not one."""
    problem: str | None = None
    """Why the line is not a record."""


@dataclasses.dataclass(frozen=True)
class Read(Generic[T]):
    """A whole file read: its records, the lines it skipped, and a torn tail if any."""

    path: Path
    records: list[T]
    skipped: list[Line[T]]
    lines: int
    """Complete lines, records and skipped ones."""
    end: int
    """The byte offset after the last complete line."""
    torn: int
    """Bytes after the last complete line: a write in progress or torn by a crash."""

    def problems(self) -> str | None:
        """One sentence naming what was skipped (for a log line), or None when nothing was."""
        parts = []
        if self.skipped:
            first = self.skipped[0]
            parts.append(
                f"skipped {len(self.skipped)} line(s) that are not records "
                f"(first: line {first.number}: {first.problem})"
            )
        if self.torn:
            parts.append(f"ends in an unfinished line of {self.torn:,} bytes")
        return f"{self.path}: {'; '.join(parts)}" if parts else None


class JsonLines(Generic[T]):
    """A typed reader of one kind of JSON-lines file (a msgspec type per record).

    A file whose format changed keeps its old lines: `legacy` is the old lines' type and
    how one becomes a record, tried on a line that is not of `record_type` (so only old
    lines, and damaged ones, are decoded twice).
    """

    def __init__(
        self,
        record_type: Any,
        *,
        legacy: tuple[Any, Callable[[Any], T]] | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(record_type)
        self._legacy = None if legacy is None else (msgspec.json.Decoder(legacy[0]), legacy[1])
        self.max_line_bytes = max_line_bytes

    def decode(self, raw: bytes) -> T:
        """One line's record; raises `ValueError` (with msgspec's path) when it is not one."""
        try:
            return self._decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            problem = lower_first(str(exc))
        except RecursionError:
            raise ValueError("the line nests JSON too deeply") from None
        if self._legacy is not None:
            decoder, convert = self._legacy
            try:
                return convert(decoder.decode(raw))
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass  # the line's problem is the one of today's format
        raise ValueError(problem)

    def lines(self, path: Path, *, offset: int = 0, number: int = 1) -> Iterator[Line[T]]:
        """The complete lines of `path` from byte `offset` (whose line is `number`).

        Stops before a last line without its newline. Raises `OSError` when the file
        cannot be opened (`FileNotFoundError` when it is missing).
        """
        with open(path, "rb") as f:
            yield from self._scan(f, offset, number)

    def read(self, path: Path) -> Read[T]:
        """Every record of `path`, what was skipped, and the torn tail's size.

        A missing file reads as empty; any other `OSError` is the caller's to report.
        """
        records: list[T] = []
        skipped: list[Line[T]] = []
        count = end = size = 0
        try:
            with open(path, "rb") as f:
                for line in self._scan(f, 0, 1):
                    count, end = line.number, line.end
                    if line.record is None:
                        skipped.append(line)
                    else:
                        records.append(line.record)
                size = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            pass
        return Read(path, records, skipped, count, end, max(0, size - end))

    def _scan(self, f: IO[bytes], offset: int, number: int) -> Iterator[Line[T]]:
        limit = self.max_line_bytes
        f.seek(offset)
        position = offset
        while True:
            data = f.readline(limit + 1)
            if data.endswith(b"\n"):
                end = position + len(data)
                raw = data[:-1]
                try:
                    yield Line(number, position, end, raw, self.decode(raw))
                except ValueError as exc:
                    yield Line(number, position, end, raw, None, str(exc))
            elif len(data) > limit:
                rest = _skip_rest(f)
                if rest is None:
                    return  # an over-long line still being written
                end = position + len(data) + rest
                problem = f"a line of more than {limit:,} bytes"
                yield Line(number, position, end, data[:limit], None, problem)
            else:
                return  # the end, or a line still being written
            number += 1
            position = end


def _skip_rest(f: IO[bytes]) -> int | None:
    """Read past the rest of an over-long line: its byte count, or None at EOF first."""
    skipped = 0
    while chunk := f.readline(_CHUNK):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            return skipped
    return None
