"""One pass over the audit log: every record checked, in order, from a point on.

The chain is checked record by record (`Walk.check`): the line is its record as msgspec
encodes it, its MAC holds under brokerd's key, its `prev` is the MAC before it, and a V3
call's texts match their commitments or a redaction lists them. The same pass gathers
what a start needs (each session's returned labels, the calls without an outcome, what
the redactions list) and what `verify` shows (the forgets).

Fast because a walk is what `bxctl audit verify` costs: each line is decoded once with
one typed decoder (the V3 kinds; V1 and V2 lines, only in a log not yet moved, through
`proto.AUDIT_LOG`), and each MAC is an HMAC state made once per key and domain and
copied (`_Signer`), the same bytes `proto.sign` hashes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol, assert_never

import msgspec

import proto
from proto import (
    AUDIT_GENESIS,
    AUDIT_LOG,
    AuditForget,
    AuditMigration,
    AuditRecord,
    AuditRecordV1,
    AuditRecordV2,
    AuditRecordV3,
    AuditRedaction,
    ForgetOnRecord,
    Label,
    TextField,
)

from ._audit_files import month_files

__all__ = [
    "Committed",
    "Lines",
    "Listed",
    "Macs",
    "Position",
    "Walk",
    "finish",
    "line_at",
    "prev_broken",
    "signed",
    "take",
    "walk",
]

log = logging.getLogger("brokerd.audit")

Listed = tuple[str, int, TextField, str]
"""A field a redaction record lists: month file, line, field, commitment to its text."""

_CHUNK = 8 * 1024 * 1024
_encoder = msgspec.json.Encoder()
_v3_decoder = msgspec.json.Decoder(AuditRecordV3 | AuditRedaction | AuditForget | AuditMigration)


_length = struct.Struct(">Q").pack


def _part(data: bytes) -> bytes:
    return _length(len(data)) + data


class _Signer:
    """`proto.sign(key, *domain, *parts)` with the HMAC's inner and outer states made once.

    HMAC-SHA256 written out (RFC 2104) over `hashlib` states, whose `copy` is C: the
    inner state has the key and the domain in it already, so a MAC is two copies, two
    updates and two digests (`hmac.HMAC.copy` is Python and costs as much again).
    """

    def __init__(self, key: bytes, *domain: str) -> None:
        block = hashlib.sha256().block_size
        padded = (hashlib.sha256(key).digest() if len(key) > block else key).ljust(block, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in padded))
        self._inner.update(b"".join(_part(d.encode()) for d in domain))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in padded))

    def sign(self, part: bytes) -> str:
        """The MAC of the domain and `part`."""
        inner = self._inner.copy()
        inner.update(_length(len(part)))
        inner.update(part)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def sign_parts(self, parts: bytes) -> str:
        """The MAC of the domain and `parts`, each length-prefixed already (`_part`)."""
        inner = self._inner.copy()
        inner.update(parts)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()


class _Commitments(Protocol):
    @property
    def arguments(self) -> str: ...
    @property
    def proposed(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...


class Committed(Protocol):
    """What the commitments to a V3 call record's texts read of it (`proto.audit_commits`)."""

    @property
    def prev(self) -> str: ...
    @property
    def time(self) -> str: ...
    @property
    def session(self) -> str: ...
    @property
    def call(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def arguments(self) -> str: ...
    @property
    def proposed(self) -> str | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def commits(self) -> _Commitments: ...


class Macs:
    """The MACs a walk checks, under one audit key."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self.v3 = _Signer(key, "boxmaker audit record v3")
        """Signs a V3 record's line with its MAC (and a call's texts) emptied."""
        commit_key = proto.audit_commit_key(key)
        self._arguments = _Signer(commit_key, "boxmaker audit text v3", "arguments")
        self._proposed = _Signer(commit_key, "boxmaker audit text v3", "proposed")
        self._reason = _Signer(commit_key, "boxmaker audit text v3", "reason")

    def call(self, record: AuditRecordV3) -> str:
        """`proto.audit_mac(key, record)` of a V3 call record."""
        return self.v3.sign(_encoder.encode(proto.audit_signed_call(record)))

    def record(self, record: AuditRecord) -> str:
        """`proto.audit_mac(key, record)`."""
        if type(record) is AuditRecordV3:  # nearly every record: no match to go through
            return self.call(record)
        match record:
            case AuditRecordV3() | AuditRedaction() | AuditForget() | AuditMigration():
                return self.v3.sign(_encoder.encode(msgspec.structs.replace(record, mac="")))
            case AuditRecordV1() | AuditRecordV2():
                return proto.audit_mac(self._key, record)
            case _:
                assert_never(record)

    def unmatched_texts(self, record: Committed) -> dict[TextField, str] | None:
        """`proto.unmatched_texts(commit_key, record)`."""
        commits = record.commits
        unmatched: dict[TextField, str] = {}
        prev, time, session = record.prev.encode(), record.time.encode(), record.session.encode()
        call, status = record.call.encode(), record.status.encode()
        head = b"".join(
            (
                _length(len(prev)),
                prev,
                _length(len(time)),
                time,
                _length(len(session)),
                session,
                _length(len(call)),
                call,
                _length(len(status)),
                status,
            )
        )
        now = self._arguments.sign_parts(head + _part(record.arguments.encode()))
        if not hmac.compare_digest(now, commits.arguments):
            unmatched["arguments"] = now
        if record.proposed is not None or commits.proposed is not None:
            if record.proposed is None or commits.proposed is None:
                return None
            proposed = record.proposed.encode()
            now = self._proposed.sign_parts(head + _part(proposed))
            if not hmac.compare_digest(now, commits.proposed):
                unmatched["proposed"] = now
        if record.reason is not None or commits.reason is not None:
            if record.reason is None or commits.reason is None:
                return None
            reason = record.reason.encode()
            now = self._reason.sign_parts(head + _part(reason))
            if not hmac.compare_digest(now, commits.reason):
                unmatched["reason"] = now
        return unmatched


@dataclasses.dataclass(frozen=True)
class Position:
    """Where a walk begins: after `records` records, the last with MAC `last`.

    `file` is the month file the next record is read from, from byte `offset`, whose
    line number there is `line`; earlier month files are not read.
    """

    records: int = 0
    last: str = AUDIT_GENESIS
    file: str = ""
    offset: int = 0
    line: int = 1


@dataclasses.dataclass
class Walk:
    """What one pass over the log found."""

    records: int = 0
    last: str = AUDIT_GENESIS
    """The last record's MAC: the `prev` the next record must carry."""
    last_at: tuple[str, int] | None = None
    """The month file and line of the last record."""
    broken: str | None = None
    """The first place where the chain does not hold."""
    marked: str | None = None
    """The MAC of record number `mark` (`walk`'s argument), if the log has that many."""
    labels: dict[str, Label] = dataclasses.field(default_factory=dict)
    """Per session, the labels of the outcomes brokerd recorded, joined."""
    unfinished: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    """(session, call) of `started` records without an outcome, and where each is."""
    old_versions: int = 0
    """V1 and V2 records: a log to move to V3."""
    redacted: dict[tuple[str, int], tuple[str, dict[TextField, str]]] = dataclasses.field(
        default_factory=dict
    )
    """(month file, line) of V3 call records whose texts do not match their commitments,
    where each is, and which fields (with the commitment to their text now), not yet
    listed by a redaction record."""
    listed: dict[str, set[Listed]] = dataclasses.field(default_factory=dict)
    """Per forget plan, what its redaction records list."""
    forgets: dict[str, ForgetOnRecord] = dataclasses.field(default_factory=dict)
    """Per forget plan, what the log says of it."""
    torn: dict[Path, int] = dataclasses.field(default_factory=dict)
    """Month files that end in a torn line: where their last whole line ends."""

    @property
    def last_where(self) -> str:
        """Where the last record is, in words."""
        return "the start of the log" if self.last_at is None else line_at(*self.last_at)

    def note(self, record: AuditRecord, where: str | tuple[str, int]) -> None:
        """Take in what `record` (checked) says of sessions, calls and forgets."""
        match record:
            case AuditRecordV1() | AuditRecordV2() | AuditRecordV3():
                self._note_call(record, where)
            case AuditRedaction():
                self._note_redaction(record)
            case AuditForget():
                seen = self.forgets.get(record.plan)
                records = 0 if seen is None else seen.records
                self.forgets[record.plan] = ForgetOnRecord(
                    plan=record.plan, time=record.time, surface=record.surface, records=records
                )
            case AuditMigration():
                pass
            case _:
                assert_never(record)

    def note_call(self, record: AuditRecordV3, file: str, line: int) -> None:
        """`note` for a V3 call record, the most of any log, without the dispatch."""
        key = (record.session, record.call)
        if record.status == "started":
            self.unfinished[key] = line_at(file, line)
            return
        self.unfinished.pop(key, None)
        seen = self.labels.get(record.session)
        if seen != record.label:
            self.labels[record.session] = record.label if seen is None else seen.join(record.label)

    def _note_redaction(self, record: AuditRedaction) -> None:
        listed = self.listed.setdefault(record.plan, set())
        for place in record.places:
            at = (place.file, place.line)
            listed.update((place.file, place.line, f, c) for f, c in place.fields.items())
            if (found := self.redacted.get(at)) is not None:
                left = {f: c for f, c in found[1].items() if place.fields.get(f) != c}
                if left:
                    self.redacted[at] = (found[0], left)
                else:
                    del self.redacted[at]
        places = len({(file, line) for file, line, _, _ in listed})
        seen = self.forgets.get(record.plan)
        self.forgets[record.plan] = (
            ForgetOnRecord(plan=record.plan, time=record.time, records=places)
            if seen is None
            else msgspec.structs.replace(seen, records=places)
        )

    def _note_call(
        self,
        record: AuditRecordV1 | AuditRecordV2 | AuditRecordV3,
        where: str | tuple[str, int],
    ) -> None:
        if not isinstance(record, AuditRecordV3):
            self.old_versions += 1
        key = (record.session, record.call)
        if record.status == "started":
            self.unfinished[key] = where if isinstance(where, str) else line_at(*where)
            return
        self.unfinished.pop(key, None)
        seen = self.labels.get(record.session)
        self.labels[record.session] = record.label if seen is None else seen.join(record.label)


def line_at(file: str, line: int) -> str:
    """A line of a month file, in words."""
    return f"{file} line {line}"


def _decode(raw: bytes) -> tuple[AuditRecord | None, str | None]:
    if len(raw) > AUDIT_LOG.max_line_bytes:
        return None, f"a line of more than {AUDIT_LOG.max_line_bytes:,} bytes"
    try:
        return _v3_decoder.decode(raw), None
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    try:
        return AUDIT_LOG.decode(raw), None
    except ValueError as exc:
        return None, str(exc)


class Lines:
    """The whole lines of a month file from byte `offset` on, without their newlines.

    Iterated a chunk's lines at a time (one `bytes.split`, in C); once iterated, `end` is
    where the last whole line ends: a file longer than that ends in a torn line.
    """

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.end = offset

    def __iter__(self) -> Iterator[list[bytes]]:
        with open(self.path, "rb") as f:
            f.seek(self.end)
            rest = b""
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                lines = (rest + chunk if rest else chunk).split(b"\n")
                rest = lines.pop()
                self.end += sum(map(len, lines)) + len(lines)
                yield lines


def take(macs: Macs, found: Walk, raw: bytes, at: tuple[str, int]) -> AuditRecord | None:
    """Check the line `raw` at `at` against the log before it (`found`), and walk past it.

    The record it holds (None: not a record) is returned for the caller to note; a break
    is kept in `found.broken`, the first one only.
    """
    try:
        record: AuditRecord | None = _v3_decoder.decode(raw)
        problem = None
    except (msgspec.DecodeError, msgspec.ValidationError):
        record, problem = _decode(raw)
    if found.broken is not None:
        pass
    elif (
        type(record) is AuditRecordV3
        and record.prev == found.last
        and _encoder.encode(record) == raw
        and hmac.compare_digest(macs.call(record), record.mac)
    ):
        # The common case, checked inline; `_check` says what is wrong otherwise.
        if unmatched := macs.unmatched_texts(record):
            found.redacted[at] = (line_at(*at), unmatched)
        elif unmatched is None:
            found.broken = _check_texts(macs, record, at, found)
    else:
        found.broken = _check(macs, raw, record, problem, at, found)
        if found.broken is None and type(record) is AuditRecordV3:
            found.broken = _check_texts(macs, record, at, found)
    found.last = record.mac if record is not None else ""
    found.last_at = at
    return record


def signed(macs: Macs, raw: bytes) -> AuditRecord | None:
    """The record `raw` is, if it is one, encoded as msgspec does, and its MAC holds."""
    try:
        record: AuditRecord | None = _v3_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        record, _ = _decode(raw)
    if (
        record is not None
        and _encoder.encode(record) == raw
        and hmac.compare_digest(macs.record(record), record.mac)
    ):
        return record
    return None


def finish(found: Walk) -> Walk:
    """`found` with, when nothing broke before, a redacted text no forget lists as its break."""
    if found.broken is None and found.redacted:
        where, unmatched = next(iter(found.redacted.values()))
        fields = list(unmatched)
        found.broken = (
            f"{where}: the text of its {' and '.join(fields)} does not match what the record "
            "was signed with, and no forget lists it (the text was changed)"
        )
    return found


def prev_broken(at: tuple[str, int], *, first: bool, last_where: str) -> str:
    """The break of a signed record at `at` whose `prev` is not the MAC before it."""
    where = line_at(*at)
    if first:
        return f"{where}: the first record's prev is not 64 zeros (records before it were removed)"
    return (
        f"{where}: its prev is not the MAC of {last_where} (records were removed, "
        "moved or copied between them)"
    )


def walk(
    directory: Path,
    key: bytes,
    *,
    mark: int | None = None,
    since: tuple[Position, Walk] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Walk:
    """Read every record in order from `since` (the start of the log), checking the chain.

    `since` is where to begin and what the log before it holds (`_audit_checkpoint`).
    A torn last line of a month file is left out (and noted in `torn`). `progress` is
    told the number of records walked now and then. Blocking.
    """
    at, found = since or (Position(), Walk())
    found.records, found.last = at.records, at.last
    found.marked = at.last if mark == at.records else None
    macs = Macs(key)
    for path in month_files(directory):
        name = path.name
        if at.file and name < at.file:
            continue
        offset, number = (at.offset, at.line) if name == at.file else (0, 1)
        lines = Lines(path, offset)
        for batch in lines:
            for raw in batch:
                found.records += 1
                record = take(macs, found, raw, (name, number))
                if found.records == mark:
                    found.marked = found.last
                if type(record) is AuditRecordV3:
                    found.note_call(record, name, number)
                elif record is not None:
                    found.note(record, (name, number))
                number += 1
                if progress is not None and not found.records % 65536:
                    progress(found.records)
        if os.stat(path).st_size != lines.end:
            found.torn[path] = lines.end
    return finish(found)


def _check_texts(macs: Macs, record: AuditRecordV3, at: tuple[str, int], found: Walk) -> str | None:
    """Note the texts of a signed V3 record that a forget may have redacted; or what is wrong."""
    unmatched = macs.unmatched_texts(record)
    if unmatched is None:
        return (
            f"{at[0]} line {at[1]}: its text fields are not the ones it was signed with "
            "(a field was added or removed)"
        )
    if unmatched:
        found.redacted[at] = (line_at(*at), unmatched)
    return None


def _check(
    macs: Macs,
    raw: bytes,
    record: AuditRecord | None,
    problem: str | None,
    at: tuple[str, int],
    found: Walk,
) -> str | None:
    """What is wrong with the line at `at`, the log before it being intact; or None."""
    if (
        record is not None
        and record.prev == found.last
        and _encoder.encode(record) == raw
        and hmac.compare_digest(macs.record(record), record.mac)
    ):
        return None
    where = line_at(*at)
    if record is None:
        return f"{where}: not an audit record ({problem})"
    if _encoder.encode(record) != raw or not hmac.compare_digest(macs.record(record), record.mac):
        return (
            f"{where}: its MAC does not match (the record was changed, or written without "
            "brokerd's key)"
        )
    if record.prev == found.last:
        return None
    return prev_broken(at, first=found.records == 1, last_where=found.last_where)
