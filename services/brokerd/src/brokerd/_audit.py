"""The audit log, `audit/YYYY-MM.jsonl`, signed with brokerd's key; its head, `audit/head`.

Records are `proto.AuditRecord`: brokerd writes V2 (`proto.AuditRecordV2`), and reads and
verifies the V1 lines of logs written before it, each as its own bytes under its own MAC
domain, in one chain. Each carries its own MAC under brokerd's audit key
(`proto.audit_mac`) and, as `prev`, the MAC of the record before it, across month files
(the first record's is `proto.AUDIT_GENESIS`). The head (`proto.AuditHead`) holds the
number of records and the last one's MAC, under a MAC of its own; a new head is a line
appended to the head file, and the last line is the head (`_audit_files.py`). So a
changed or forged record fails its MAC, a removed, moved or copied one breaks the chain, a
cut tail no longer matches the head, and none of that can be re-signed or re-anchored
without the key.

`append` writes the line (one `write`), fsyncs it, then appends the head and fsyncs it.
If any of that fails, what was written is cut back and `append` raises OSError: the
record is not on record, and the caller must not run the call it describes. A record
that nothing waits on (a call's outcome, a denial) is appended with `durable=False`: its
line is written before `append` returns and made durable, with its head, just after (by
a task of the nursery given to `flush_in`), or by the next `append`, whichever comes
first. A crash in between can lose such a record, never one a call ran under: a
`started` record without its outcome already counts as the worst label (below).

At start (`open`) the whole log is walked and checked against the head. Records after
the head that are brokerd's (their MACs hold) are a crash between a record and its head,
and are taken in. What does not match is a warning (runbook audit-tampered) and is kept
in the head, so that `verify` fails from then on, across restarts, until the owner
starts a new log. The same walk gives each session's label as brokerd returned it: the
labels of the results it sent.

`verify` walks the log again and checks it against the head on disk and against what
this brokerd wrote last (its count and last MAC, in memory), which also catches a log
and head both put back to an earlier copy while brokerd runs. A running brokerd keeps
what it finds as a start does, in the head, and so does an append that finds the head
on disk is not the one it wrote last: the next record's head must not cover a break.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
import os
import re
from datetime import datetime
from pathlib import Path

import msgspec
import trio

import proto
from proto import (
    AUDIT_GENESIS,
    AUDIT_HEAD,
    AUDIT_LOG,
    AuditHead,
    AuditRecord,
    AuditRecordV2,
    Class,
    Label,
)

from ._audit_files import AuditFiles

__all__ = ["AUDIT_TAMPERED", "AUDIT_UNWRITABLE", "UNKNOWN_RESULT", "Audit", "Verdict"]

log = logging.getLogger("brokerd.audit")

AUDIT_TAMPERED = "audit-tampered"
"""The runbook entry for a log that does not match its chain or its head."""

AUDIT_UNWRITABLE = "audit-unwritable"
"""The runbook entry for a call refused because its record could not be written."""

UNKNOWN_RESULT = Label(class_=Class.secret, untrusted=True)
"""The label counted for a call whose outcome is not in the log: it may have reached its
session, and what it carried is unknown, so it counts as the worst (as damage does)."""

_MONTH_FILE = re.compile(r"\d{4}-\d{2}\.jsonl")
_encoder = msgspec.json.Encoder()
_head_decoder = msgspec.json.Decoder(AuditHead)


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """What `verify` found: how many records, and the first thing broken if any."""

    records: int
    broken_at: str | None = None


def _month_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _MONTH_FILE.fullmatch(p.name))


def _records(n: int) -> str:
    return f"{n:,} record" if n == 1 else f"{n:,} records"


@dataclasses.dataclass
class _Walk:
    """What one pass over the log found."""

    records: int = 0
    last: str = AUDIT_GENESIS
    """The last record's MAC: the `prev` the next record must carry."""
    last_where: str = "the start of the log"
    broken: str | None = None
    """The first place where the chain does not hold."""
    marked: str | None = None
    """The MAC of record number `mark` (`walk`'s argument), if the log has that many."""
    labels: dict[str, Label] = dataclasses.field(default_factory=dict)
    """Per session, the labels of the outcomes brokerd recorded, joined."""
    unfinished: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    """(session, call) of `started` records without an outcome, and where each is."""

    def note(self, record: AuditRecord, where: str) -> None:
        key = (record.session, record.call)
        if record.status == "started":
            self.unfinished[key] = where
            return
        self.unfinished.pop(key, None)
        seen = self.labels.get(record.session)
        self.labels[record.session] = record.label if seen is None else seen.join(record.label)


def _walk(directory: Path, key: bytes, *, mark: int | None = None) -> _Walk:
    """Read every record in order, following the chain; blocking."""
    walk = _Walk(marked=AUDIT_GENESIS if mark == 0 else None)
    for path in _month_files(directory):
        read_to = 0
        for line in AUDIT_LOG.lines(path):
            where = f"{path.name} line {line.number}"
            read_to = line.end
            walk.records += 1
            record = line.record
            if walk.broken is None:
                walk.broken = _check(key, line, where, walk)
            walk.last = record.mac if record is not None else ""
            walk.last_where = where
            if walk.records == mark:
                walk.marked = walk.last
            if record is not None:
                walk.note(record, where)
        if torn := path.stat().st_size - read_to:
            log.warning("%s ends in a torn line of %d bytes; skipped it", path, torn)
    return walk


def _check(key: bytes, line: proto.Line[AuditRecord], where: str, walk: _Walk) -> str | None:
    """What is wrong with the line at `where`, the log before it being intact; or None."""
    record = line.record
    if record is None:
        return f"{where}: not an audit record ({line.problem})"
    if _encoder.encode(record) != line.raw or not hmac.compare_digest(
        proto.audit_mac(key, record), record.mac
    ):
        return (
            f"{where}: its MAC does not match (the record was changed, or written without "
            "brokerd's key)"
        )
    if record.prev == walk.last:
        return None
    if walk.records == 1:
        return f"{where}: the first record's prev is not 64 zeros (records before it were removed)"
    return (
        f"{where}: its prev is not the MAC of {walk.last_where} (records were removed, "
        "moved or copied between them)"
    )


def _head_line(head: AuditHead) -> bytes:
    return _encoder.encode(head) + b"\n"


def _not_json(data: bytes) -> bool:
    """Whether `data` is not a JSON document at all (a torn line), as opposed to a wrong one."""
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return True
    return False


class Audit:
    """The writer and verifier of `{home}/audit`; one per brokerd."""

    def __init__(self, directory: Path, key_path: Path) -> None:
        self.directory = directory
        self.key_path = key_path
        self.head_path = directory / AUDIT_HEAD
        self.returned: dict[str, Label] = {}
        """Per session, the labels of the results brokerd returned to it (from `open`)."""
        self._lock = trio.Lock()
        self._key = b""
        self._files = AuditFiles(self.head_path)
        self._count = 0
        self._last = AUDIT_GENESIS
        """The count and last MAC of the records written (some perhaps not yet durable)."""
        self._synced = (0, AUDIT_GENESIS)
        """The count and last MAC of the durable records: what the head on disk holds."""
        self._broken: str | None = None
        self._head_unsure = False
        """A failed append could not put the old head back: what is on disk is not known."""
        self._nursery: trio.Nursery | None = None

    def open(self) -> None:
        """Create the directory (0700) and the key, drop torn tails, check the log.

        Blocking: call it at start.

        Raises:
            OSError: the directory, the log or the head cannot be read or written.
            proto.KeyUnusable: the audit key cannot be used.
        """
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self._key = proto.ensure_key(self.key_path)
        for path in _month_files(self.directory):
            whole = 0
            for line in AUDIT_LOG.lines(path):
                whole = line.end
            if torn := path.stat().st_size - whole:
                # A crash in the middle of a write: that line never was a record.
                log.warning("%s ends in a torn line of %d bytes; removed it", path, torn)
                os.truncate(path, whole)
        head, head_problem = self._read_head(at_start=True)
        walk = _walk(self.directory, self._key, mark=head.records if head else None)
        findings = [walk.broken] if walk.broken else []
        if head_problem is not None:
            findings.append(head_problem)
        elif head is None and walk.records:
            findings.append(
                f"the head file {self.head_path} is missing, and the log holds "
                f"{_records(walk.records)}"
            )
        elif head is not None:
            findings += self._against(head, walk)
        for finding in findings:
            log.warning(
                "the audit log is not as brokerd wrote it: %s (runbook: %s)",
                finding,
                AUDIT_TAMPERED,
            )
        broken = head.broken if head is not None else None
        if broken is not None:
            log.warning("the audit log was found broken: %s (runbook: %s)", broken, AUDIT_TAMPERED)
        elif findings:
            broken = f"found at start-up on {proto.utc_stamp()}: {'; '.join(findings)}"
        for (session, call), where in walk.unfinished.items():
            log.warning(
                "call %s of session %s (%s) has no outcome in the audit log (brokerd stopped "
                "while it ran, or its outcome could not be written); its session counts as %s",
                call,
                session,
                where,
                UNKNOWN_RESULT.describe(),
            )
            seen = walk.labels.get(session)
            walk.labels[session] = UNKNOWN_RESULT if seen is None else seen.join(UNKNOWN_RESULT)
        self.returned = walk.labels
        self._count, self._last, self._broken = walk.records, walk.last, broken
        self._synced = (self._count, self._last)
        # One line again, whatever it held: the heads before it say nothing more.
        self._files.replace_head(_head_line(self._head()))

    @property
    def broken(self) -> str | None:
        """What was found wrong with the log at start (kept across restarts), if anything."""
        return self._broken

    def _against(self, head: AuditHead, walk: _Walk) -> list[str]:
        """What does not match between a genuine head and the log; [] when it all does."""
        if head.records > walk.records:
            return [
                f"the log holds {_records(walk.records)} but its head says {head.records:,}: "
                "records were removed from its end"
            ]
        if walk.marked != head.last:
            return [
                f"record {head.records:,} of the log is not the one its head names: records "
                "were changed, or the log was cut and other records put in their place"
            ]
        if head.records < walk.records and walk.broken is None:
            log.warning(
                "the audit head was %s behind the log (brokerd stopped between writing a "
                "record and its head); brought it up to date",
                _records(walk.records - head.records),
            )
        return []

    def _head(self, *, synced: bool = False) -> AuditHead:
        """The head for what this brokerd has written (or made durable, with `synced`)."""
        records, last = self._synced if synced else (self._count, self._last)
        mac = proto.audit_head_mac(self._key, records=records, last=last, broken=self._broken)
        return AuditHead(records=records, last=last, broken=self._broken, mac=mac)

    def _read_head(self, *, at_start: bool = False) -> tuple[AuditHead | None, str | None]:
        """The head on disk (None when there is none), or the sentence why it is unusable.

        The head is the file's last line. A last line without its newline is a head
        written whole (as brokerd wrote them before its heads were appended), or, at a
        start and after a head line, one torn by a crash (the power cut while it was
        written): the line before it is the head, and the start replaces the file.

        Raises:
            OSError: it exists but cannot be read.
        """
        try:
            data = self.head_path.read_bytes()
        except FileNotFoundError:
            return None, None
        *lines, last = data.split(b"\n")
        if last and at_start and lines and lines[-1] and _not_json(last):
            log.warning(
                "%s ends in a torn line of %d bytes (a crash while a head was written); "
                "the line before it is the head",
                self.head_path,
                len(last),
            )
            last = b""
        try:
            head = _head_decoder.decode(last or (lines[-1] if lines else b""))
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return None, f"the head file {self.head_path} is not a head ({exc})"
        mac = proto.audit_head_mac(
            self._key, records=head.records, last=head.last, broken=head.broken
        )
        if not hmac.compare_digest(mac, head.mac):
            return None, (
                f"the head file {self.head_path} is not brokerd's: its MAC does not match "
                "(it was edited or replaced)"
            )
        return head, None

    def flush_in(self, nursery: trio.Nursery) -> None:
        """Make records appended with `durable=False` durable in tasks of `nursery`.

        Until this is called such records are made durable before `append` returns.
        """
        self._nursery = nursery

    async def append(self, record: AuditRecordV2, now: datetime, *, durable: bool = True) -> None:
        """Chain `record` to the last one, append it to the month of `now`, move the head.

        With `durable` (a call's decision, before the call runs) the line and its head are
        fsynced before this returns; without, the line is written and its fsync and head
        follow at once in a task of the `flush_in` nursery (a call's outcome, whose answer
        need not wait for them).

        Raises:
            OSError: the record could not be written (or, with `durable`, made durable);
                it is not in the log (what was written was cut back) and the chain is left
                as it was.
        """
        durable = durable or self._nursery is None
        async with self._lock:
            await trio.to_thread.run_sync(self._append_now, record, now, durable)
        if not durable:
            assert self._nursery is not None
            self._nursery.start_soon(self.flush)

    async def flush(self) -> None:
        """Make every record written durable, with its head; a failure is logged."""
        with trio.CancelScope(shield=True):  # records of a stopping brokerd too
            async with self._lock:
                if self._synced[0] != self._count:
                    await trio.to_thread.run_sync(self._flush_now)

    def _flush_now(self) -> None:
        try:
            self._sync()
        except OSError as exc:
            log.error(
                "audit records could not be made durable and were taken back: %s (runbook: %s)",
                exc,
                AUDIT_UNWRITABLE,
            )

    def _append_now(self, record: AuditRecordV2, now: datetime, durable: bool) -> None:
        if (
            self._broken is None
            and not self._head_unsure
            and (problem := self._head_problem()) is not None
        ):
            self._keep(problem)
        path = proto.month_file(self.directory, now)
        if self._files.log_path != path:
            self._sync()  # a new month: an fsync of its file would not cover the last one's
        chained = msgspec.structs.replace(record, prev=self._last)
        signed = msgspec.structs.replace(chained, mac=proto.audit_mac(self._key, chained))
        self._files.write(path, _encoder.encode(signed))
        self._count, self._last = self._count + 1, signed.mac
        if durable:
            self._sync()

    def _sync(self) -> None:
        """Make the lines written durable, then their head; else take them all back.

        Raises:
            OSError: the records since the last durable head are not in the log.
        """
        if self._synced[0] == self._count and not self._head_unsure:
            return
        try:
            self._files.sync(_head_line(self._head()))
        except OSError:
            lost = self._count - self._synced[0]
            self._count, self._last = self._synced
            if not self._files.cut_back():
                self._head_unsure = True  # brokerd's own head, whichever: not a finding
            if lost > 1:
                log.error(
                    "%s taken back from the audit log: they could not be made durable",
                    _records(lost),
                )
            raise
        self._synced = (self._count, self._last)
        self._head_unsure = False

    async def call_state(self, session: str, call: str) -> proto.CallStateReply:
        """What the log says of one call: its last record, newest month first."""
        return await trio.to_thread.run_sync(self._call_state_now, session, call)

    def _call_state_now(self, session: str, call: str) -> proto.CallStateReply:
        last: AuditRecord | None = None
        for path in reversed(_month_files(self.directory)):
            for line in proto.AUDIT_LOG.lines(path):
                record = line.record
                if record is not None and record.session == session and record.call == call:
                    last = record
            if last is not None:
                break
        if last is None:
            return proto.CallStateReply(state="unknown")
        if last.status == "started":
            return proto.CallStateReply(state="started")
        if last.decision in ("denied", "refused"):
            return proto.CallStateReply(state=last.decision, status=last.status)
        return proto.CallStateReply(state="finished", status=last.status)

    async def verify(self) -> Verdict:
        """Walk the chain from the first record; name the first thing broken."""
        async with self._lock:
            return await trio.to_thread.run_sync(self.verify_now)

    def verify_now(self) -> Verdict:
        """`verify`, blocking; the caller keeps writers out.

        What it finds is kept in the head (as a start keeps it), so that the next append,
        which rewrites the head, cannot make the log verify again.
        """
        self._flush_now()  # records written, not yet durable: a head must not precede them
        walk = _walk(self.directory, self._key)
        found = walk.broken
        if found is None and self._broken is not None:
            return Verdict(records=walk.records, broken_at=self._broken)
        if found is None and walk.records != self._count:
            more = "added that brokerd did not write"
            less = "removed from its end"
            found = (
                f"the log holds {_records(walk.records)} but brokerd has written "
                f"{self._count:,}: records were {less if walk.records < self._count else more}"
            )
        if found is None and walk.last != self._last:
            found = (
                f"{walk.last_where}: it is not the record brokerd wrote last (it was "
                "changed, or the log was replaced)"
            )
        if found is None and not self._head_unsure:
            found = self._head_problem()
        if found is None:
            return Verdict(records=walk.records)
        if self._broken is None:
            self._keep(found)
            try:
                self._files.replace_head(_head_line(self._head()))
            except OSError as exc:
                log.error(
                    "the finding could not be kept in the audit head: %s (runbook: %s)",
                    exc,
                    AUDIT_UNWRITABLE,
                )
        return Verdict(records=walk.records, broken_at=found)

    def _head_problem(self) -> str | None:
        """What is wrong with the head on disk, compared with the one written last; or None.

        Raises:
            OSError: it exists but cannot be read.
        """
        if self._files.head_unchanged():
            return None
        self._files.forget_head()  # whatever is there now: the next head replaces it
        head, problem = self._read_head()
        if problem is not None:
            return problem
        if head != self._head(synced=True):
            missing = head is None
            return f"the head file {self.head_path} " + (
                "is missing" if missing else "is not the one brokerd wrote last (replaced)"
            )
        return None

    def _keep(self, finding: str) -> None:
        """Keep a break found while running, as a start keeps one: in every head from now on."""
        log.warning(
            "the audit log is not as brokerd wrote it: %s (runbook: %s)", finding, AUDIT_TAMPERED
        )
        self._broken = f"found on {proto.utc_stamp()} while brokerd ran: {finding}"

    # -- forget: STUB (replaced by forget-audit) ----------------------------------------
    # The API brokerd's forget is written against; the audit helper's branch replaces these
    # bodies (redacting records, the signed forget record). They touch no record here.

    @property
    def forget_dir(self) -> Path:
        """`audit/.forget/`: brokerd's plans, and its forget ledgers."""
        return self.directory / ".forget"

    def forget_look(self, text: str) -> int:
        """How many records hold `text`; blocking."""
        return sum(
            1
            for path in _month_files(self.directory)
            for raw in path.read_bytes().splitlines()
            if proto.redact_line(raw, text) is not None
        )

    def forget_prepare(self, plan: str, text: str) -> proto.ForgetPlan:
        """Write this part's plan (uncommitted); blocking."""
        prepared = proto.ForgetPlan(plan=plan, counts={"audit": self.forget_look(text)})
        proto.write_plan(self.forget_dir, prepared)
        return prepared

    async def forget_apply(self, plan: str, text: str | None) -> proto.ForgetApplied:
        """Apply and delete the plan (stub: deletes it)."""
        stored = proto.read_plan(self.forget_dir, plan)
        if stored is None:
            return proto.ForgetApplied(plan=plan)
        proto.remove_plan(self.forget_dir, plan)
        holdings = [
            proto.Holding(store=k, count=v, unit="records") for k, v in stored.counts.items()
        ]
        return proto.ForgetApplied(plan=plan, holdings=holdings)

    def forget_abort(self, plan: str) -> None:
        """Delete the plan if it is not committed; blocking."""
        stored = proto.read_plan(self.forget_dir, plan)
        if stored is not None and not stored.committed:
            proto.remove_plan(self.forget_dir, plan)

    async def append_forget(
        self,
        *,
        plan: str,
        counts: dict[str, int],
        digest: str,
        surface: proto.Surface,
        session: str | None,
    ) -> None:
        """Append the forget's own record (stub: nothing)."""

    def forget_digest(self, text: str) -> str:
        """The keyed digest of `text` the forget's record keeps."""
        return proto.digest(self._key, text)
