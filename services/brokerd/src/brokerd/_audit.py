"""The audit log, `audit/YYYY-MM.jsonl`, signed with brokerd's key; its head, `audit/head`.

Records are `proto.AuditRecord`: brokerd writes V3 (`proto.AuditRecordV3` for a call, and
the forget's and the migration's own records). A V3 call record signs a keyed commitment
of each text field, not its text, so a forget can redact the text (`forget_apply`) and
the chain still verifies: a text that does not match its commitment is accepted only in
a record a later `proto.AuditRedaction` lists; anything else is tampering. V1 and V2
lines (written before) are moved to V3 once, at the first start that finds them in a
sound log (`_audit_migration.py`). Each record carries its own MAC under brokerd's audit
key (`proto.audit_mac`) and, as `prev`, the MAC of the record before it, across month
files (the first record's is `proto.AUDIT_GENESIS`). The head (`proto.AuditHead`) holds the
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

At start (`open`) the log is walked from its checkpoint (`_audit_checkpoint.py`: what a
walk up to a point found, signed, with the size of every month file it covers), or from
its first record when the checkpoint is missing or does not match; either way the walk
reaches the end and is checked against the head. A record before the checkpoint changed
in place is therefore found by `verify` (which always walks the whole log), not by a
start. Records after the head that are brokerd's (their MACs hold) are a crash between
a record and its head, and are taken in. What does not match is a warning (runbook
audit-tampered) and is kept in the head, so that `verify` fails from then on, across
restarts, until the owner starts a new log. The checkpoint and the walk give each
session's label as brokerd returned it: the labels of the results it sent.

`verify` walks the log again and checks it against the head on disk and against what
this brokerd wrote last (its count and last MAC, in memory), which also catches a log
and head both put back to an earlier copy while brokerd runs. A running brokerd keeps
what it finds as a start does, in the head, and so does an append that finds the head
on disk is not the one it wrote last: the next record's head must not cover a break.
"""

from __future__ import annotations

import hmac
import logging
import os
from datetime import datetime
from pathlib import Path

import msgspec
import trio

import proto
from proto import (
    AUDIT_GENESIS,
    AUDIT_HEAD,
    AuditForget,
    AuditHead,
    AuditRecordV1,
    AuditRecordV2,
    AuditRecordV3,
    AuditRedaction,
    Class,
    ForgetOnRecord,
    Label,
    Surface,
)

from . import _audit_checkpoint, _audit_migration, _audit_parallel
from ._audit_checkpoint import CHECKPOINT_EVERY
from ._audit_files import AuditFiles, month_files
from ._audit_forget import redaction_places
from ._audit_migration import V3Line, seal
from ._audit_walk import Listed, Walk, walk

__all__ = ["AUDIT_TAMPERED", "AUDIT_UNWRITABLE", "UNKNOWN_RESULT", "Audit", "Verdict"]

log = logging.getLogger("brokerd.audit")

AUDIT_TAMPERED = "audit-tampered"
"""The runbook entry for a log that does not match its chain or its head."""

AUDIT_UNWRITABLE = "audit-unwritable"
"""The runbook entry for a call refused because its record could not be written."""

UNKNOWN_RESULT = Label(class_=Class.secret, untrusted=True)
"""The label counted for a call whose outcome is not in the log: it may have reached its
session, and what it carried is unknown, so it counts as the worst (as damage does)."""

_encoder = msgspec.json.Encoder()
_head_decoder = msgspec.json.Decoder(AuditHead)


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """What `verify` found: how many records, the first thing broken if any, the forgets."""

    records: int
    broken_at: str | None = None
    forgets: list[ForgetOnRecord] = msgspec.field(default_factory=list)


_month_files = month_files


def _records(n: int) -> str:
    return f"{n:,} record" if n == 1 else f"{n:,} records"


def _walk_logged(directory: Path, key: bytes) -> Walk:
    """`verify`'s walk of the whole log: a large one a month file per core."""
    if _audit_parallel.worth_it(directory):
        found = _audit_parallel.walk_parallel(directory, key)
    else:
        found = walk(directory, key)
    for path, whole in found.torn.items():
        torn = path.stat().st_size - whole
        log.warning("%s ends in a torn line of %d bytes; skipped it", path, torn)
    return found


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
        self._commit_key = b""
        self._listed: dict[str, set[Listed]] = {}
        """Per forget plan, the (month file, line, field) its redaction records list."""
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
        self._state = Walk()
        """What the durable records say (labels, unfinished calls, listings): a checkpoint."""
        self._pending: list[tuple[V3Line, str]] = []
        """The records written since the last durable head, and where each is."""
        self._checkpointed = 0
        """The record count of the last checkpoint."""

    def open(self) -> None:
        """Create the directory (0700) and the key, drop torn tails, check the log.

        Then, once, move a sound log's V1 and V2 lines to V3 (`_audit_migration.py`).
        The forgets decided before brokerd stopped are finished next, by its forget part
        (`AuditLogForget`), before anything else is appended.

        Blocking: call it at start.

        Raises:
            OSError: the directory, the log or the head cannot be read or written.
            proto.KeyUnusable: the audit key cannot be used.
        """
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self._key = proto.ensure_key(self.key_path)
        self._commit_key = proto.audit_commit_key(self._key)
        if _audit_migration.finish(self.directory, self.head_path):
            log.warning("finished moving the audit log to V3 (brokerd stopped during it)")
        head, head_problem = self._read_head(at_start=True)
        since = None
        if head is not None and head.broken is None:
            since = _audit_checkpoint.position(self.directory, self._key, head.records)
        walked_from = since[0].records if since is not None else 0
        found = walk(self.directory, self._key, mark=head.records if head else None, since=since)
        for path, whole in found.torn.items():
            # A crash in the middle of a write: that line never was a record.
            torn = path.stat().st_size - whole
            log.warning("%s ends in a torn line of %d bytes; removed it", path, torn)
            os.truncate(path, whole)
        findings = [found.broken] if found.broken else []
        if head_problem is not None:
            findings.append(head_problem)
        elif head is None and found.records:
            findings.append(
                f"the head file {self.head_path} is missing, and the log holds "
                f"{_records(found.records)}"
            )
        elif head is not None:
            findings += self._against(head, found)
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
        for (session, call), where in found.unfinished.items():
            log.warning(
                "call %s of session %s (%s) has no outcome in the audit log (brokerd stopped "
                "while it ran, or its outcome could not be written); its session counts as %s",
                call,
                session,
                where,
                UNKNOWN_RESULT.describe(),
            )
            seen = found.labels.get(session)
            found.labels[session] = UNKNOWN_RESULT if seen is None else seen.join(UNKNOWN_RESULT)
        self.returned = dict(found.labels)
        self._state = found
        self._count, self._last, self._broken = found.records, found.last, broken
        self._listed = found.listed
        if broken is None and found.old_versions:
            self._migrate()
        self._synced = (self._count, self._last)
        # One line again, whatever it held: the heads before it say nothing more.
        self._files.replace_head(_head_line(self._head()))
        if since is None or self._count - walked_from >= CHECKPOINT_EVERY:
            self._write_checkpoint()
        else:
            self._checkpointed = walked_from

    def _migrate(self) -> None:
        """Move the log, verified, to V3 (`_audit_migration.py`); a failure leaves it as it was."""
        old = (self._count, self._last)
        try:
            self._count = _audit_migration.stage(
                self.directory, self._key, old_records=old[0], old_last=old[1], now=proto.utc_now()
            )
            _audit_migration.finish(self.directory, self.head_path)
        except OSError as exc:
            log.error(
                "the audit log could not be moved to V3 (%s); it stays as it is, and a "
                "forget cannot redact its older records until a start moves it",
                exc,
            )
            self._count = old[0]
            return
        head = _head_decoder.decode(self.head_path.read_bytes())
        self._last = head.last
        log.warning(
            "moved the audit log's %s to V3 (once); its migration record pins the old "
            "head: %s, last MAC %s",
            _records(old[0]),
            _records(old[0]),
            old[1],
        )

    @property
    def broken(self) -> str | None:
        """What was found wrong with the log at start (kept across restarts), if anything."""
        return self._broken

    def _against(self, head: AuditHead, walk: Walk) -> list[str]:
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

    async def append(self, record: AuditRecordV3, now: datetime, *, durable: bool = True) -> None:
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

    def _append_now(self, record: V3Line, now: datetime, durable: bool) -> None:
        if (
            self._broken is None
            and not self._head_unsure
            and (problem := self._head_problem()) is not None
        ):
            self._keep(problem)
        path = proto.month_file(self.directory, now)
        if self._files.log_path != path:
            self._sync()  # a new month: an fsync of its file would not cover the last one's
        signed = seal(self._key, self._commit_key, record, self._last)
        self._files.write(path, _encoder.encode(signed))
        self._count, self._last = self._count + 1, signed.mac
        self._pending.append((signed, f"{path.name}, the record of {signed.time}"))
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
            self._pending.clear()
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
        for record, where in self._pending:
            self._state.note(record, where)
        self._pending.clear()
        if self._count - self._checkpointed >= CHECKPOINT_EVERY:
            self._write_checkpoint()

    def _write_checkpoint(self) -> None:
        """Write the checkpoint of the durable log (`_audit_checkpoint`), if it is sound."""
        if self._broken is not None or self._head_unsure or self._count != self._synced[0]:
            return
        files = [p for p in _month_files(self.directory) if p.stat().st_size]
        if not files or (self._files.log_path not in (None, files[-1])):
            return  # a month file after the one brokerd writes: not brokerd's to vouch for
        self._state.records, self._state.last = self._synced
        try:
            _audit_checkpoint.write(
                self.directory,
                self._key,
                self._state,
                file=files[-1],
                size=files[-1].stat().st_size,
            )
        except OSError as exc:
            log.warning("the audit checkpoint could not be written (%s); a start walks more", exc)
            return
        self._checkpointed = self._count

    async def call_state(self, session: str, call: str) -> proto.CallStateReply:
        """What the log says of one call: its last record, newest month first."""
        return await trio.to_thread.run_sync(self._call_state_now, session, call)

    def _call_state_now(self, session: str, call: str) -> proto.CallStateReply:
        last: proto.AuditCallRecord | None = None
        for path in reversed(_month_files(self.directory)):
            for line in proto.AUDIT_LOG.lines(path):
                record = line.record
                if (
                    isinstance(record, AuditRecordV1 | AuditRecordV2 | AuditRecordV3)
                    and record.session == session
                    and record.call == call
                ):
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
        walk = _walk_logged(self.directory, self._key)
        found = walk.broken
        if found is None and self._broken is not None:
            forgets = list(walk.forgets.values())
            return Verdict(records=walk.records, broken_at=self._broken, forgets=forgets)
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
        forgets = list(walk.forgets.values())
        if found is None:
            return Verdict(records=walk.records, forgets=forgets)
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
        return Verdict(records=walk.records, broken_at=found, forgets=forgets)

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

    # -- forget: the audit's part (`_audit_forget.AuditLogForget`) ------------------------

    @property
    def lock(self) -> trio.Lock:
        """Held while a record is appended; a forget's part holds it for each request."""
        return self._lock

    def forget_digest(self, text: str) -> str:
        """`proto.digest` of a forgotten text under a key derived from the audit key."""
        return proto.digest(proto.audit_forget_key(self._key), text)

    def redact(self, plan: proto.ForgetPlan[proto.NoSteps]) -> list[str]:
        """Apply a committed plan: list its redactions (signed, durable) first, then redact.

        Blocking; the caller holds `lock`. A record is listed before its text changes, so
        a crash at any point leaves a log that verifies; listing again what is listed
        already is skipped, so a retry adds only what a new plan found. Returns the
        conflicts.

        Raises:
            OSError: the log cannot be written (the plan, committed, is finished later).
        """
        self._sync()  # records not yet durable are in the files the edits rewrite
        places = redaction_places(self._commit_key, plan.edits)
        listed = self._listed.setdefault(plan.plan, set())
        unlisted = [
            msgspec.structs.replace(
                p,
                fields={f: c for f, c in p.fields.items() if (p.file, p.line, f, c) not in listed},
            )
            for p in places
        ]
        unlisted = [p for p in unlisted if p.fields]
        if unlisted:
            now = proto.utc_now()
            redaction = AuditRedaction(
                v=3, time=proto.utc_stamp(now), plan=plan.plan, places=unlisted, prev="", mac=""
            )
            self._append_now(redaction, now, durable=True)
            listed.update((p.file, p.line, f, c) for p in unlisted for f, c in p.fields.items())
        conflicts = proto.apply_file_edits(self.directory, plan.edits)
        self._write_checkpoint()  # the edits changed the month files' sizes
        return conflicts

    async def append_forget(
        self,
        *,
        plan: str,
        counts: dict[str, int],
        digest: str,
        surface: Surface,
        session: str | None,
    ) -> None:
        """Append the forget's own record (decided by the owner): counts and digest, no text.

        Raises:
            OSError: it could not be written (see `append`).
        """
        now = proto.utc_now()
        record = AuditForget(
            v=3,
            time=proto.utc_stamp(now),
            decision="owner",
            surface=surface,
            session=session,
            plan=plan,
            counts=counts,
            digest=digest,
            prev="",
            mac="",
        )
        async with self._lock:
            await trio.to_thread.run_sync(self._append_now, record, now, True)
