"""The one-time move of an audit log's V1 and V2 lines to V3 (issue 31).

A V1 or V2 record signs its text, so no forget could take the text out of it without
breaking the chain. At the start that finds such lines in a log it verified, brokerd
re-emits every record as V3 on a new chain from the genesis (line for line: each month
file keeps its line count and order), and appends an `AuditMigration` record pinning
the old head (its count and last MAC). A log found broken is never moved: it keeps
being reported broken.

Crash-safe in two steps: `stage` writes every new month file, then the new head, into
`audit/.migration/` (each file fsynced; the head written last is the sign that the
staging is whole); `finish` renames each staged file over its month file, then the head
over `audit/head`, and removes the staging directory. A start finds a whole staging and
finishes it before it reads the log, or an unfinished one and removes it (the old log
is untouched, and is moved again).
"""

from __future__ import annotations

import logging
import os
import shutil
from datetime import datetime
from pathlib import Path

import msgspec

import proto
from proto import (
    AUDIT_GENESIS,
    AuditForget,
    AuditHead,
    AuditMigration,
    AuditRecord,
    AuditRecordV1,
    AuditRecordV2,
    AuditRecordV3,
    AuditRedaction,
)

from ._audit_files import month_files

__all__ = ["STAGING", "finish", "seal", "stage"]

log = logging.getLogger("brokerd.audit")

STAGING = ".migration"
"""The staging directory inside the audit directory."""
_STAGED_HEAD = "head"

_encoder = msgspec.json.Encoder()

V3Line = AuditRecordV3 | AuditRedaction | AuditForget | AuditMigration


def seal(key: bytes, commit_key: bytes, record: V3Line, prev: str) -> V3Line:
    """`record` chained to `prev`, its texts committed to (a call's), and signed."""
    chained: V3Line = msgspec.structs.replace(record, prev=prev)
    if isinstance(chained, AuditRecordV3):
        chained = msgspec.structs.replace(chained, commits=proto.audit_commits(commit_key, chained))
    return msgspec.structs.replace(chained, mac=proto.audit_mac(key, chained))


def _as_v3(record: AuditRecord) -> V3Line:
    """The V3 form of a record (unchained): a V1 or V2 call's, or a V3 record as it is."""
    match record:
        case AuditRecordV1() | AuditRecordV2():
            surface = record.surface
            proposed = record.proposed
            return AuditRecordV3(
                v=3,
                time=record.time,
                session=record.session,
                call=record.call,
                tool=record.tool,
                arguments=record.arguments,
                grant=record.grant,
                grant_sha256=record.grant_sha256,
                decision=record.decision,
                approval=record.approval,
                label=record.label,
                status=record.status,
                reason=record.reason,
                taint=record.taint,
                surface=None if isinstance(surface, msgspec.UnsetType) else surface,
                proposed=None if isinstance(proposed, msgspec.UnsetType) else proposed,
                commits=proto.TextCommits(arguments=""),
                prev=AUDIT_GENESIS,
                mac="",
            )
        case AuditRecordV3() | AuditRedaction() | AuditForget() | AuditMigration():
            return record


def stage(directory: Path, key: bytes, *, old_records: int, old_last: str, now: datetime) -> int:
    """Write the log moved to V3, its migration record and its head into the staging.

    The caller verified the log: every line is a record. Returns the new record count.

    Raises:
        OSError: a staged file could not be written (the old log is untouched).
    """
    staging = directory / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    commit_key = proto.audit_commit_key(key)
    paths = month_files(directory)
    names = [p.name for p in paths]
    last_name = max([*names, proto.month_file(directory, now).name])
    if last_name not in names:
        names.append(last_name)
    count, last = 0, AUDIT_GENESIS
    for name in names:
        out: list[bytes] = []
        path = directory / name
        if path.exists():
            for line in proto.AUDIT_LOG.lines(path):
                if line.record is None:
                    raise ValueError(f"{name} line {line.number} is not a record")
                sealed = seal(key, commit_key, _as_v3(line.record), last)
                out.append(_encoder.encode(sealed) + b"\n")
                count, last = count + 1, sealed.mac
        if name == last_name:
            migration = AuditMigration(
                v=3,
                time=proto.utc_stamp(now),
                old_records=old_records,
                old_last=old_last,
                prev=AUDIT_GENESIS,
                mac="",
            )
            sealed = seal(key, commit_key, migration, last)
            out.append(_encoder.encode(sealed) + b"\n")
            count, last = count + 1, sealed.mac
        proto.write_atomically(staging / name, b"".join(out))
    mac = proto.audit_head_mac(key, records=count, last=last, broken=None)
    head = AuditHead(records=count, last=last, mac=mac)
    proto.write_atomically(staging / _STAGED_HEAD, _encoder.encode(head) + b"\n")
    return count


def finish(directory: Path, head_path: Path) -> bool:
    """Put a whole staging in place of the log and its head; remove an unfinished one.

    True when a staging was put in place.

    Raises:
        OSError: a staged file could not be moved (the next start finishes it).
    """
    staging = directory / STAGING
    if not staging.is_dir():
        return False
    staged_head = staging / _STAGED_HEAD
    if not staged_head.exists():
        log.warning("removed an unfinished move of the audit log to V3 (%s)", staging)
        shutil.rmtree(staging)
        return False
    for path in sorted(staging.glob("*.jsonl")):
        os.replace(path, directory / path.name)
    proto.fsync_dir(directory)
    os.replace(staged_head, head_path)
    proto.fsync_dir(directory)
    shutil.rmtree(staging)
    proto.fsync_dir(directory)
    return True
