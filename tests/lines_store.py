"""A store of one JSON-lines file as a part of a forget: the smallest `proto.ForgetStore`.

The participant (`proto.ForgetPart`) is the real one; only the store is this small, so a
test of the protocol (proto's, or brokerd's coordination of it) reads what a forget did
from a file, as for the roles' own stores. `crash_after` makes `apply` stop after that
many lines rewritten, as a role killed half-way would (the file as it was then).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

import proto


class Crash(Exception):
    """The store stopped where a killed role would have."""


class LinesStore:
    """`log.jsonl` in `root`, redacted line by line."""

    steps = proto.NoSteps

    def __init__(self, root: Path, name: str, store: str) -> None:
        self.root = root
        self.name = name
        self.store = store
        self.crash_after: int | None = None
        root.mkdir(parents=True, exist_ok=True)

    @property
    def log(self) -> Path:
        return self.root / "log.jsonl"

    def write(self, *values: Any) -> None:
        self.log.write_bytes(b"\n".join(json.dumps(v).encode() for v in values) + b"\n")

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        yield

    def _edits(self, text: str) -> list[proto.FileEdit]:
        lines = proto.line_edits(self.log.read_bytes().split(b"\n"), text)
        return [proto.LinesEdit(path=self.log.name, lines=lines)] if lines else []

    async def look(self, text: str) -> proto.ForgetLooked:
        count = sum(len(e.lines) for e in self._edits(text) if isinstance(e, proto.LinesEdit))
        return proto.ForgetLooked(holdings=self.holdings({self.store: count}, None))

    async def plan(
        self, plan: str, text: str, stored: proto.ForgetPlan[proto.NoSteps] | None
    ) -> proto.ForgetPlan[proto.NoSteps]:
        edits = self._edits(text)
        count = sum(len(e.lines) for e in edits if isinstance(e, proto.LinesEdit))
        return proto.ForgetPlan(plan=plan, edits=edits, counts={self.store: count})

    async def apply(
        self,
        plan: proto.ForgetPlan[proto.NoSteps],
        text: str | None,
        keep: proto.Keep[proto.NoSteps],
    ) -> list[str]:
        conflicts: list[str] = []
        for edit in plan.edits:
            if self.crash_after is not None and isinstance(edit, proto.LinesEdit):
                part = proto.LinesEdit(path=edit.path, lines=edit.lines[: self.crash_after])
                proto.apply_file_edits(self.root, [part])
                raise Crash(f"{self.name} killed after {self.crash_after} lines")
            conflicts += proto.apply_file_edits(self.root, [edit])
        await trio.lowlevel.checkpoint()
        return conflicts

    async def verify(self, plan: proto.ForgetPlan[proto.NoSteps], text: str | None) -> list[str]:
        found = [p for e in plan.edits for p in proto.verify_file_edit(self.root, e)]
        if text is not None:
            found += [f"{e.path}: still holds it" for e in self._edits(text)]
        return found

    def holdings(
        self, counts: dict[str, int], plan: proto.ForgetPlan[proto.NoSteps] | None
    ) -> list[proto.Holding]:
        return [proto.Holding(store=self.store, count=counts.get(self.store, 0), unit="lines")]


def holding_files(root: Path, text: str) -> list[Path]:
    """Every file under `root` whose bytes hold `text` folded (`proto.fold`)."""
    wanted = proto.fold(text).encode()
    return [
        path
        for path in sorted(root.rglob("*"))
        if path.is_file()
        and wanted in proto.fold(path.read_bytes().decode(errors="replace")).encode()
    ]
