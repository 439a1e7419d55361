"""memoryd's four forget requests and its start-up recovery (the contract of issue 31).

Look counts and writes nothing. Prepare writes the plan (uncommitted) and its steps.
Apply, with the text, plans again from the files as they are now, commits the plan,
applies it, verifies it while the text is in hand, and deletes it; without the text it
finishes a stored plan. At start, committed plans are finished before memoryd serves an
append (`recover_files`, before the sockets) or a recall, a reindex or a catch-up
(`recover`, before the index is ready).

Every step holds the edit lock (no memory edit meanwhile), the recall log's lock while
files are rewritten (no line lost to a rewrite), and the whole index (`Index.forgetting`:
no rebuild, write, search or scan of the best scores).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

import proto
from proto import ForgetApplied, ForgetLooked, ForgetPlan, ForgetPrepared, Holding, ServiceError

from ._edits import EditApplier
from ._files import MemoryDir
from ._forget import (
    PLAN_DIR,
    ForgetSteps,
    RowStep,
    apply_plan_files,
    holding_entries,
    memory_files,
    near_entries,
    plan_files,
    raw_holders,
    read_steps,
    remove_steps,
    stale_plans,
    write_steps,
)
from ._index import RUNBOOK, Forgetting, Index, IndexDamaged

__all__ = ["NEAR_MAX", "SNIPPET_CHARS", "Forgets"]

log = logging.getLogger("memoryd.forget")

NEAR_MAX = 10
SNIPPET_CHARS = 160

_ENTRY_FILES = ("memory.md", "user.md", "archive.md")


def holdings_of(counts: dict[str, int]) -> list[Holding]:
    """The counts of a plan as the owner reads them (no text); stores holding nothing left out."""
    found: list[Holding] = []
    removed = {name: counts[name] for name in _ENTRY_FILES if counts.get(name)}
    if removed:
        found.append(
            Holding(
                store="memory files",
                count=sum(removed.values()),
                unit="entries",
                names=list(removed),
            )
        )
    for store, unit in (("journal", "lines"), ("recall log", "lines"), ("index", "rows")):
        if counts.get(store):
            found.append(Holding(store=store, count=counts[store], unit=unit))
    return found


def snippet(text: str, needle: str) -> str:
    """At most `SNIPPET_CHARS` of `text` on one line, around the first of `needle`'s words."""
    flat = " ".join(text.split())
    if len(flat) <= SNIPPET_CHARS:
        return flat
    lowered = flat.lower()
    starts = [at for word in proto.words(needle) if (at := lowered.find(word)) >= 0]
    start = max(0, min(starts, default=0) - 40)
    width = SNIPPET_CHARS - 2
    start = min(start, len(flat) - width)
    piece = flat[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(flat) else "")


class Forgets:
    """The forget's requests on memoryd's stores; one at a time."""

    def __init__(self, memory: MemoryDir, edits: EditApplier, index: Index) -> None:
        self.memory = memory
        self.edits = edits
        self.index = index
        self.plans = memory.root / PLAN_DIR
        self.files_lock = threading.Lock()
        """Held while the recall log gets a line, and while a forget rewrites files."""

    # -- the requests ----------------------------------------------------------------

    async def look(self, needle: str) -> ForgetLooked:
        """What of memoryd's stores holds `needle`: counts, entries, near matches."""
        found = await trio.to_thread.run_sync(self._look_files, needle)
        entries, counts, near = found
        try:
            counts["index"], near_rows = await self.index.look(needle)
        except IndexDamaged as exc:
            raise ServiceError("memory-index-damaged", str(exc), runbook=RUNBOOK) from None
        shown: list[str] = []
        for text in [*near, *near_rows]:
            piece = snippet(text, needle)
            if piece not in shown:
                shown.append(piece)
        return ForgetLooked(
            holdings=[h for h in holdings_of(counts) if h.store != "memory files"],
            entries=entries,
            near=shown[:NEAR_MAX],
        )

    def _look_files(self, needle: str) -> tuple[list[proto.ForgetEntry], dict[str, int], list[str]]:
        entries = holding_entries(self.memory, needle)
        planned = plan_files(self.memory, needle, proto.new_plan_id())
        return entries, dict(planned.counts), near_entries(self.memory, needle)

    async def prepare(self, plan: str, needle: str) -> ForgetPrepared:
        """Write the plan for forgetting `needle`, uncommitted; change nothing else."""
        _check_id(plan)
        async with self._held():
            made = await trio.to_thread.run_sync(self._plan, plan, needle, False)
        return ForgetPrepared(plan=plan, holdings=holdings_of(made.counts))

    async def apply(self, plan: str, needle: str | None) -> ForgetApplied:
        """Decide the forget: plan again (with the text), apply, verify, delete the plan."""
        _check_id(plan)
        async with self._held():
            if needle is not None:
                made = await trio.to_thread.run_sync(self._plan, plan, needle, True)
            else:
                stored = await trio.to_thread.run_sync(proto.read_plan, self.plans, plan)
                if stored is None:
                    return ForgetApplied(plan=plan)  # finished before
                made = stored
                if not made.committed:
                    made = ForgetPlan(
                        plan=plan, committed=True, edits=made.edits, counts=made.counts
                    )
                    await trio.to_thread.run_sync(proto.write_plan, self.plans, made)
            conflicts = await self._finish(made, needle)
        if conflicts:
            log.warning("forget %s: %d conflict(s): %s", plan, len(conflicts), conflicts[0])
        log.info("forget %s applied: %s", plan, made.counts)
        return ForgetApplied(plan=plan, holdings=holdings_of(made.counts), conflicts=conflicts)

    async def abort(self, plan: str) -> None:
        """Delete the plan if it was never committed."""
        _check_id(plan)
        async with self.edits.lock:
            stored = await trio.to_thread.run_sync(proto.read_plan, self.plans, plan)
            if stored is not None and not stored.committed:
                await trio.to_thread.run_sync(self._remove, plan)

    # -- start -----------------------------------------------------------------------

    def recover_files(self) -> int:
        """At start, before any socket: finish the files of every committed plan.

        Uncommitted plans older than an hour (never decided) are deleted. Blocking.
        Returns the committed plans found (their index part follows in `recover`).
        """
        for stale in list(stale_plans(self.plans)):
            log.info("deleted forget plan %s: prepared, never decided", stale)
            self._remove(stale)
        committed = 0
        for plan in self._committed():
            conflicts = apply_plan_files(self.memory, plan, read_steps(self.plans, plan.plan))
            for conflict in conflicts:
                log.warning("forget %s at start: %s", plan.plan, conflict)
            committed += 1
        return committed

    async def recover(self, opened: bool) -> None:
        """Before the index serves: finish every committed plan, files and index.

        `opened`: the index file was opened; False when it was built anew (from files
        the forget has redacted already), when its rows' part has nothing left to do.
        """
        plans = await trio.to_thread.run_sync(self._committed)
        for plan in plans:
            async with self.edits.lock:
                conflicts = await trio.to_thread.run_sync(self._apply_files, plan)
                if opened:
                    async with self.index.forgetting():
                        conflicts += await self._apply_index(plan.plan, None)
                for conflict in conflicts:
                    log.warning("forget %s at start: %s", plan.plan, conflict)
                await trio.to_thread.run_sync(self._remove, plan.plan)
            log.info("finished forget %s at start: %s", plan.plan, plan.counts)

    # -- the steps -------------------------------------------------------------------

    def _committed(self) -> list[ForgetPlan]:
        found = []
        for path in proto.plan_paths(self.plans):
            plan = proto.read_plan(self.plans, path.stem)
            if plan is not None and plan.committed:
                found.append(plan)
        return found

    @asynccontextmanager
    async def _held(self) -> AsyncIterator[None]:
        """The edit lock and the whole index, once the start-up work is done."""
        await self.index.caught_up.wait()
        async with self.edits.lock, self.index.forgetting():
            yield

    def _plan(self, plan: str, needle: str, committed: bool) -> ForgetPlan:
        """Plan files and index (blocking, under the locks); write steps, then the plan."""
        with self.files_lock:
            files = plan_files(self.memory, needle, plan)
        counts = dict(files.counts)
        rows: list[RowStep] = []
        archive = False
        if self.index.is_open:
            forgetting = self.index.plan_forget(needle)
            rows = [RowStep(rowid=r, old=old, new=new) for r, old, new in forgetting.rows]
            archive = forgetting.archive
            if forgetting.held:
                counts["index"] = forgetting.held
        # The archive's rows are read again whenever archive.md changes: its records moved.
        archive = archive or "archive.md" in counts
        write_steps(
            self.plans, plan, ForgetSteps(journal=files.journal, rows=rows, archive=archive)
        )
        made = ForgetPlan(plan=plan, committed=committed, edits=files.edits, counts=counts)
        proto.write_plan(self.plans, made)
        return made

    def _apply_files(self, plan: ForgetPlan) -> list[str]:
        with self.files_lock:
            return apply_plan_files(self.memory, plan, read_steps(self.plans, plan.plan))

    async def _apply_index(self, plan: str, needle: str | None) -> list[str]:
        """The index's part (under `Index.forgetting`); verified when `needle` is given."""
        if not self.index.is_open:
            return ["index: not open; its part is finished at memoryd's next start"]
        steps = await trio.to_thread.run_sync(read_steps, self.plans, plan)
        forgetting = Forgetting(
            rows=[(s.rowid, s.old, s.new) for s in steps.rows], archive=steps.archive
        )
        try:
            conflicts, vacuum = await trio.to_thread.run_sync(self.index.apply_forget, forgetting)
            self.index.recount()
            if vacuum:
                log.info("vacuuming %s once: it was built before secure-delete", self.index.path)
                await trio.to_thread.run_sync(self.index.vacuum)
        except IndexDamaged as exc:
            return [f"index: {exc}"]
        if not await self.index.truncate_wal():
            conflicts.append("index: readers kept its WAL from being truncated")
        if needle is not None:
            conflicts += await trio.to_thread.run_sync(self.index.verify_forget, needle)
        return conflicts

    async def _finish(self, plan: ForgetPlan, needle: str | None) -> list[str]:
        """Apply a committed plan, verify it, and delete it unless the index must wait."""
        conflicts = await trio.to_thread.run_sync(self._apply_files, plan)
        conflicts += await self._apply_index(plan.plan, needle)
        conflicts += await trio.to_thread.run_sync(self._verify_files, plan, needle)
        if self.index.is_open:
            await trio.to_thread.run_sync(self._remove, plan.plan)
        return conflicts

    def _verify_files(self, plan: ForgetPlan, needle: str | None) -> list[str]:
        problems: list[str] = []
        for edit in plan.edits:
            problems += proto.verify_edit(self.memory.root, edit)
        if needle is not None:
            holders = raw_holders(memory_files(self.memory), needle)
            problems += [f"{Path(p).name}: still holds it" for p in holders]
        return problems

    def _remove(self, plan: str) -> None:
        proto.remove_plan(self.plans, plan)
        remove_steps(self.plans, plan)


def _check_id(plan: str) -> None:
    if _PLAN.fullmatch(plan) is None:
        raise ServiceError("bad-arguments", f"not a plan id: {plan!r}")


_PLAN = re.compile(r"fg-[0-9a-z]{6,40}")
