"""The records roles write to disk besides session logs, one line of JSON each.

* `JournalLine`: a line of `memory/edits/YYYY-MM.jsonl`, memoryd's journal of applied
  memory edits, and `Decided`, who decided an edit.
* `RecallRecord`: a line of `memory/recalls/YYYY-MM.jsonl`, memoryd's recall log: each
  hit's `HitSource`, stable across a reindex.
* `AuditRecord`: a line of `audit/YYYY-MM.jsonl`, brokerd's chained audit log
 , and `AuditHead`, the file `audit/head` that anchors the chain. V3
  records sign a keyed commitment of their text fields, not the text, so a forget can
  take a text out and the chain still verifies (issue 31).

They live here, not in the role that writes them, because bxctl reads them too and never
imports a role. Each is read with `JsonLines` and written with `append_line`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from typing import ClassVar, Literal, TypeVar, assert_never

import msgspec

from ._jsonl import JsonLines
from ._keys import sign
from ._label import Label
from ._text import lower_first
from ._tools import MemoryAction

__all__ = [
    "AUDIT_GENESIS",
    "AUDIT_HEAD",
    "AUDIT_KINDS",
    "AUDIT_LOG",
    "EDIT_ID",
    "EDIT_JOURNAL",
    "JOURNAL_KINDS",
    "OWNER_SESSION",
    "RECALL_LOG",
    "AppliedEdit",
    "AuditCallRecord",
    "AuditForget",
    "AuditHead",
    "AuditMigration",
    "AuditRecord",
    "AuditRecordV1",
    "AuditRecordV2",
    "AuditRecordV3",
    "AuditRedaction",
    "AuditStatus",
    "Decided",
    "Decision",
    "HandChange",
    "HitSource",
    "JournalFile",
    "JournalLine",
    "OwnerApproved",
    "OwnerEdit",
    "RecallRecord",
    "Redacted",
    "Status",
    "Surface",
    "TextCommits",
    "TextField",
    "audit_commit_key",
    "audit_commits",
    "audit_forget_key",
    "audit_mac",
    "audit_signed_call",
    "audit_text_commit",
    "edit_id",
    "unmatched_texts",
]

Status = Literal["ok", "error", "denied"]
"""A tool call's outcome, in a `tool_response` and an audit record."""

Decision = Literal["auto", "approved", "denied", "refused", "owner"]
"""How brokerd decided a call: run unasked, approved by the owner, denied, refused, or
`owner`: the owner's own memory edit (`memory_edit`), decided by making it."""

OWNER_SESSION = "owner-terminal"
"""The session an owner's edit made outside any session (`bxctl memory add`) is filed under."""


class Surface(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where and by whom the owner acted: a decision, or an edit of their own.

    `bxctl`: `uid` is the peer's uid, which brokerd reads from the socket (SO_PEERCRED),
    whatever the client says. `mattermost`: `user` is the owner's username and `post` the
    post that decided or asked, as the bridge read them.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"user", "post"})
    """A forget keeps who acted and where (a username, a post id)."""

    via: Literal["bxctl", "mattermost"]
    uid: int | None = None
    user: str | None = None
    post: str | None = None


AuditStatus = Literal["started", "ok", "error", "denied"]
"""An audit record's status: `started` for the record written before a call runs (its
outcome follows in a record of its own), else the call's outcome (a `Status`)."""

AUDIT_GENESIS = "0" * 64
"""The `prev` of the very first audit record."""


class OwnerApproved(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="decision",
    tag="approved",
    omit_defaults=True,
):
    """The owner approved the model's call, where `surface` says.

    In a version of their own when `proposed` is set.
    """

    surface: Surface
    proposed: str | None = None
    """The model's arguments, when the owner approved a version of their own (edit before
    approve); what was applied is the call's arguments."""


class OwnerEdit(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="decision", tag="owner", omit_defaults=True
):
    """The owner's own edit (`memory_edit`), decided by making it, where `surface` says."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"undoes"})
    """A forget keeps the id of the edit undone."""

    surface: Surface
    undoes: str | None = None
    """The id (`edit_id`) of the edit this one undoes (`bxctl memory undo`)."""


Decided = OwnerApproved | OwnerEdit
"""How the owner decided a memory edit that memoryd applies: carried from brokerd to
memoryd with the call, and kept in the journal line of the edit."""

JournalFile = Literal["memory.md", "user.md"]
"""The files the journal records edits of."""


class AppliedEdit(
    msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="applied", omit_defaults=True
):
    """A memory edit memoryd applied: a line of `edits/YYYY-MM.jsonl`.

    `before` and `after` are the file's entries around the edit; `moved` the entries it
    moved to archive.md. Fields that are None were not recorded when the line was written
    (lines older than the field).
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"time", "session", "call", "approval", "forgotten"})
    """What a forget keeps of a journal line: its ids; the entries and arguments are text."""

    time: str
    session: str
    call: str
    approval: str | None
    action: MemoryAction
    file: JournalFile
    before: list[str]
    after: list[str]
    moved: list[str] = msgspec.field(default_factory=list)
    arguments: str | None = None
    """The arguments that were applied (canonical), so `memory_why` can tell which item of
    a consolidate rewrote which entry (`before` and `after` alone cannot say)."""
    taint: Label | None = None
    """The session's label when the call was decided (untrusted: it had read outside text)."""
    decided: Decided | None = None
    """Who decided it and where; None in lines written before boxmaker recorded it."""
    forgotten: str | msgspec.UnsetType = msgspec.UNSET
    """The forget (its plan id) that took a text out of this line; unset, and so absent
    from the line, in every line no forget touched. Such an edit cannot be undone."""


class HandChange(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="kind",
    tag="hand_change",
    omit_defaults=True,
):
    """A change of memory.md or user.md that no journal line records, found at memoryd's start.

    The file was edited by hand, or an edit was applied just before a crash cut off its
    line: memoryd journals the difference, so the journal accounts for every state each
    file has been in. Not an edit boxmaker applied, so nothing to undo.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"time", "forgotten"})
    """What a forget keeps of the line: the entries are text."""

    time: str
    file: JournalFile
    before: list[str]
    after: list[str]
    forgotten: str | msgspec.UnsetType = msgspec.UNSET
    """The forget (its plan id) that took a text out of this line, or that made this
    change (entries holding the text removed whole); unset, and absent, otherwise."""


JournalLine = AppliedEdit | HandChange
"""A line of the edit journal, `memory/edits/YYYY-MM.jsonl`."""


class _JournalLineV1(msgspec.Struct, frozen=True, kw_only=True):
    """A journal line as memoryd wrote them before lines were tagged by `kind`."""

    KEPT: ClassVar[frozenset[str]] = frozenset(
        {"time", "session", "call", "approval", "undoes", "forgotten"}
    )
    """What a forget keeps of the line."""

    time: str
    session: str
    call: str
    approval: str | None
    action: Literal["add", "replace", "remove", "consolidate", "unjournalled"]
    file: JournalFile
    before: list[str]
    after: list[str]
    moved: list[str] = msgspec.field(default_factory=list)
    decision: Literal["approved", "owner"] | None = None
    surface: Surface | None = None
    taint: Label | None = None
    proposed: str | None = None
    undoes: str | None = None
    arguments: str | None = None
    forgotten: str | msgspec.UnsetType = msgspec.UNSET


def _from_v1(line: _JournalLineV1) -> JournalLine:
    if line.action == "unjournalled":
        return HandChange(
            time=line.time,
            file=line.file,
            before=line.before,
            after=line.after,
            forgotten=line.forgotten,
        )
    decided: Decided | None = None
    if line.surface is not None and line.decision == "approved":
        decided = OwnerApproved(surface=line.surface, proposed=line.proposed)
    elif line.surface is not None and line.decision == "owner":
        decided = OwnerEdit(surface=line.surface, undoes=line.undoes)
    return AppliedEdit(
        time=line.time,
        session=line.session,
        call=line.call,
        approval=line.approval,
        action=line.action,
        file=line.file,
        before=line.before,
        after=line.after,
        moved=line.moved,
        arguments=line.arguments,
        taint=line.taint,
        decided=decided,
        forgotten=line.forgotten,
    )


class HitSource(msgspec.Struct, frozen=True, kw_only=True):
    """Where a recall hit came from: its `sources` row without the rowid (a reindex renumbers).

    Recall shows it as the hit's source line; the recall log records it as it is.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"kind", "session", "time", "role", "class_"})
    """Every string of a source is an id or a name."""

    kind: str
    session: str
    epoch: int | None
    record: int
    time: str
    role: str
    class_: str = msgspec.field(name="class")
    untrusted: bool


class RecallRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One line of `recalls/YYYY-MM.jsonl`; `hits` is empty when nothing was found."""

    KEPT: ClassVar[frozenset[str]] = frozenset({"time", "session"})
    """What a forget keeps of a recall: the query is text."""

    time: str
    session: str
    query: str
    k: int
    hits: list[HitSource]


class AuditRecordV1(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A line of the audit log as brokerd wrote them until issue 30 (`AuditRecordV2` since).

    Kept exactly as it was: a line is verified by re-encoding its record and comparing
    the bytes, so this Struct must encode every old line as it was written. `surface` and
    `proposed` (issue 21) are unset, and so absent from the line, where no owner decided
    and in lines written before them; `taint` is None in lines written before it.
    """

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
    status: AuditStatus
    reason: str | None = None
    taint: Label | None = None
    prev: str = AUDIT_GENESIS
    mac: str = ""
    surface: Surface | msgspec.UnsetType = msgspec.UNSET
    proposed: str | msgspec.UnsetType = msgspec.UNSET


class AuditRecordV2(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag_field="v",
    tag=2,
):
    """One line of the audit log, `v` 2: what brokerd writes.

    A call that runs (`auto`, `approved`, `owner`) has two records with the same `session`
    and `call`: the decision, `status` `started`, written and fsynced before the tool runs
    (brokerd runs nothing it could not record), and the outcome, written after. A call
    that does not run (`denied`, `refused`) has one record, its outcome.

    `label` is the result's label; in a `started` record, the grant's (the least the
    result will carry). `taint` is the session's label the call was decided under: the
    stricter of loopd's and what brokerd returned to the session. `reason` says why a
    call was denied or refused, or gives the owner's words on an approval. A field that
    is None is left out of the line.

    `mac` is the record's own MAC under brokerd's audit key (`audit_mac`), so no one
    without the key can write or change a record; `prev` chains the records, the previous
    record's `mac` (across month files, and across versions; the first record's is
    `AUDIT_GENESIS`), so none can be removed, moved or copied either.
    """

    time: str
    session: str
    call: str
    tool: str
    arguments: str
    grant: str | None = None
    grant_sha256: str | None = None
    decision: Decision
    approval: str | None = None
    label: Label
    status: AuditStatus
    reason: str | None = None
    taint: Label
    surface: Surface | None = None
    """Who decided and where: a decision of the owner's (`approved`, `denied` by them,
    `owner`, or a refused edit of their own)."""
    proposed: str | None = None
    """The model's arguments when the owner approved a version of their own (`arguments`
    is what ran)."""
    prev: str
    mac: str


TextField = Literal["arguments", "proposed", "reason"]
"""The fields of a call record that hold text someone wrote: what a forget may redact."""

TEXT_FIELDS: tuple[TextField, ...] = ("arguments", "proposed", "reason")


class TextCommits(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """A V3 record's keyed commitment (`audit_commits`) to each of its text fields, by name.

    One for each text field the record has, none for one it has not.
    """

    arguments: str
    proposed: str | None = None
    reason: str | None = None


class AuditRecordV3(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag_field="kind",
    tag="call",
):
    """A call's record, `v` 3: what brokerd writes since issue 31 (fields as `AuditRecordV2`).

    Its MAC covers `commits`, a keyed commitment to each text field (`arguments`,
    `proposed`, `reason`), and the text fields' presence, not their text; the text sits
    beside its commitment. So a forget can replace a text by its redacted form and the
    record keeps its MAC: the text then no longer matches its commitment, which `verify`
    accepts only where a later `AuditRedaction` lists the record. The commitment is keyed
    (`audit_commit_key`), so one who reads the file cannot test guesses of a short secret
    against it, and it binds the field's name and the record (`prev`, `time`, `session`,
    `call`, `status`), so a text moved to another field or record does not match either.

    `taint` is None only in records moved from V1 lines that had none.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset(
        {
            "time",
            "session",
            "call",
            "tool",
            "grant",
            "grant_sha256",
            "approval",
            "commits",
            "prev",
            "mac",
        }
    )
    """What a forget keeps of a call record: its ids and signature; `arguments`, `proposed` and
    `reason` are text (their commitments stay in `commits`)."""

    v: Literal[3]
    time: str
    session: str
    call: str
    tool: str
    arguments: str
    grant: str | None = None
    grant_sha256: str | None = None
    decision: Decision
    approval: str | None = None
    label: Label
    status: AuditStatus
    reason: str | None = None
    taint: Label | None = None
    surface: Surface | None = None
    proposed: str | None = None
    commits: TextCommits
    prev: str
    mac: str


class Redacted(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A record a forget redacted: where it is (month file and 1-based line), and its fields.

    `fields` maps each redacted field to the commitment of its redacted text (as
    `audit_commits` makes them), so the redacted text cannot be changed again unseen.
    """

    file: str
    line: int
    fields: dict[TextField, str]


class AuditRedaction(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag_field="kind",
    tag="redaction",
):
    """The records forget `plan` redacts, appended (and fsynced) before any of them changes.

    What lets `verify` accept a text that no longer matches its commitment: only in a
    record (and field) a redaction after it lists, and only the redacted text it lists
    the commitment of. Holds no text.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"time", "plan", "places", "prev", "mac"})
    """It holds no text."""

    v: Literal[3]
    time: str
    plan: str
    places: list[Redacted]
    prev: str
    mac: str


class AuditForget(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag_field="kind",
    tag="forget",
):
    """The owner's forget itself: who, where, what it changed by store; never the text.

    `digest` is `proto.digest` of the text under `audit_forget_key`: it says which text
    was forgotten to one who has the key and tells it again, to nobody else.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"time", "session", "plan", "digest", "prev", "mac"})
    """It holds no text."""

    v: Literal[3]
    time: str
    decision: Literal["owner"]
    surface: Surface
    session: str | None = None
    plan: str
    counts: dict[str, int]
    digest: str
    prev: str
    mac: str


class AuditMigration(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    omit_defaults=True,
    tag_field="kind",
    tag="migration",
):
    """The one-time move of a log's V1 and V2 lines to V3, after the last moved record.

    brokerd verified the old chain first; `old_records` and `old_last` pin its head (the
    count and last MAC it had), so a head the owner kept from before still says which log
    was moved.
    """

    KEPT: ClassVar[frozenset[str]] = frozenset({"time", "old_last", "prev", "mac"})
    """It holds no text."""

    v: Literal[3]
    time: str
    old_records: int
    old_last: str
    prev: str
    mac: str


AuditRecordV3Line = AuditRecordV3 | AuditRedaction | AuditForget | AuditMigration
"""A V3 line, of one of its kinds."""

AuditCallRecord = AuditRecordV1 | AuditRecordV2 | AuditRecordV3
"""The record of a call, of any version."""

AuditRecord = AuditRecordV1 | AuditRecordV2 | AuditRecordV3Line
"""A line of `audit/YYYY-MM.jsonl`, of any version: read with `AUDIT_LOG`, and verified
with `audit_mac` (each version under its own MAC domain). brokerd writes V3."""


class AuditHead(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`audit/head`, the anchor of the audit chain: the file's last line.

    brokerd appends a head line (and fsyncs it) after the records it counts are fsynced,
    and replaces the file by its last line at a start and when it grows long. A head
    written before issue 22 is the whole file, one line without its newline.

    `records` counts the records of every month file; `last` is the last record's `mac`
    (the `prev` the next record will carry; `AUDIT_GENESIS` when there is none);
    `broken` is what brokerd found wrong with the log at a start, kept until the owner
    starts a new log (runbook audit-tampered); `mac` is `proto.audit_head_mac` of the rest.
    """

    records: int
    last: str
    broken: str | None = None
    mac: str


EDIT_JOURNAL: JsonLines[JournalLine] = JsonLines(JournalLine, legacy=(_JournalLineV1, _from_v1))
"""The reader of `memory/edits/YYYY-MM.jsonl` (lines of the old format read as today's)."""
JOURNAL_KINDS: tuple[object, ...] = (JournalLine, _JournalLineV1)
"""The kinds a journal line may be, as a forget redacts them (`proto.redact_line`)."""

RECALL_LOG: JsonLines[RecallRecord] = JsonLines(RecallRecord)
"""The reader of `memory/recalls/YYYY-MM.jsonl`."""


class _AuditVersion(msgspec.Struct, frozen=True):
    v: int = 1


_audit_version = msgspec.json.Decoder(_AuditVersion)
_AUDIT_VERSIONS: dict[int, msgspec.json.Decoder[AuditRecord]] = {
    1: msgspec.json.Decoder(AuditRecordV1),
    2: msgspec.json.Decoder(AuditRecordV2),
    3: msgspec.json.Decoder(AuditRecordV3Line),
}


class _AuditLog(JsonLines[AuditRecord]):
    """Reads each line as the version its `v` names (none: V1).

    Not `JsonLines`' legacy fallback: msgspec decodes a lone tagged Struct without its
    tag, so V2 tried first would read a V1 line as a V2 record (whose bytes and MAC then
    differ), and V1 tried first would blame a damaged V2 line on its `v`.
    """

    def decode(self, raw: bytes) -> AuditRecord:
        """One line's record, of its version; `ValueError` (msgspec's path) when it is not one."""
        try:
            version = _audit_version.decode(raw).v
            decoder = _AUDIT_VERSIONS.get(version)
            if decoder is None:
                known = ", ".join(map(str, _AUDIT_VERSIONS))
                raise ValueError(f"audit record version {version} is not one of {known}")
            return decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ValueError(lower_first(str(exc))) from None
        except RecursionError:
            raise ValueError("the line nests JSON too deeply") from None


AUDIT_LOG: JsonLines[AuditRecord] = _AuditLog(AuditRecordV3Line)
"""The reader of `audit/YYYY-MM.jsonl`: V1, V2 and V3 lines, told apart by `v`."""
AUDIT_KINDS: tuple[object, ...] = (AuditRecordV3Line,)
"""The kinds a forget redacts typed (`proto.redact_line`); a V1 or V2 line is left only in
a log found broken, and is redacted as JSON."""

AUDIT_HEAD = "head"
"""The name of the head file in the audit directory."""

_encoder = msgspec.json.Encoder()


EDIT_ID = re.compile(r"ed-[a-z2-7]{6}")
"""What an edit id looks like (`edit_id`): `ed-` and six lower-case base32 characters."""


def edit_id(line: JournalLine) -> str:
    """The short stable id of a journal line (`ed-` and six characters), for history and undo.

    Made from what the line says of the edit, so it needs no field of its own and lines
    written before it existed have one too (a hand change's as when it was an action).
    """
    parts: tuple[str, ...]
    match line:
        case AppliedEdit():
            parts = (line.time, line.session, line.call, line.action, line.file)
        case HandChange():
            parts = (line.time, "", "", "unjournalled", line.file)
        case _:
            assert_never(line)
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return "ed-" + base64.b32encode(digest).decode().lower()[:6]


def audit_mac(key: bytes, record: AuditRecord) -> str:
    """An audit record's MAC: HMAC-SHA256 under `key` of its line with `mac` empty.

    Each version signs under its own domain, so a line cannot be passed off as another
    version's. A record is its line as msgspec encodes it, so a reader checks both that
    the line is that encoding and that its `mac` is this. A V3 call record is signed with
    each text field it has emptied: its `commits` stand for the text.
    """
    match record:
        case AuditRecordV1():
            return sign(key, "boxmaker audit record v1", _encoder.encode(_unsigned(record)))
        case AuditRecordV2():
            return sign(key, "boxmaker audit record v2", _encoder.encode(_unsigned(record)))
        case AuditRecordV3():
            return sign(key, "boxmaker audit record v3", _encoder.encode(audit_signed_call(record)))
        case AuditRedaction() | AuditForget() | AuditMigration():
            return sign(key, "boxmaker audit record v3", _encoder.encode(_unsigned(record)))
        case _:
            assert_never(record)


_R = TypeVar("_R", bound=AuditRecord)


def audit_signed_call(record: AuditRecordV3) -> AuditRecordV3:
    """What a V3 call record's MAC signs: the record with its texts and `mac` emptied."""
    return msgspec.structs.replace(
        record,
        arguments="",
        proposed=None if record.proposed is None else "",
        reason=None if record.reason is None else "",
        mac="",
    )


def _unsigned(record: _R) -> _R:
    return msgspec.structs.replace(record, mac="")


def _derived(key: bytes, purpose: str) -> bytes:
    return hmac.new(key, purpose.encode(), hashlib.sha256).digest()


def audit_commit_key(key: bytes) -> bytes:
    """The key of V3 records' text commitments, derived from the audit key."""
    return _derived(key, "boxmaker audit text commitment key v1")


def audit_forget_key(key: bytes) -> bytes:
    """The key of a forget record's digest of the forgotten text, derived from the audit key."""
    return _derived(key, "boxmaker audit forget digest key v1")


def audit_text_commit(commit_key: bytes, field: TextField, record: AuditRecordV3, text: str) -> str:
    """The commitment to `text` as `record`'s `field`: bound to the field and the record."""
    return sign(
        commit_key,
        "boxmaker audit text v3",
        field,
        record.prev,
        record.time,
        record.session,
        record.call,
        record.status,
        text,
    )


def _texts(record: AuditRecordV3) -> dict[TextField, str | None]:
    return {"arguments": record.arguments, "proposed": record.proposed, "reason": record.reason}


def audit_commits(commit_key: bytes, record: AuditRecordV3) -> TextCommits:
    """The commitments to `record`'s text fields as they are (its `prev` set)."""

    def commit(field: TextField, text: str | None) -> str | None:
        return None if text is None else audit_text_commit(commit_key, field, record, text)

    return TextCommits(
        arguments=audit_text_commit(commit_key, "arguments", record, record.arguments),
        proposed=commit("proposed", record.proposed),
        reason=commit("reason", record.reason),
    )


def unmatched_texts(commit_key: bytes, record: AuditRecordV3) -> dict[TextField, str] | None:
    """The text fields of `record` whose text does not match its commitment.

    Each with the commitment to the text it holds now (what a redaction lists). None
    when the record's commitments are not one per text field it has (not a record
    brokerd wrote, whatever its MAC).
    """
    commits = record.commits
    unmatched: dict[TextField, str] = {}
    for field, text in _texts(record).items():
        commit = getattr(commits, field)
        if (text is None) != (commit is None):
            return None
        if text is None:
            continue
        now = audit_text_commit(commit_key, field, record, text)
        if not hmac.compare_digest(now, commit):
            unmatched[field] = now
    return unmatched
