"""A forget redacts every text field of every record kind, and keeps only what each names.

Each record kind a role's files hold is built with the text in every string it has; the
forget's redaction must leave it only in the fields the kind names in `KEPT` (ids, times,
names), and those exactly as they were. A field added to a record is text unless its
kind says otherwise, so a new text field is redacted without anyone listing it; and the
list of kept fields below is the review of every such exception.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

import msgspec
import msgspec.inspect as mi
import pytest

import entries
import proto
from mattermostd._state import Inflight, OpenApproval, OpenConfirmation

NEEDLE = "ZEBRA-7731"

KEPT = {
    "UserRecord": {"time", "ref"},
    "AssistantRecord": {"time"},
    "ToolResultRecord": {"time", "call_id", "name"},
    "ToolCall": {"id", "name"},
    "Baseline": {"session", "created", "model", "tools"},
    "AppliedEdit": {"time", "session", "call", "approval", "forgotten"},
    "HandChange": {"time", "forgotten"},
    "_JournalLineV1": {"time", "session", "call", "approval", "undoes", "forgotten"},
    "Surface": {"user", "post"},
    "OwnerEdit": {"undoes"},
    "RecallRecord": {"time", "session"},
    "HitSource": {"kind", "session", "time", "role", "class_"},
    "AuditRecordV3": {
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
    },
    "AuditRedaction": {"time", "plan", "places", "prev", "mac"},
    "AuditForget": {"time", "session", "plan", "digest", "prev", "mac"},
    "AuditMigration": {"time", "old_last", "prev", "mac"},
    "Inflight": {"post_id", "channel_id", "root_id", "session"},
    "ReplyCreating": {"pending_post_id"},
    "ReplyPosted": {"reply_id"},
    "OpenApproval": {"id", "session", "channel_id", "root_id", "call_id", "post_ids", "part_ids"},
    "OpenConfirmation": {"id", "channel_id", "root_id", "post_id"},
    "Proposal": {"undoes"},
}
"""Every kind's kept strings, as reviewed: a change here is a decision."""

KINDS: list[tuple[str, tuple[object, ...]]] = [
    ("session log", (proto.SessionRecord,)),
    ("baseline", (proto.Baseline,)),
    ("journal", proto.JOURNAL_KINDS),
    ("recall log", (proto.RecallRecord,)),
    ("audit log", proto.AUDIT_KINDS),
    ("the bridge's state", (Inflight, OpenApproval, OpenConfirmation)),
]

PATTERNED = {proto.SESSION_ID_PATTERN: "chat-abcdefghijkl"}


def _structs(kind: mi.Type) -> list[mi.StructType]:
    match kind:
        case mi.StructType():
            return [kind] + [s for f in kind.fields for s in _structs(f.type)]
        case mi.UnionType(types=types):
            return [s for t in types for s in _structs(t)]
        case mi.ListType(item_type=item) | mi.DictType(value_type=item):
            return _structs(item)
        case _:
            return []


def _build(kind: mi.Type, text: str) -> Any:
    """A JSON value of `kind` with `text` in every free string of it."""
    match kind:
        case mi.StrType(pattern=pattern):
            return PATTERNED[pattern] if pattern else f"said {text} here"
        case mi.IntType() | mi.FloatType():
            return 3
        case mi.BoolType():
            return False
        case mi.LiteralType(values=values):
            return values[0]
        case mi.EnumType(cls=cls):
            member = next(iter(cls))
            assert isinstance(member, enum.Enum)
            return member.value
        case mi.NoneType():
            return None
        case mi.UnionType(types=types):
            real = [t for t in types if not isinstance(t, mi.NoneType)]
            return _build(real[0], text)
        case mi.ListType(item_type=item):
            return [_build(item, text)]
        case mi.DictType(key_type=key, value_type=item):
            return {
                _build(key, "key") if isinstance(key, mi.LiteralType) else "key": _build(item, text)
            }
        case mi.StructType(fields=fields, tag_field=tag_field, tag=tag):
            value = {f.encode_name: _build(f.type, text) for f in fields}
            if tag_field is not None:
                value[tag_field] = tag
            return value
        case _:
            return {"any": f"said {text} here"}


def _check(kind: mi.Type, before: Any, after: Any, path: str) -> None:
    """Only kept fields hold the text after; they are as they were."""
    match kind:
        case mi.StrType():
            assert not proto.holds(after, NEEDLE), path
        case mi.StructType(cls=cls, fields=fields):
            kept: frozenset[str] = getattr(cls, "KEPT", frozenset())
            for field in fields:
                if field.encode_name not in before:
                    continue
                where = f"{path}.{field.name}"
                if field.name in kept:
                    assert after[field.encode_name] == before[field.encode_name], where
                else:
                    _check(field.type, before[field.encode_name], after[field.encode_name], where)
        case mi.UnionType(types=types):
            real = [t for t in types if not isinstance(t, mi.NoneType)]
            _check(real[0], before, after, path)
        case mi.ListType(item_type=item):
            for b, a in zip(before, after, strict=True):
                _check(item, b, a, path + "[]")
        case mi.DictType(value_type=item):
            for key in before:
                _check(item, before[key], after[key], f"{path}[{key}]")
        case _:
            assert not proto.holds_value(after, NEEDLE), path


@pytest.mark.parametrize(("store", "kinds"), KINDS, ids=[k[0] for k in KINDS])
def test_every_text_field_of_every_kind_is_redacted_and_only_kept_fields_stay(
    store: str, kinds: tuple[object, ...]
) -> None:
    for kind in kinds:
        info = mi.type_info(kind)
        for struct in info.types if isinstance(info, mi.UnionType) else (info,):
            assert isinstance(struct, mi.StructType)
            value = _build(struct, NEEDLE)
            msgspec.convert(value, kind)  # a record of the kind, as a role writes one
            line = msgspec.json.encode(value)
            redacted = proto.redact_line(line, NEEDLE, kinds)  # None: no text in it
            after = value if redacted is None else msgspec.json.decode(redacted)
            msgspec.convert(after, kind)  # still a record of its kind
            _check(struct, value, after, struct.cls.__name__)


def test_the_kept_fields_are_the_reviewed_ones() -> None:
    found: dict[str, set[str]] = {}
    for _, kinds in KINDS:
        for kind in kinds:
            for struct in _structs(mi.type_info(kind)):
                kept = getattr(struct.cls, "KEPT", None)
                if kept is not None and kept:
                    found[struct.cls.__name__] = set(kept)
                    names = {f.name for f in struct.fields}
                    assert set(kept) <= names, f"{struct.cls.__name__} keeps no such field"
    assert found == KEPT


def test_a_record_is_redacted_as_a_line_of_its_kind() -> None:
    approval = OpenApproval(
        id="ap-1",
        session="mm-root",
        channel_id="ch",
        root_id="root",
        message=f"memory add {NEEDLE}?",
        arguments=f'{{"text": "{NEEDLE}"}}',
    )
    redacted = proto.redact_record(approval, NEEDLE)
    assert redacted is not None
    assert redacted.message == f"memory add {proto.MARKER}?"
    assert redacted.arguments == f'{{"text":"{proto.MARKER}"}}'
    assert (redacted.id, redacted.session) == ("ap-1", "mm-root")
    assert proto.redact_record(redacted, NEEDLE) is None
    proposal = entries.Proposal(edit=proto.MemoryAdd(file="memory", text=NEEDLE.lower()))
    assert proto.redact_record(proposal, NEEDLE) is not None


def test_a_text_field_added_to_a_record_is_redacted_unlisted() -> None:
    class Newer(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="user"):
        KEPT: ClassVar[frozenset[str]] = frozenset({"time"})

        time: str
        content: str
        summary: str  # new, listed nowhere

    line = msgspec.json.encode(
        Newer(time=f"t {NEEDLE}", content=f"a {NEEDLE}", summary=f"b {NEEDLE}")
    )
    redacted = proto.redact_line(line, NEEDLE, (Newer,))
    assert redacted is not None
    after = msgspec.json.decode(redacted)
    assert after["time"] == f"t {NEEDLE}"
    assert after["content"] == f"a {proto.MARKER}"
    assert after["summary"] == f"b {proto.MARKER}"
    # An older reader (the kind without `summary`) redacts the field it does not know too.
    older = proto.redact_line(line, NEEDLE, (proto.SessionRecord,))
    assert older is not None
    assert msgspec.json.decode(older)["summary"] == f"b {proto.MARKER}"
