"""`memory history` read from the journal's end: the same pages as the whole journal's."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal, cast

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import proto
from memoryd._edits import history_page, read_history
from memoryd._files import MemoryDir
from memoryd._history import JournalTable
from proto import AppliedEdit, HistoryEdit

_encoder = msgspec.json.Encoder()


def _line(n: int, file: str, size: int) -> bytes:
    line = AppliedEdit(
        time="2026-11-01T08:00:00Z",
        session="chat-abcdefgh",
        call=f"c{n}",
        approval=None,
        action="add",
        file=cast(Literal["memory.md", "user.md"], file),
        before=[],
        after=["x" * size],
    )
    return _encoder.encode(line) + b"\n"


# One line of a month file: an edit of memory.md or user.md, or a line that is no record.
lines = st.one_of(
    st.tuples(st.sampled_from(["memory.md", "user.md"]), st.integers(0, 3000)),
    st.sampled_from([b"not json\n", b'{"kind": "applied"}\n', b"\n"]),
)
months = st.lists(st.tuples(st.lists(lines, max_size=12), st.booleans()), max_size=4)


def _write(edits: Path, month: int, content: list[tuple[str, int] | bytes], torn: bool) -> None:
    data = b"".join(
        item if isinstance(item, bytes) else _line(month * 100 + n, *item)
        for n, item in enumerate(content)
    )
    if torn:
        data += b'{"kind": "app'  # a write in progress
    (edits / f"2026-{month + 1:02d}.jsonl").write_bytes(data)


def _whole(memory: MemoryDir, file: proto.MemoryFile | None) -> list[HistoryEdit]:
    return [HistoryEdit(id=proto.edit_id(r), line=r) for r in read_history(memory, file)]


Page = Callable[[proto.MemoryFile | None, int | None, int], tuple[list[HistoryEdit], int]]


def _pages(
    page: Page, file: proto.MemoryFile | None, budget: int
) -> list[tuple[list[HistoryEdit], int]]:
    found: list[tuple[list[HistoryEdit], int]] = []
    before: int | None = None
    while before != 0:
        edits, older = page(file, before, budget)
        found.append((edits, older))
        if not edits:
            break
        before = older
    return found


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    journal=months,
    grown=months,
    budget=st.integers(min_value=1, max_value=12_000),
    file=st.sampled_from([None, "memory", "user"]),
)
def test_pages_from_the_end_are_the_whole_journals_pages(
    journal: list[tuple[list[tuple[str, int] | bytes], bool]],
    grown: list[tuple[list[tuple[str, int] | bytes], bool]],
    budget: int,
    file: proto.MemoryFile | None,
) -> None:
    root = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    try:
        memory = MemoryDir(root / "memory")
        memory.edits.mkdir(parents=True)
        table = JournalTable(memory.edits)
        for month, (content, torn) in enumerate(journal):
            _write(memory.edits, month, content, torn)

        def whole(
            f: proto.MemoryFile | None, before: int | None, b: int
        ) -> tuple[list[HistoryEdit], int]:
            return history_page(_whole(memory, f), before, b)

        assert _pages(table.page, file, budget) == _pages(whole, file, budget)
        # The journal changes between requests: months appended to (a torn line
        # finished), replaced whole (a forget's rewrite), or new.
        for month, (content, torn) in enumerate(grown):
            path = memory.edits / f"2026-{month + 1:02d}.jsonl"
            if month % 2 == 0 and path.exists():
                old = path.read_bytes()
                if old.endswith(b'{"kind": "app'):
                    old = old[: -len(b'{"kind": "app')]
                _write(memory.edits, month, content, torn)
                path.write_bytes(old + path.read_bytes())  # in place: an append
            else:
                _write(memory.edits, month, content, torn)
                fresh = path.with_suffix(".new")
                shutil.copyfile(path, fresh)
                fresh.replace(path)  # a new inode, as an atomic rewrite gives
        assert _pages(table.page, file, budget) == _pages(whole, file, budget)
    finally:
        shutil.rmtree(root, ignore_errors=True)
