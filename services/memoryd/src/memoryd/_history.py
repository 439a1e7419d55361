"""`memory history`'s pages, read from the journal's end (`edits/*.jsonl`).

The owner pages through the journal newest first, and a page is a frame's worth of
lines (a few hundred of a full memory.md). Decoding the whole journal for each page made
the owner's `memory history` quadratic in the journal's size. `JournalTable` instead
keeps where each record's line is and which file it edits (one decode of each line in
memoryd's life: a month file is read again only where it grew, or whole when it was
replaced, as a forget does). A page then decodes only its own lines, from the end.

`memory_why` asked about a few entries walks the journal from its end too (`JournalView`):
a line is decoded only when its bytes hold the text asked about, so a story costs what its
own edits do, not the journal's age. Asked about many entries, or `undo_plan`, it reads
the whole journal (`read_history`) once: one decode of each line beats a walk per entry.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from pathlib import Path

import msgspec

import entries
import proto
from proto import HistoryEdit

from ._edits import HISTORY_PAGE_BYTES, page_from_end

__all__ = ["JournalTable", "JournalView"]

log = logging.getLogger("memoryd.edits")


@dataclasses.dataclass(frozen=True, slots=True)
class _Place:
    """Where one record's line is: its month file, its bytes, and the file it edits."""

    path: Path
    start: int
    end: int
    file: str


@dataclasses.dataclass
class _MonthFile:
    """What is known of one month file: its identity when read, and its records' places."""

    inode: int
    size: int
    mtime_ns: int
    end: int
    """The byte after the last complete line read."""
    lines: int
    """The complete lines read (records and skipped ones)."""
    places: list[_Place]


class JournalTable:
    """Where every journal record is, kept up to date at each request (thread-safe)."""

    def __init__(self, edits: Path) -> None:
        self._edits = edits
        self._months: dict[str, _MonthFile] = {}
        self._lock = threading.Lock()

    def page(
        self,
        file: proto.MemoryFile | None,
        before: int | None,
        budget: int = HISTORY_PAGE_BYTES,
    ) -> tuple[list[HistoryEdit], int]:
        """The page `history_page` would give of the whole journal, decoding only its lines.

        Blocking. Returns the page's edits, oldest first, and how many older ones there are.
        """
        wanted = None if file is None else entries.file_name(file)
        with self._lock:  # one request at a time: the table, then the page's lines
            places = [
                place
                for month in self._refresh()
                for place in month.places
                if wanted is None or place.file == wanted
            ]
            view = JournalView(places)
            return page_from_end(len(places), view.edit, before, budget)

    def view(self) -> JournalView:
        """Every record as the journal is now, oldest first, decoded only when asked for."""
        with self._lock:
            return JournalView([place for month in self._refresh() for place in month.places])

    def _refresh(self) -> list[_MonthFile]:
        if not self._edits.is_dir():
            self._months.clear()
            return []
        names = sorted(path.name for path in self._edits.glob("*.jsonl"))
        for gone in set(self._months) - set(names):
            del self._months[gone]
        months = []
        for name in names:
            path = self._edits / name
            try:
                month = self._read(path, self._months.get(name))
            except FileNotFoundError:
                self._months.pop(name, None)
                continue
            self._months[name] = month
            months.append(month)
        return months

    def _read(self, path: Path, known: _MonthFile | None) -> _MonthFile:
        found = path.stat()
        if known is not None and known.inode == found.st_ino:
            if (known.size, known.mtime_ns) == (found.st_size, found.st_mtime_ns):
                return known
            if found.st_size >= known.size:  # appended to: read only what came after
                return _scan(path, found, known)
        return _scan(path, found, None)


def _scan(path: Path, found: os.stat_result, after: _MonthFile | None) -> _MonthFile:
    """`after`'s places and those of the lines past them (all of `path`'s when None)."""
    places = [] if after is None else list(after.places)
    end = 0 if after is None else after.end
    count = 0 if after is None else after.lines
    skipped: list[proto.Line[proto.JournalLine]] = []
    for line in proto.EDIT_JOURNAL.lines(path, offset=end, number=count + 1):
        end, count = line.end, line.number
        if line.record is None:
            skipped.append(line)
        else:
            places.append(_Place(path, line.start, line.end, line.record.file))
    if skipped:
        first = skipped[0]
        log.warning(
            "%s: skipped %d line(s) that are not records (first: line %d: %s)",
            path,
            len(skipped),
            first.number,
            first.problem,
        )
    return _MonthFile(found.st_ino, found.st_size, found.st_mtime_ns, end, count, places)


class JournalView:
    """The journal's records by position (oldest first), read as they are asked for.

    Each month file is read once, whole, when one of its lines is first wanted; `may_hold`
    says from a line's bytes whether it can hold a text at all (as JSON writes it), so a
    walk from the end decodes only the lines that can matter.
    """

    def __init__(self, places: list[_Place]) -> None:
        self._places = places
        self._files: dict[Path, bytes] = {}
        self._decoded: dict[int, proto.JournalLine] = {}
        self._needles: dict[str, bytes] = {}

    def __len__(self) -> int:
        return len(self._places)

    def _file(self, place: _Place) -> bytes:
        data = self._files.get(place.path)
        if data is None:
            data = self._files[place.path] = place.path.read_bytes()
        return data

    def may_hold(self, at: int, text: str) -> bool:
        """Whether record `at`'s line can hold `text` (False: it surely does not).

        A line decoded already says True (its record is the cheaper test); any other is
        searched in place, as bytes, for `text` as the journal's JSON encoder writes it.
        """
        if at in self._decoded:
            return True
        encoded = self._needles.get(text)
        if encoded is None:
            encoded = self._needles[text] = _json.encode(text)[1:-1]  # unquoted
        place = self._places[at]
        return self._file(place).find(encoded, place.start, place.end) != -1

    def edit(self, at: int) -> HistoryEdit:
        """Record `at` with its edit id, as `memory_history` shows it."""
        line = self[at]
        return HistoryEdit(id=proto.edit_id(line), line=line)

    def __getitem__(self, at: int) -> proto.JournalLine:
        found = self._decoded.get(at)
        if found is None:
            place = self._places[at]
            raw = self._file(place)[place.start : place.end - 1]  # without its newline
            found = self._decoded[at] = proto.EDIT_JOURNAL.decode(raw)
        return found


_json = msgspec.json.Encoder()
