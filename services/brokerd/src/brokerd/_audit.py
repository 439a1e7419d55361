"""The audit log: one record per decision, hash-chained, in `audit/YYYY-MM.jsonl`.

Each record's `prev` is the sha256 of the previous record's line (its bytes without the
newline), across month files; the first record's is 64 zeros. A record is appended
whole, with one `write` on an O_APPEND descriptor, and fsynced. `verify` walks the chain
and names the first broken record; brokerd also remembers the hash of the last line it
wrote, so a change to the newest record, or a removed tail, is found too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

import msgspec
import trio

import proto
from proto import Label

__all__ = ["GENESIS", "Audit", "AuditRecord", "Decision", "Verdict"]

log = logging.getLogger("brokerd.audit")

GENESIS = "0" * 64
"""The `prev` of the very first record."""

Decision = Literal["auto", "approved", "denied", "refused"]
_MONTH_FILE = re.compile(r"\d{4}-\d{2}\.jsonl")


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One decision (ARCHITECTURE §5), plus `reason`: why it was denied or refused."""

    time: str
    session: str
    call: str
    tool: str
    arguments: str
    grant: str | None
    grant_sha256: str | None
    decision: Decision
    approval: str | None
    label: Label
    status: Literal["ok", "error", "denied"]
    reason: str | None = None
    prev: str = GENESIS


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """What `verify` found: how many records, and the first broken one if any."""

    records: int
    broken_at: str | None = None


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AuditRecord)


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def _month_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _MONTH_FILE.fullmatch(p.name))


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The complete lines of one file, numbered from 1; a torn final line is skipped."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines[-1]:
        log.warning("%s ends in a torn line of %d bytes; skipped it", path, len(lines[-1]))
    yield from enumerate(lines[:-1], start=1)


class Audit:
    """The writer and verifier of `{home}/audit`; one per brokerd."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = trio.Lock()
        self._last = GENESIS

    def open(self) -> None:
        """Create the directory (0700), drop a torn final line, find the chain's head.

        Blocking: call it at start.
        """
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        files = _month_files(self.directory)
        if not files:
            return
        newest = files[-1]
        data = newest.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            # A crash in the middle of a write: that line never was a record.
            log.warning("%s ends in a torn line of %d bytes; removed it", newest, len(data) - end)
            os.truncate(newest, end)
        for path in reversed(files):
            data = path.read_bytes().rstrip(b"\n")
            if data:
                self._last = _digest(data.rsplit(b"\n", 1)[-1])
                return

    async def append(self, record: AuditRecord, now: datetime) -> None:
        """Chain `record` to the last one and append it to the month of `now`.

        Raises:
            OSError: the line could not be written; the chain is left as it was.
        """
        async with self._lock:
            line = _encoder.encode(msgspec.structs.replace(record, prev=self._last))
            path = self.directory / f"{now:%Y-%m}.jsonl"
            await trio.to_thread.run_sync(proto.append_line, path, line)
            self._last = _digest(line)

    async def verify(self) -> Verdict:
        """Walk the chain from the first record; name the first broken one."""
        async with self._lock:
            return await trio.to_thread.run_sync(self.verify_now)

    def verify_now(self) -> Verdict:
        """`verify`, blocking; the caller keeps writers out."""
        expected = GENESIS
        count = 0
        previous = "the start of the log"
        for path in _month_files(self.directory):
            for number, line in _lines(path):
                where = f"{path.name} line {number}"
                count += 1
                try:
                    record = _decoder.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    return Verdict(records=count, broken_at=f"{where}: not an audit record ({exc})")
                if record.prev != expected:
                    if expected == GENESIS:
                        reason = "the first record's prev is not 64 zeros"
                        return Verdict(records=count, broken_at=f"{where}: {reason}")
                    return Verdict(
                        records=count,
                        broken_at=f"{previous}: its sha256 is not the prev of {where} "
                        "(it was changed, or a record after it was removed)",
                    )
                expected = _digest(line)
                previous = where
        if expected != self._last:
            if count == 0:
                return Verdict(records=0, broken_at="the log is empty but records were written")
            return Verdict(
                records=count,
                broken_at=f"{previous}: its sha256 is not that of the last record brokerd "
                "wrote (it was changed, or records after it were removed)",
            )
        return Verdict(records=count)
