"""The audit log: one record per decision, hash-chained, in `audit/YYYY-MM.jsonl`.

The record is `proto.AuditRecord`. Each record's `prev` is the sha256 of the previous
record's line (its bytes without the newline), across month files; the first record's
is `proto.AUDIT_GENESIS`. A record is appended whole, with one `write` on an O_APPEND
descriptor, and fsynced. `verify` walks the chain and names the first broken record;
brokerd also remembers the hash of the last line it wrote, so a change to the newest
record, or a removed tail, is found too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from datetime import datetime
from pathlib import Path

import msgspec
import trio

import proto
from proto import AUDIT_GENESIS, AUDIT_LOG, AuditRecord

__all__ = ["Audit", "Verdict"]

log = logging.getLogger("brokerd.audit")

_MONTH_FILE = re.compile(r"\d{4}-\d{2}\.jsonl")


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """What `verify` found: how many records, and the first broken one if any."""

    records: int
    broken_at: str | None = None


_encoder = msgspec.json.Encoder()


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def _month_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _MONTH_FILE.fullmatch(p.name))


class Audit:
    """The writer and verifier of `{home}/audit`; one per brokerd."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = trio.Lock()
        self._last = AUDIT_GENESIS

    def open(self) -> None:
        """Create the directory (0700), drop a torn final line, find the chain's head.

        Blocking: call it at start.
        """
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        files = _month_files(self.directory)
        if not files:
            return
        for path in reversed(files):
            last = None
            for line in AUDIT_LOG.lines(path):
                last = line
            end = last.end if last is not None else 0
            if path == files[-1] and (torn := path.stat().st_size - end):
                # A crash in the middle of a write: that line never was a record.
                log.warning("%s ends in a torn line of %d bytes; removed it", path, torn)
                os.truncate(path, end)
            if last is not None:
                self._last = _digest(last.raw)
                return

    async def append(self, record: AuditRecord, now: datetime) -> None:
        """Chain `record` to the last one and append it to the month of `now`.

        Raises:
            OSError: the line could not be written; the chain is left as it was.
        """
        async with self._lock:
            line = _encoder.encode(msgspec.structs.replace(record, prev=self._last))
            path = proto.month_file(self.directory, now)
            await trio.to_thread.run_sync(proto.append_line, path, line)
            self._last = _digest(line)

    async def verify(self) -> Verdict:
        """Walk the chain from the first record; name the first broken one."""
        async with self._lock:
            return await trio.to_thread.run_sync(self.verify_now)

    def verify_now(self) -> Verdict:
        """`verify`, blocking; the caller keeps writers out."""
        expected = AUDIT_GENESIS
        count = 0
        previous = "the start of the log"
        for path in _month_files(self.directory):
            read_to = 0
            for line in AUDIT_LOG.lines(path):
                where = f"{path.name} line {line.number}"
                count += 1
                read_to = line.end
                if line.record is None:
                    return Verdict(
                        records=count, broken_at=f"{where}: not an audit record ({line.problem})"
                    )
                if line.record.prev != expected:
                    if expected == AUDIT_GENESIS:
                        reason = "the first record's prev is not 64 zeros"
                        return Verdict(records=count, broken_at=f"{where}: {reason}")
                    return Verdict(
                        records=count,
                        broken_at=f"{previous}: its sha256 is not the prev of {where} "
                        "(it was changed, or a record after it was removed)",
                    )
                expected = _digest(line.raw)
                previous = where
            torn = path.stat().st_size - read_to
            if torn:
                log.warning("%s ends in a torn line of %d bytes; skipped it", path, torn)
        if expected != self._last:
            if count == 0:
                return Verdict(records=0, broken_at="the log is empty but records were written")
            return Verdict(
                records=count,
                broken_at=f"{previous}: its sha256 is not that of the last record brokerd "
                "wrote (it was changed, or records after it were removed)",
            )
        return Verdict(records=count)
