"""`audit/checkpoint`: what a walk of the log up to a point found, signed.

So a start walks only the records after it.

A start needs, from the whole log, each session's returned labels, the calls without an
outcome and what the redactions list; walking every record for them made a start grow
with the log's age. The checkpoint holds them as of record `records` (MAC `last`), with
where that record ends (`file`, its size and line count) and the size of every month
file up to it, under a MAC of brokerd's audit key. brokerd writes one after a start's
walk and then every `CHECKPOINT_EVERY` records made durable, and after a forget rewrote
lines. A start uses it only when its MAC holds, the head is intact and counts at least
as many records, every month file up to `file` has the size it records, and the line
ending at its end is record `last`; anything else walks the whole log, as before.

The trade: a record before the checkpoint changed without changing its file's size is
not found by a start, only by `bxctl audit verify`, which always walks the whole log.
"""

from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import Literal

import msgspec

import proto
from proto import AUDIT_LOG, Label, TextField

from ._audit_files import month_files
from ._audit_walk import Listed, Position, Walk

__all__ = ["CHECKPOINT", "CHECKPOINT_EVERY", "Checkpoint", "position", "write"]

log = logging.getLogger("brokerd.audit")

CHECKPOINT = "checkpoint"
"""The checkpoint's name in the audit directory."""

CHECKPOINT_EVERY = 10_000
"""Records made durable between two checkpoints: at most this many are walked at a start
(about 0.1 s), and one is written every few days of heavy use."""

_DOMAIN = "boxmaker audit checkpoint v1"


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the walk of the log's first `records` records found (see the module)."""

    v: Literal[1] = 1
    records: int
    last: str
    file: str
    """The month file record `records` is the last line of."""
    line: int
    """The number of lines of `file`."""
    sizes: dict[str, int]
    """Every month file up to `file` (it too), and its size in bytes."""
    labels: dict[str, Label]
    unfinished: list[tuple[str, str, str]]
    """(session, call, where) of each `started` record without an outcome."""
    listed: dict[str, list[tuple[str, int, TextField, str]]]
    mac: str = ""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Checkpoint)


def _mac(key: bytes, checkpoint: Checkpoint) -> str:
    unsigned = msgspec.structs.replace(checkpoint, mac="")
    return proto.sign(key, _DOMAIN, _encoder.encode(unsigned))


def write(
    directory: Path,
    key: bytes,
    found: Walk,
    *,
    file: Path,
    size: int,
) -> None:
    """Write the checkpoint of `found` (every record durable), the last in `file` of `size`.

    Raises:
        OSError: it could not be written (the next start walks more).
    """
    with open(file, "rb") as f:
        line = f.read(size).count(b"\n")
    sizes = {p.name: p.stat().st_size for p in month_files(directory) if p.name < file.name}
    sizes[file.name] = size
    checkpoint = Checkpoint(
        records=found.records,
        last=found.last,
        file=file.name,
        line=line,
        sizes=sizes,
        labels=found.labels,
        unfinished=[(s, c, where) for (s, c), where in found.unfinished.items()],
        listed={plan: sorted(fields) for plan, fields in found.listed.items()},
    )
    checkpoint = msgspec.structs.replace(checkpoint, mac=_mac(key, checkpoint))
    proto.write_atomically(directory / CHECKPOINT, _encoder.encode(checkpoint))


def position(directory: Path, key: bytes, head_records: int) -> tuple[Position, Walk] | None:
    """Where a start's walk may begin, and what the log before it holds; None: the start.

    Raises:
        OSError: a file cannot be read.
    """
    try:
        data = (directory / CHECKPOINT).read_bytes()
    except FileNotFoundError:
        return None
    why = _unusable(directory, key, data, head_records)
    if isinstance(why, str):
        log.info("the audit checkpoint is not used (%s); walking the whole log", why)
        return None
    checkpoint = why
    listed: dict[str, set[Listed]] = {p: set(f) for p, f in checkpoint.listed.items()}
    found = Walk(
        labels=dict(checkpoint.labels),
        unfinished={(s, c): where for s, c, where in checkpoint.unfinished},
        listed=listed,
    )
    at = Position(
        records=checkpoint.records,
        last=checkpoint.last,
        file=checkpoint.file,
        offset=checkpoint.sizes[checkpoint.file],
        line=checkpoint.line + 1,
    )
    return at, found


def _unusable(directory: Path, key: bytes, data: bytes, head_records: int) -> Checkpoint | str:
    """The checkpoint, if the log still holds what it was made of; else why not."""
    try:
        checkpoint = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return f"not a checkpoint: {exc}"
    if not hmac.compare_digest(_mac(key, checkpoint), checkpoint.mac):
        return "its MAC does not match"
    if checkpoint.records > head_records:
        return f"it counts {checkpoint.records:,} records, the head {head_records:,}"
    files = {p.name: p for p in month_files(directory) if p.name <= checkpoint.file}
    if files.keys() != checkpoint.sizes.keys():
        return "the month files up to its own are not the ones it lists"
    for name, path in files.items():
        size = path.stat().st_size
        # Its own month file grows with every record after it: only what it covers is
        # fixed (and its last line is checked below); a month before is complete.
        if size < checkpoint.sizes[name] or (
            name != checkpoint.file and size > checkpoint.sizes[name]
        ):
            return f"{name} is not the size it records"
    last = _line_before(files[checkpoint.file], checkpoint.sizes[checkpoint.file])
    try:
        mac = AUDIT_LOG.decode(last).mac if last is not None else None
    except ValueError:
        mac = None
    if mac is None or not hmac.compare_digest(mac, checkpoint.last):
        return f"the last line of {checkpoint.file} it covers is not the record it names"
    return checkpoint


def _line_before(path: Path, end: int) -> bytes | None:
    """The line that ends (with its newline) at byte `end` of `path`; None if none does."""
    with open(path, "rb") as f:
        span = 4096
        while True:
            start = max(0, end - span)
            f.seek(start)
            data = f.read(end - start)
            if len(data) != end - start or not data.endswith(b"\n"):
                return None
            newline = data.rfind(b"\n", 0, len(data) - 1)
            if newline != -1:
                return data[newline + 1 : -1]
            if start == 0:
                return data[:-1]
            if span > AUDIT_LOG.max_line_bytes:
                return None
            span *= 4
