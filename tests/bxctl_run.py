"""Running a bxctl command from a trio test whose test doubles of the roles share its loop.

bxctl's one-request commands block (they use the blocking client, not trio), and its
`up` and `chat` start a trio loop of their own; either way the command runs in a worker
thread, so the test's own loop keeps serving the role doubles it talks to. A home given
with --home gets the `config/` folder that makes it a home, as `bxctl init` would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

import msgspec
import trio

import proto
from bxctl import app

CAP_S = 20

Handler = Callable[[proto.Message, proto.Connection], Awaitable[proto.Message]]
"""A role double: answers each request as the role would."""


async def serve(
    nursery: trio.Nursery, home: Path, spec: proto.Socket[proto.Message], handler: Handler
) -> None:
    """Serve `spec` at its default path under `home` (made a home) with `handler`."""
    (home / "config").mkdir(parents=True, exist_ok=True)  # a home, as bxctl looks for one
    await nursery.start(
        lambda task_status: proto.serve_unix(
            spec, spec.default_path(home), handler, shutdown=trio.Event(), task_status=task_status
        )
    )


async def run(*argv: str) -> object:
    """`bxctl ARGV` in a worker thread; its return value (the exit code)."""
    args = list(argv)
    if "--home" in args:
        (Path(args[args.index("--home") + 1]) / "config").mkdir(parents=True, exist_ok=True)
    with trio.fail_after(CAP_S):
        return await trio.to_thread.run_sync(partial(app, args, result_action="return_value"))


def write_session(
    home: Path,
    name: str,
    *,
    system: str = "s",
    created: str = "2026-11-30T08:00:00Z",
    log: bytes = b"",
) -> Path:
    """A session as loopd leaves it in `home`: its baseline and its log; its directory."""
    directory = home / "sessions" / name
    directory.mkdir(parents=True)
    baseline = proto.Baseline(
        session=name, epoch=0, created=created, model="m", system=system, tools=[]
    )
    (directory / proto.BASELINE_FILE).write_bytes(msgspec.json.encode(baseline))
    (directory / proto.LOG_FILE).write_bytes(log)
    return directory
