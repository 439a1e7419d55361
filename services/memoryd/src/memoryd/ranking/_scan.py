"""The frequent terms' best scores, read by a process of its own (`-m memoryd.ranking._scan`).

The scan tokenizes every row of the index in Python: minutes of CPU at ten million rows.
In a thread of memoryd it held the GIL nearly all the time, and every answer memoryd gave
meanwhile waited for it (memory_block went from 3 to 12 ms p50 while it ran). Here it
runs beside memoryd, at a lower priority, and hands back only the frontiers.

memoryd calls `scan_elsewhere`; the child reads a `ScanRequest` as JSON on its standard
input and writes `{term: {instances: tokens}}` as JSON on its standard output. Cancelling
the call (memoryd stopping, a rebuild's swap) kills the child; a child whose memoryd was
killed outright reads on to its end and dies writing to the closed pipe.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import msgspec
import sqlean
import trio

from . import _tuning
from ._bounds import Frontier, read_frontiers

__all__ = ["ScanFailed", "ScanRequest", "main", "scan_elsewhere"]


class ScanRequest(msgspec.Struct, frozen=True):
    """What the child reads: the index file and the terms to keep."""

    index: str
    terms: list[str]


class ScanFailed(Exception):
    """The scanning process failed; the message says how (its last lines of stderr)."""


_found = msgspec.json.Decoder(dict[str, dict[int, int]])


async def scan_elsewhere(index: Path, terms: list[str]) -> dict[bytes, Frontier]:
    """The frontiers of `terms` over the rows of `index`, read by a child process.

    Cancelling this kills the child.

    Raises:
        ScanFailed: the child failed or said something that is not frontiers.
    """
    request = msgspec.json.encode(ScanRequest(index=os.fspath(index), terms=terms))
    done = await trio.run_process(
        [sys.executable, "-m", "memoryd.ranking._scan"],
        stdin=request,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise ScanFailed(
            f"the scanning process exited with {done.returncode}: {' / '.join(said) or 'no words'}"
        )
    try:
        found = _found.decode(done.stdout)
    except msgspec.DecodeError as exc:
        raise ScanFailed(f"the scanning process's answer is not frontiers: {exc}") from exc
    return {term.encode(): frontier for term, frontier in found.items()}


def main() -> int:
    """The child: read the request, scan, write the frontiers."""
    request = msgspec.json.decode(sys.stdin.buffer.read(), type=ScanRequest)
    with contextlib.suppress(OSError):  # systemd's unit refuses setpriority: memoryd's then
        os.nice(_tuning.NICENESS)  # answers first, the loose bounds meanwhile
    uri = Path(request.index).resolve().as_uri() + "?mode=ro"
    conn = sqlean.connect(uri, uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute("BEGIN")
        found = read_frontiers(conn, request.terms)
        conn.execute("COMMIT")
    finally:
        conn.close()
    sys.stdout.buffer.write(
        msgspec.json.encode({term.decode(): frontier for term, frontier in found.items()})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
