"""`verify`'s walk of a large log, one month file per core, the chain joined after (issue 32).

A month file's records chain to each other and, by its first record's `prev`, to the
month before. So each file is checked on its own in a worker process (`check_file`): its
first record is taken as chained to whatever its `prev` names, and every record after it
is checked as `walk` checks it. The parent (`join`) then joins the files in order: a
file's first `prev` must be the MAC of the record before it (the genesis for the first),
which is the one check a worker cannot make, and it replays what `verify` needs that
spans files (the redactions, which list records of earlier months, and the forgets).
The result is the sequential walk's (`_audit_walk.walk`) for what `verify` reads: its
records, last MAC and place, first break, forgets and torn tails; a start's labels and
unfinished calls are not gathered.

A worker also checks a call record the short way when it can (`_Quick`): it decodes
only what the MAC and the text commitments read, and empties the text fields and the
MAC in the line's own bytes (where the line is its canonical encoding) instead of
encoding the record again. The MAC is over those bytes, so a line it accepts is one
brokerd signed, with texts as msgspec encodes them: what the full check accepts too,
with the same facts. Anything else takes the full check (`_audit_walk.take`).

The workers come from a forkserver whose process has this module imported already
(brokerd runs threads, which a plain fork would copy in whatever state); the key goes
to them in the call, never through a file.
"""

from __future__ import annotations

import dataclasses
import hmac
import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import msgspec

from proto import AUDIT_GENESIS, AuditRecord, AuditRecordV3, TextField

from ._audit_files import month_files
from ._audit_walk import Lines, Macs, Walk, finish, line_at, prev_broken, signed, take

__all__ = ["PARALLEL_BYTES", "FileCheck", "check_file", "join", "walk_parallel", "worth_it"]

PARALLEL_BYTES = 32 * 1024 * 1024
"""Month files smaller than this in all are walked in brokerd's thread: about 45,000
records, a third of a second; the workers take about that long to start the first time."""


class _Commits(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    arguments: str
    proposed: str | None = None
    reason: str | None = None


class _Call(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="kind", tag="call"):
    """The fields of a V3 call record that its MAC and its text commitments read."""

    time: str
    session: str
    call: str
    arguments: str
    status: str
    reason: str | None = None
    proposed: str | None = None
    commits: _Commits
    prev: str
    mac: str


_call_decoder = msgspec.json.Decoder(_Call)
_encoder = msgspec.json.Encoder()
_MAC_KEY = b',"mac":"'
_MAC_END = len(b'"}')
_MAC_HEX = 64
_ARGUMENTS = b',"arguments":'
_REASON = b',"reason":'
_PROPOSED = b',"proposed":'
"""The text fields, in the order a V3 call record is encoded in."""


def _empty(raw: bytes, key: bytes, text: str, start: int, blank: list[bytes]) -> int:
    """Put in `blank` the line from `start` to the field `key`, and `""` for its `text`.

    Returns where the line goes on after the text, or -1 when the field is not found
    there, encoded as msgspec encodes `text` (or `start` is -1 already).
    """
    if start == -1 or (at := raw.find(key, start)) == -1:
        return -1
    at += len(key)
    literal = _encoder.encode(text)
    if not raw.startswith(literal, at):
        return -1
    blank += (raw[start:at], b'""')
    return at + len(literal)


class _Quick:
    """The short check of a V3 call record (see the module)."""

    def __init__(self, macs: Macs) -> None:
        self._macs = macs

    def check(self, raw: bytes, prev: str) -> _Call | None:
        """The record `raw` is, if it is a V3 call line brokerd signed chained to `prev`.

        None: not shown this way (the full check says what it is).
        """
        try:
            record = _call_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if record.prev != prev:
            return None
        # What the MAC signs (`proto.audit_mac`): the line with its texts and MAC emptied.
        blank: list[bytes] = []
        start = _empty(raw, _ARGUMENTS, record.arguments, 0, blank)
        if record.reason is not None:
            start = _empty(raw, _REASON, record.reason, start, blank)
        if record.proposed is not None:
            start = _empty(raw, _PROPOSED, record.proposed, start, blank)
        if start == -1:
            return None
        mac_at = len(raw) - _MAC_END - _MAC_HEX
        if (
            mac_at - len(_MAC_KEY) < start
            or not raw.startswith(_MAC_KEY, mac_at - len(_MAC_KEY))
            or not raw.endswith(b'"}')
        ):
            return None
        blank += (raw[start:mac_at], b'"}')
        mac = self._macs.v3.sign(b"".join(blank)).encode()
        return record if hmac.compare_digest(mac, raw[mac_at : mac_at + _MAC_HEX]) else None


@dataclasses.dataclass(frozen=True)
class FileCheck:
    """What a worker found in one month file, checked on its own."""

    path: Path
    records: int
    first_prev: str | None
    """The first record's `prev`, when that record is signed (its chain is then `join`'s
    to check); None when it is not a record or not signed (its break is in `broken`)."""
    last: str
    broken: str | None
    """The first break inside the file."""
    redacted: dict[tuple[str, int], tuple[str, dict[TextField, str]]]
    """As `Walk.redacted`: the records whose texts do not match, up to `broken`."""
    noted: list[tuple[int, AuditRecord]]
    """The records other than V3 calls, by line: what `Walk.note` takes in."""
    whole: int
    """Where the file's last whole line ends."""
    size: int


def check_file(path: Path, key: bytes) -> FileCheck:
    """Check the month file at `path` on its own (see the module); blocking."""
    macs = Macs(key)
    quick = _Quick(macs).check
    found = Walk()
    noted: list[tuple[int, AuditRecord]] = []
    name = path.name
    lines = Lines(path)
    first_prev: str | None = None
    number = 0
    for batch in lines:
        if number == 0 and batch:
            # Taken as chained to what it names: that it is, is `join`'s to check.
            first = signed(macs, batch[0])
            first_prev = None if first is None else first.prev
            found.last = AUDIT_GENESIS if first_prev is None else first_prev
        for raw in batch:
            number += 1
            if (
                found.broken is None
                and (call := quick(raw, found.last)) is not None
                and (unmatched := macs.unmatched_texts(call)) is not None
            ):
                if unmatched:
                    found.redacted[name, number] = (line_at(name, number), unmatched)
                found.last = call.mac
                continue
            if number > 1:
                found.last_at = (name, number - 1)  # what a broken `prev` is told against
            record = take(macs, found, raw, (name, number))
            if record is not None and type(record) is not AuditRecordV3:
                noted.append((number, record))
    return FileCheck(
        path=path,
        records=number,
        first_prev=first_prev,
        last=found.last,
        broken=found.broken,
        redacted=found.redacted,
        noted=noted,
        whole=lines.end,
        size=os.stat(path).st_size,
    )


def join(checks: Iterable[FileCheck], progress: Callable[[int], None] | None = None) -> Walk:
    """The walk of the whole log from its month files' checks, oldest first."""
    found = Walk()
    for check in checks:
        name = check.path.name
        if check.records:
            checked = found.broken is None
            if checked and check.first_prev is not None and check.first_prev != found.last:
                found.broken = prev_broken(
                    (name, 1), first=found.records == 0, last_where=found.last_where
                )
                checked = False
            elif checked:
                found.broken = check.broken
            events: list[tuple[int, AuditRecord | tuple[str, dict[TextField, str]]]] = [
                *check.noted,
                *(
                    ((line, entry) for (_, line), entry in check.redacted.items())
                    if checked
                    else ()
                ),
            ]
            for line, event in sorted(events, key=lambda e: e[0]):
                if isinstance(event, tuple):
                    found.redacted[name, line] = event
                else:
                    found.note(event, (name, line))
            found.records += check.records
            found.last = check.last
            found.last_at = (name, check.records)
        if check.size != check.whole:
            found.torn[check.path] = check.whole
        if progress is not None:
            progress(found.records)
    return finish(found)


def worth_it(directory: Path) -> bool:
    """Whether the log is big enough, and the machine has the cores, to walk it in parallel."""
    files = month_files(directory)
    return (
        (os.cpu_count() or 1) > 1
        and len(files) > 1
        and sum(p.stat().st_size for p in files) >= PARALLEL_BYTES
    )


def walk_parallel(
    directory: Path, key: bytes, *, progress: Callable[[int], None] | None = None
) -> Walk:
    """`verify`'s walk of the whole log (see the module), a month file per worker; blocking.

    `progress` is told the number of records joined after each month file.

    Raises:
        OSError: a month file cannot be read.
    """
    files = month_files(directory)
    if not files:
        return finish(Walk())
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    workers = min(os.cpu_count() or 1, len(files))
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        return join(pool.map(check_file, files, itertools.repeat(key), chunksize=1), progress)
