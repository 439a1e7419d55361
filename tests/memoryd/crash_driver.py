"""Kill a process applying memory edits at random moments; check nothing is ever broken.

Run by test_crash.py as `python crash_driver.py HOME KILLS SEED`. A forked child
applies a deterministic sequence of edits (adds, then consolidates that move, drop and
rewrite) forever; the parent SIGKILLs it after a random few milliseconds, then checks:
every file parses and is within its limit; memory.md equals the state after the last
journalled edit or after the edits in flight since; every whole journal line
follows the previous one (a line torn by a kill is a fragment of its own, never glued to
the next); archive.md parses and holds every moved entry; no entry was lost that was not
dropped. It prints a JSON summary, or exits 1 naming the violation.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import entries
import proto
from memoryd._edits import EditApplier, read_history, reconcile
from memoryd._files import MemoryDir
from proto import HandChange

SESSION = "chat-crashtest0001"


def next_args(state: tuple[str, ...]) -> dict[str, Any]:
    if len(state) >= 5:
        items: list[dict[str, Any]] = [
            {"old": state[0], "move": True},
            {"old": state[1], "drop": True},
            {"old": state[2], "text": state[2] + " +"},
        ]
        items += [{"old": s, "keep": True} for s in state[3:]]
        return {"action": "consolidate", "file": "memory", "entries": items}
    numbers = [int(s.split()[1]) for s in state]
    return {"action": "add", "file": "memory", "text": f"fact {max(numbers, default=0) + 1}"}


def after(state: tuple[str, ...]) -> entries.EditOutcome:
    return entries.apply_edit(state, proto.parse_memory_args(json.dumps(next_args(state))))


def child(memory: MemoryDir) -> None:
    applier = EditApplier(memory, bytes(32))
    n = 0
    while True:
        state = memory.read_entries("memory")
        args = json.dumps(next_args(state))
        request = proto.ToolRequest(
            session=SESSION,
            call=proto.ToolCall(id=f"c{n}", name="memory", arguments=args),
        )
        authority = proto.Authority(
            approval=f"ap{n}", token="", decided=proto.OwnerEdit(surface=proto.Surface(via="bxctl"))
        )
        reply = applier.apply_now(request, authority, proto.parse_memory_args(args))
        if reply.status != "ok":
            os._exit(3)
        n += 1


def fail(message: str) -> None:
    print(f"violation: {message}", file=sys.stderr)
    sys.exit(1)


def number(entry: str) -> int:
    return int(entry.split()[1])


def catch_up(start: tuple[str, ...], end: tuple[str, ...], what: str) -> set[str]:
    """The entries dropped by the edits that lead from `start` to `end`.

    A kill after an edit's rename and before its journal line leaves that edit applied
    but unrecorded (the journal never claims an edit that did not happen); consecutive
    kills can leave several such edits (on a loaded machine, fsync makes that window
    wide). `end` must be reachable from `start` by them: the sequence of edits is fixed,
    and its fact numbers only grow, so the search stops once it passes `end`'s highest.
    """
    dropped: set[str] = set()
    state = start
    highest = max((number(e) for e in end), default=0)
    while state != end and max((number(e) for e in state), default=0) <= highest:
        step = after(state)
        dropped |= set(state) - set(step.entries) - set(step.moved)
        state = step.entries
    if state == end:
        return dropped
    fail(f"{what} is not the state after any edit from the last journalled one: {end}")
    raise AssertionError


def check(memory: MemoryDir) -> int:
    try:
        state = memory.read_entries("memory")  # parses and is within the limit
    except Exception as exc:
        fail(f"memory.md unusable: {exc}")
    journal_files = sorted(memory.edits.glob("*.jsonl")) if memory.edits.exists() else []
    for path in journal_files:
        # A kill in the middle of a journal write can tear its line (the kernel writes a
        # line that crosses a page in two steps). The next append ends the fragment
        # first: it stays a line of its own, never glued to a whole record.
        for line in proto.EDIT_JOURNAL.read(path).skipped:
            if not line.raw.startswith(b'{"kind":') or line.raw.count(b'{"kind":') != 1:
                fail(f"{path} line {line.number} is not a torn journal line: {line.raw!r}")
    history = read_history(memory, None)
    previous: tuple[str, ...] = ()
    dropped: set[str] = set()
    for record in history:
        before = tuple(record.before)
        dropped |= catch_up(previous, before, f"journal line {proto.edit_id(record)}")
        if isinstance(record, HandChange):  # found at a restart: edits applied, not journalled
            dropped |= catch_up(before, tuple(record.after), "a hand change line")
            previous = tuple(record.after)
            continue
        if tuple(record.after) != after(before).entries:
            fail(f"journal line {record.call} records a wrong result")
        dropped |= set(before) - set(record.after) - set(record.moved)
        previous = tuple(record.after)
    dropped |= catch_up(previous, state, "memory.md")
    archived, problems = entries.parse_archive(memory.path("archive.md").read_text())
    if problems:
        fail(f"archive.md: {problems}")
    archive_texts = {a.text for a in archived}
    for record in history:
        if isinstance(record, HandChange):
            continue
        missing = set(record.moved) - archive_texts
        if missing:
            fail(f"moved entries missing from archive.md: {missing}")
    seen = set(state) | archive_texts | dropped
    highest = max((number(e) for e in seen), default=0)
    present = {number(e) for e in seen}
    lost = set(range(1, highest + 1)) - present
    if lost:
        fail(f"entries lost: fact {sorted(lost)}")
    return len(history)


def main() -> None:
    home, kills, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    starter = home / "starter.md"
    home.mkdir(parents=True, exist_ok=True)
    starter.write_text("soul")
    memory = MemoryDir(home / "memory")
    memory.ensure(starter)
    rng = random.Random(seed)
    edits = 0
    started = time.monotonic()
    made = 0
    # At least `kills` kills, and on until 200 edits were journalled between them: on a
    # loaded machine the child gets less done before each kill (at most 10x the kills).
    while made < kills or (edits < 200 and made < 10 * kills):
        made += 1
        pid = os.fork()
        if pid == 0:
            try:
                child(memory)
            finally:
                os._exit(4)
        time.sleep(rng.uniform(0.0, 0.015))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if not os.WIFSIGNALED(status):
            fail(f"the editing child exited by itself with {os.waitstatus_to_exitcode(status)}")
        edits = check(memory)
        memory.ensure(starter)  # what a restart does: leftovers cleaned, nothing overwritten
        reconcile(memory)  # and the journal accounts for an edit the kill left unjournalled
        leftovers = list(memory.root.glob(".*.tmp"))
        if leftovers:
            fail(f"temporary files survive a restart: {leftovers}")
    archived, _ = entries.parse_archive(memory.path("archive.md").read_text())
    print(
        json.dumps(
            {
                "kills": made,
                "journalled_edits": edits,
                "archived": len(archived),
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
