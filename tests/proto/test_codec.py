"""Frames: a 4-byte big-endian length, then msgspec JSON."""

from __future__ import annotations

import itertools
import json
import typing
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import event, given, settings
from hypothesis import strategies as st

import proto
from proto import (
    HEADER_BYTES,
    MAX_FRAME,
    ApprovalPending,
    Approvals,
    AssistantText,
    BaselinePreviewReply,
    Class,
    FrameTooLarge,
    IncompleteFrame,
    Label,
    MemoryBlockReply,
    MemoryHistory,
    MemoryHistoryReply,
    Message,
    Ok,
    PeerClosed,
    PendingApproval,
    ProtocolError,
    Say,
    SessionOpen,
    SessionOpened,
    SessionUpdated,
    ToolCall,
    ToolCalled,
    ToolRequest,
    ToolResponse,
    ToolResult,
    decode_body,
    encode_frame,
    read_frame,
    write_frame,
)
from proto._messages import AllMessages

KINDS: tuple[type[Message], ...] = typing.get_args(AllMessages)


def tag_of(cls: type[Message]) -> str:
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


TAGS = sorted(tag_of(cls) for cls in KINDS)


class FedStream(trio.abc.ReceiveStream):
    """A receive stream that gives `data` (at most `chunk` bytes a call), then EOF.

    It records every `max_bytes` it was asked for, and how many bytes it handed out.
    """

    def __init__(self, data: bytes, *, chunk: int | None = None) -> None:
        self._data = data
        self._chunk = chunk
        self.consumed = 0
        self.requested: list[int | None] = []

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        self.requested.append(max_bytes)
        n = len(self._data) - self.consumed
        if max_bytes is not None:
            n = min(n, max_bytes)
        if self._chunk is not None:
            n = min(n, self._chunk)
        out = self._data[self.consumed : self.consumed + n]
        self.consumed += n
        return out

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def header(size: int) -> bytes:
    return size.to_bytes(HEADER_BYTES, "big")


def framed(body: bytes) -> bytes:
    return header(len(body)) + body


# -- strategies ---------------------------------------------------------------------------

# st.from_type ignores msgspec.Meta (the SessionId pattern), and passes a field's
# `default_factory` object itself as a value: such fields are built explicitly.
SESSION_IDS = st.from_regex(r"\A[a-z]{2,8}-[a-z0-9]{8,64}\Z")
LABELS = st.builds(Label, class_=st.sampled_from(Class), untrusted=st.booleans())
STATUSES = st.sampled_from(["ok", "error", "denied"])
TOOL_CALLS = st.builds(ToolCall, id=st.text(), name=st.text(), arguments=st.text())
SURFACES = st.builds(
    proto.Surface,
    via=st.sampled_from(["bxctl", "mattermost"]),
    uid=st.none() | st.integers(min_value=0, max_value=2**31),
    user=st.none() | st.text(),
    post=st.none() | st.text(),
)
PENDING = st.builds(
    PendingApproval,
    id=st.text(),
    session=st.text(),
    call_id=st.text(),
    tool=st.text(),
    arguments=st.text(),
    taint=LABELS,
    time=st.text(),
)
DECIDED = st.builds(
    proto.OwnerApproved, surface=SURFACES, proposed=st.none() | st.text()
) | st.builds(proto.OwnerEdit, surface=SURFACES, undoes=st.none() | st.text())
JOURNAL_FILES = st.sampled_from(["memory.md", "user.md"])
ENTRIES = st.lists(st.text(), max_size=3)
APPLIED = st.builds(
    proto.AppliedEdit,
    time=st.text(),
    session=st.text(),
    call=st.text(),
    approval=st.none() | st.text(),
    action=st.sampled_from(["add", "replace", "remove", "consolidate"]),
    file=JOURNAL_FILES,
    before=ENTRIES,
    after=ENTRIES,
    moved=ENTRIES,
    arguments=st.none() | st.text(),
    taint=st.none() | LABELS,
    decided=st.none() | DECIDED,
)
JOURNAL = APPLIED | st.builds(
    proto.HandChange,
    time=st.text(),
    file=JOURNAL_FILES,
    before=st.lists(st.text(), max_size=3),
    after=st.lists(st.text(), max_size=3),
)
EDITS = st.builds(proto.HistoryEdit, id=st.text(), line=JOURNAL)
MEMORY_ARGS = st.builds(proto.MemoryAdd, file=st.sampled_from(["memory", "user"]), text=st.text())
HOLDINGS = st.builds(
    proto.Holding,
    store=st.text(),
    count=st.integers(min_value=0),
    unit=st.text(),
    names=st.lists(st.text(), max_size=2),
)
PARTS = st.text(min_size=1, max_size=proto.MAX_PART_CHARS)

PLAN_IDS = st.from_regex(r"\Afg-[0-9a-z]{6,40}\Z")

EXPLICIT: dict[type[Message], st.SearchStrategy[Message]] = {
    proto.ForgetPrepare: st.builds(proto.ForgetPrepare, plan=PLAN_IDS, text=st.text()),
    proto.ForgetApply: st.builds(proto.ForgetApply, plan=PLAN_IDS, text=st.none() | st.text()),
    proto.ForgetAbort: st.builds(proto.ForgetAbort, plan=PLAN_IDS),
    SessionUpdated: st.builds(SessionUpdated, session=SESSION_IDS),
    ToolRequest: st.builds(
        ToolRequest,
        session=SESSION_IDS,
        call=TOOL_CALLS,
        taint=LABELS,
        authority=st.none()
        | st.builds(proto.Authority, approval=st.text(), token=st.text(), decided=DECIDED),
    ),
    ToolResponse: st.builds(
        ToolResponse, call_id=st.text(), status=STATUSES, content=st.text(), label=LABELS
    ),
    proto.ApprovalDecide: st.builds(
        proto.ApprovalDecide.deciding,
        st.text(),
        st.builds(proto.Approve, version=st.none() | st.text(), note=st.none() | st.text())
        | st.builds(proto.Deny, reason=st.none() | st.text()),
        surface=st.none() | SURFACES,
    ),
    ApprovalPending: st.builds(ApprovalPending, approval=PENDING),
    MemoryHistory: st.builds(
        MemoryHistory,
        file=st.sampled_from([None, "memory", "user"]),
        before=st.none() | st.integers(min_value=0),
    ),
    MemoryHistoryReply: st.builds(
        MemoryHistoryReply, edits=st.lists(EDITS, max_size=3), older=st.integers(min_value=0)
    ),
    Approvals: st.builds(Approvals, pending=st.lists(PENDING, max_size=3)),
    proto.MemoryAmbiguous: st.builds(
        proto.MemoryAmbiguous,
        entries=st.lists(
            st.builds(proto.FoundEntry, file=st.sampled_from(["memory", "user"]), entry=st.text())
        ),
        omitted=st.integers(min_value=0),
    ),
    proto.MemoryFind: st.builds(
        proto.MemoryFind, part=PARTS, file=st.sampled_from([None, "memory", "user"])
    ),
    proto.UndoPlanned: st.builds(proto.UndoPlanned, id=st.text(), edit=APPLIED, undo=MEMORY_ARGS),
    proto.UndoHandChange: st.builds(
        proto.UndoHandChange,
        id=st.text(),
        change=st.builds(
            proto.HandChange,
            time=st.text(),
            file=JOURNAL_FILES,
            before=st.lists(st.text()),
            after=st.lists(st.text()),
        ),
    ),
    SessionOpen: st.builds(SessionOpen, origin=st.text(), session=st.none() | SESSION_IDS),
    SessionOpened: st.builds(SessionOpened, session=SESSION_IDS, created=st.booleans()),
    Say: st.builds(
        Say,
        session=SESSION_IDS,
        text=st.text(),
        ref=st.none() | st.text(max_size=64),
        keep_going=st.booleans(),
    ),
    proto.TurnFollow: st.builds(proto.TurnFollow, session=SESSION_IDS, ref=st.text(max_size=64)),
    AssistantText: st.builds(AssistantText, text=st.text()),
    proto.CallState: st.builds(proto.CallState, session=SESSION_IDS, call=st.text()),
    ToolCalled: st.builds(ToolCalled, call=TOOL_CALLS),
    ToolResult: st.builds(
        ToolResult, call=TOOL_CALLS, status=STATUSES, content=st.text(), label=LABELS
    ),
    proto.MemoryEdit: st.builds(
        proto.MemoryEdit,
        arguments=st.text(),
        surface=SURFACES,
        session=st.none() | SESSION_IDS,
        undoes=st.none() | st.text(),
    ),
    proto.MemoryWhy: st.builds(proto.MemoryWhy, part=st.text(min_size=1, max_size=50)),
    proto.MemoryWhyReply: st.builds(
        proto.MemoryWhyReply,
        entries=st.lists(
            st.builds(
                proto.WhyEntry,
                file=st.sampled_from(["memory", "user", "archive"]),
                entry=st.text(),
                edits=st.lists(
                    st.builds(
                        proto.WhyEdit,
                        id=st.text(),
                        time=st.text(),
                        action=st.sampled_from(["add", "replace", "remove", "consolidate"]),
                        file=JOURNAL_FILES,
                        session=st.text(),
                        call=st.text(),
                        approval=st.none() | st.text(),
                        decided=st.none() | DECIDED,
                        taint=st.none() | LABELS,
                        owner_said=st.none() | st.text(),
                        previous=st.none() | st.text(),
                    ),
                    max_size=2,
                ),
            ),
            max_size=2,
        ),
    ),
    **{
        kind: st.builds(
            kind,
            holdings=st.lists(HOLDINGS, max_size=3),
            **({"plan": st.text()} if "plan" in kind.__struct_fields__ else {}),
        )
        for kind in (proto.ForgetPrepared, proto.ForgetApplied)
    },
    proto.ForgetLooked: st.builds(proto.ForgetLooked, holdings=st.lists(HOLDINGS, max_size=3)),
    proto.AuditVerified: st.builds(
        proto.AuditVerified,
        records=st.integers(),
        ok=st.booleans(),
        broken_at=st.none() | st.text(),
        forgets=st.lists(
            st.builds(
                proto.ForgetOnRecord,
                plan=st.text(),
                time=st.text(),
                surface=st.none() | SURFACES,
                records=st.integers(),
            ),
            max_size=2,
        ),
    ),
    proto.ForgetPreviewed: st.builds(
        proto.ForgetPreviewed, holdings=st.lists(HOLDINGS, max_size=3)
    ),
    proto.Forgotten: st.builds(
        proto.Forgotten,
        plan=st.text(),
        holdings=st.lists(HOLDINGS, max_size=3),
        left=st.lists(
            st.builds(
                proto.PartLeft,
                part=st.text(),
                why=st.text(),
                holdings=st.lists(HOLDINGS, max_size=2),
            ),
            max_size=2,
        ),
        denied=st.lists(st.text(), max_size=2),
    ),
    proto.ForgetProgress: st.builds(
        proto.ForgetProgress,
        step=st.sampled_from(["preview", "prepare", "apply"]),
        working=st.lists(st.text(), max_size=2),
        gone=st.lists(st.text(), max_size=2),
        waited_s=st.integers(min_value=0),
        bound_s=st.integers(min_value=0),
    ),
    proto.Forget: st.builds(
        proto.Forget, text=st.text(), surface=SURFACES, session=st.none() | SESSION_IDS
    ),
    # JSON schemas: plain JSON values only (from_type would try any Python object).
    BaselinePreviewReply: st.builds(
        BaselinePreviewReply,
        system=st.text(),
        tools=st.lists(
            st.dictionaries(st.text(max_size=8), st.none() | st.booleans() | st.text(max_size=8)),
            max_size=3,
        ),
        model=st.text(),
        model_url=st.text(),
    ),
}


def strategy_for(cls: type[Message]) -> st.SearchStrategy[Message]:
    return EXPLICIT[cls] if cls in EXPLICIT else st.from_type(cls)


def test_explicit_strategies_name_real_kinds() -> None:
    assert set(EXPLICIT) <= set(KINDS)
    assert len(KINDS) == 61


# -- round trip ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", KINDS, ids=tag_of)
@settings(max_examples=25)
@given(data=st.data())
async def test_every_kind_round_trips(cls: type[Message], data: st.DataObject) -> None:
    message = data.draw(strategy_for(cls))
    frame = encode_frame(message)

    body = frame[HEADER_BYTES:]
    assert int.from_bytes(frame[:HEADER_BYTES], "big") == len(body)
    assert json.loads(body)["kind"] == tag_of(cls)

    send, receive = trio.testing.memory_stream_pair()
    await write_frame(send, message)
    got = await read_frame(receive)
    assert type(got) is cls
    assert got == message
    assert encode_frame(got) == frame


@settings(max_examples=50)
@given(
    first=strategy_for(ToolRequest),
    second=strategy_for(ToolResult),
    chunk=st.integers(1, 7),
)
async def test_frames_are_read_one_at_a_time_from_a_chunked_stream(
    first: Message, second: Message, chunk: int
) -> None:
    stream = FedStream(encode_frame(first) + encode_frame(second), chunk=chunk)
    assert await read_frame(stream) == first
    assert await read_frame(stream) == second
    with pytest.raises(PeerClosed):
        await read_frame(stream)


def _read_all(chunks: list[bytes], *, max_frame_bytes: int) -> list[Message | str]:
    """The frames a `FrameReader` gives for `chunks` and then the end, and how it stopped."""
    reader = proto.FrameReader(max_frame_bytes=max_frame_bytes)
    got: list[Message | str] = []
    for chunk in [*chunks, b""]:
        reader.receive(chunk)
        try:
            while (message := reader.next_frame()) is not None:
                got.append(message)
        except (ProtocolError, PeerClosed) as exc:
            got.append(f"{type(exc).__name__}: {exc}")
            return got
    raise AssertionError("the end of the stream always ends the reading")


async def _read_frames(data: bytes, *, max_frame_bytes: int) -> list[Message | str]:
    """`read_frame` again and again over `data`, each read asking for what it needs."""
    stream = FedStream(data)
    got: list[Message | str] = []
    while True:
        try:
            got.append(await read_frame(stream, max_frame_bytes=max_frame_bytes))
        except (ProtocolError, PeerClosed) as exc:
            got.append(f"{type(exc).__name__}: {exc}")
            return got


@settings(max_examples=200)
@given(
    data=st.lists(
        st.one_of(
            strategy_for(ToolResult).map(encode_frame),
            st.just(encode_frame(Ok())),
            st.binary(max_size=12),
            st.binary(max_size=12).map(lambda body: len(body).to_bytes(HEADER_BYTES, "big") + body),
        ),
        max_size=4,
    ).map(b"".join),
    cuts=st.lists(st.integers(0, 400), max_size=6),
    max_frame_bytes=st.sampled_from([16, 200, MAX_FRAME]),
)
async def test_a_frame_reader_reads_the_same_however_the_bytes_come(
    data: bytes, cuts: list[int], max_frame_bytes: int
) -> None:
    # the reference reads exactly a header, then exactly its body; here any piece comes
    points = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    read = await _read_frames(data, max_frame_bytes=max_frame_bytes)
    assert _read_all(chunks, max_frame_bytes=max_frame_bytes) == read
    event(read[-1].split(":")[0] if isinstance(read[-1], str) else "?")


def test_a_frame_reader_asks_for_the_header_then_the_body_and_no_more() -> None:
    reader = proto.FrameReader()
    data = encode_frame(Ok()) + encode_frame(Ok())
    assert reader.wanted() == HEADER_BYTES
    reader.receive(data[:2])
    assert reader.next_frame() is None
    assert reader.wanted() == HEADER_BYTES - 2
    reader.receive(data[2:HEADER_BYTES])
    assert reader.next_frame() is None
    body = len(encode_frame(Ok())) - HEADER_BYTES
    assert reader.wanted() == body
    reader.receive(data[HEADER_BYTES : HEADER_BYTES + body])
    assert reader.next_frame() == Ok()
    assert reader.wanted() == HEADER_BYTES  # the next frame's header


async def test_closed_memory_stream_after_a_frame_is_peer_closed() -> None:
    send, receive = trio.testing.memory_stream_pair()
    await write_frame(send, Ok())
    await send.aclose()
    assert await read_frame(receive) == Ok()
    with pytest.raises(PeerClosed):
        await read_frame(receive)


# -- arbitrary bytes ----------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
FIELD_NAMES = st.sampled_from(
    ["text", "session", "call", "id", "name", "arguments", "taint", "label", "class",
     "untrusted", "code", "message", "status", "content", "call_id", "query", "k", "logs",
     "records", "archive", "edits", "pending", "approve", "origin", "created", "event",
     "approval", "file", "grants", "problems", "ok", "extra"]
)  # fmt: skip
KIND_FIELDS: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.sampled_from(TAGS).map(lambda tag: {"kind": tag}),
    JSON_VALUES.map(lambda value: {"kind": value}),
    st.just({}),
)
JSON_OBJECTS = st.builds(
    lambda kind, rest: {**rest, **kind},
    KIND_FIELDS,
    st.dictionaries(FIELD_NAMES, JSON_VALUES, max_size=5),
)


def mutate(obj: dict[str, Any], how: str, index: int, value: Any) -> dict[str, Any]:
    """Drop, replace or add one top-level field of a valid message's JSON, or keep it whole."""
    keys = sorted(obj)
    key = keys[index % len(keys)]
    if how == "drop":
        return {k: v for k, v in obj.items() if k != key}
    if how == "replace":
        return {**obj, key: value}
    if how == "add":
        return {**obj, "extra": value}
    return obj


ANY_MESSAGE = st.one_of(*(strategy_for(cls) for cls in KINDS))
MUTATED = st.builds(
    mutate,
    ANY_MESSAGE.map(lambda message: json.loads(encode_frame(message)[HEADER_BYTES:])),
    st.sampled_from(["drop", "replace", "add", "keep"]),
    st.integers(0, 10),
    JSON_VALUES,
)
BYTES = st.one_of(
    st.binary(max_size=64),
    st.binary(max_size=200).map(framed),
    JSON_OBJECTS.map(lambda obj: framed(json.dumps(obj).encode())),
    MUTATED.map(lambda obj: framed(json.dumps(obj).encode())),
)


@settings(max_examples=300)
@given(data=BYTES, chunk=st.none() | st.integers(1, 5))
async def test_arbitrary_bytes_give_a_message_or_a_protocol_error(
    data: bytes, chunk: int | None
) -> None:
    stream = FedStream(data, chunk=chunk)
    declared = int.from_bytes(data[:HEADER_BYTES], "big") if len(data) >= HEADER_BYTES else None
    outcome: Message | PeerClosed | ProtocolError
    try:
        outcome = await read_frame(stream)
    except (PeerClosed, ProtocolError) as exc:  # anything else fails the test
        outcome = exc
    event(type(outcome).__name__)

    if isinstance(outcome, PeerClosed):
        assert data == b""
    elif isinstance(outcome, FrameTooLarge):
        assert declared is not None
        assert declared > MAX_FRAME
        assert outcome.size == declared
        assert stream.consumed == HEADER_BYTES
    elif isinstance(outcome, IncompleteFrame):
        assert data != b""
        assert declared is None or len(data) < HEADER_BYTES + declared
    elif isinstance(outcome, ProtocolError):
        assert outcome.code == "bad-frame"
        assert str(outcome)
        assert declared is not None
        assert stream.consumed == HEADER_BYTES + declared
    else:
        assert isinstance(outcome, Message)
        assert declared is not None
        assert stream.consumed == HEADER_BYTES + declared


# -- the length prefix and EOF ------------------------------------------------------------


async def test_a_4_gib_length_prefix_is_refused_before_the_body_is_read() -> None:
    stream = FedStream(b"\xff\xff\xff\xff" + b'{"kind":"ok"}' * 100)
    with pytest.raises(FrameTooLarge) as caught:
        await read_frame(stream)
    assert caught.value.code == "frame-too-large"
    assert caught.value.size == 2**32 - 1
    assert caught.value.limit == MAX_FRAME
    assert str(caught.value) == "frame of 4,294,967,295 bytes exceeds the limit of 1,048,576"
    assert stream.requested == [HEADER_BYTES]
    assert stream.consumed == HEADER_BYTES


async def test_the_length_limit_is_inclusive() -> None:
    body = b'{"kind":"ok"}'
    assert await read_frame(FedStream(framed(body)), max_frame_bytes=len(body)) == Ok()
    stream = FedStream(framed(body))
    with pytest.raises(FrameTooLarge) as caught:
        await read_frame(stream, max_frame_bytes=len(body) - 1)
    assert (caught.value.size, caught.value.limit) == (len(body), len(body) - 1)
    assert stream.consumed == HEADER_BYTES


async def test_one_over_max_frame_is_refused_by_default() -> None:
    stream = FedStream(header(MAX_FRAME + 1))
    with pytest.raises(FrameTooLarge):
        await read_frame(stream)
    assert stream.consumed == HEADER_BYTES


async def test_empty_input_is_peer_closed_not_an_error() -> None:
    with pytest.raises(PeerClosed) as caught:
        await read_frame(FedStream(b""))
    assert not isinstance(caught.value, ProtocolError)


@pytest.mark.parametrize("chunk", [None, 1])
async def test_half_a_header_then_eof_is_incomplete(chunk: int | None) -> None:
    with pytest.raises(IncompleteFrame) as caught:
        await read_frame(FedStream(b"\x00\x00", chunk=chunk))
    assert caught.value.code == "bad-frame"
    assert str(caught.value) == "peer closed after 2 of 4 bytes"


@pytest.mark.parametrize("chunk", [None, 2])
async def test_header_then_part_of_the_body_then_eof_is_incomplete(chunk: int | None) -> None:
    body = b'{"kind":"ok"}'
    with pytest.raises(IncompleteFrame) as caught:
        await read_frame(FedStream(header(len(body)) + body[:5], chunk=chunk))
    assert isinstance(caught.value, ProtocolError)
    assert str(caught.value) == f"peer closed after 5 of {len(body)} bytes"


async def test_header_alone_then_eof_is_incomplete() -> None:
    with pytest.raises(IncompleteFrame, match="after 0 of 13 bytes"):
        await read_frame(FedStream(header(13)))


async def test_a_zero_length_frame_is_a_bad_frame() -> None:
    with pytest.raises(ProtocolError) as caught:
        await read_frame(FedStream(header(0)))
    assert type(caught.value) is ProtocolError
    assert caught.value.code == "bad-frame"


# -- bad bodies ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b"not json", "malformed: invalid character (byte 4)", id="not-json"),
        pytest.param(b'{"kind":"ok"} x', "malformed: trailing characters", id="trailing"),
        pytest.param(b"\xff\xfe", "malformed", id="binary"),
        pytest.param(b'{"kind":"nope"}', "invalid value 'nope' - at `$.kind`", id="unknown-kind"),
        pytest.param(b'{"text":"x"}', "missing required field `kind`", id="no-kind"),
        pytest.param(
            b'{"kind":"memory_block_reply"}', "missing required field `text`", id="missing-field"
        ),
        pytest.param(
            b'{"kind":"tool_request","session":"chat-abcdefgh","call":{"id":"1","name":"n"}}',
            "missing required field `arguments` - at `$.call`",
            id="missing-nested-field",
        ),
        pytest.param(
            b'{"kind":"memory_block_reply","text":1}',
            "expected `str`, got `int` - at `$.text`",
            id="wrong-type",
        ),
        pytest.param(
            b'{"kind":"tool_response","call_id":"1","status":"maybe","content":""}',
            "- at `$.status`",
            id="bad-literal",
        ),
        pytest.param(
            b'{"kind":"tool_response","call_id":"1","status":"ok","content":"",'
            b'"label":{"class":"top-secret","untrusted":false}}',
            "- at `$.label.class`",
            id="bad-class",
        ),
        pytest.param(
            b'{"kind":"session_updated","session":"../../etc"}', "- at `$.session`", id="bad-id"
        ),
        pytest.param(b"[]", "expected `object`, got `array`", id="array"),
    ],
)
async def test_bad_bodies_are_bad_frames_with_msgspec_s_message(body: bytes, expected: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        await read_frame(FedStream(framed(body)))
    assert type(caught.value) is ProtocolError
    assert caught.value.code == "bad-frame"
    assert expected in str(caught.value)
    message = str(caught.value)
    assert message[:1].islower() or message.startswith("JSON ")  # acronyms keep their case


def test_decode_body_raises_the_same_protocol_error() -> None:
    with pytest.raises(ProtocolError, match=r"at `\$\.kind`"):
        decode_body(b'{"kind":"nope"}')


def test_malformed_json_message_reads_well() -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_body(b"not json")
    assert "jSON" not in str(caught.value)


@pytest.mark.parametrize("where", ["after-kind", "before-kind"])
def test_deeply_nested_unknown_field_is_a_protocol_error(where: str) -> None:
    # msgspec raises RecursionError skipping a deeply nested unknown field; the codec
    # must turn it into a ProtocolError like any other malformed body.
    nested = b"[" * 5_000 + b"]" * 5_000
    if where == "after-kind":
        body = b'{"kind":"ok","extra":' + nested + b"}"
    else:
        body = b'{"extra":' + nested + b',"kind":"ok"}'
    assert len(body) < 11_000
    with pytest.raises(ProtocolError):
        decode_body(body)


# -- encoding -----------------------------------------------------------------------------


def test_encoding_a_message_over_the_limit_raises_frame_too_large() -> None:
    message = MemoryBlockReply(text="x" * MAX_FRAME)
    expected = len(b'{"kind":"memory_block_reply","text":""}') + MAX_FRAME
    with pytest.raises(FrameTooLarge) as caught:
        encode_frame(message)
    assert (caught.value.size, caught.value.limit) == (expected, MAX_FRAME)
    assert caught.value.code == "frame-too-large"


def test_encoding_respects_a_custom_limit_inclusively() -> None:
    body = b'{"kind":"ok"}'
    assert encode_frame(Ok(), max_frame_bytes=len(body)) == framed(body)
    with pytest.raises(FrameTooLarge):
        encode_frame(Ok(), max_frame_bytes=len(body) - 1)


async def test_write_frame_sends_nothing_when_the_message_is_too_large() -> None:
    send, receive = trio.testing.memory_stream_pair()
    with pytest.raises(FrameTooLarge):
        await write_frame(send, MemoryBlockReply(text="x" * 100), max_frame_bytes=50)
    await send.aclose()
    assert await receive.receive_some() == b""


def test_encoding_writes_the_big_endian_length() -> None:
    frame = encode_frame(MemoryBlockReply(text="é" * 200))
    body = b'{"kind":"memory_block_reply","text":"' + "é".encode() * 200 + b'"}'
    assert frame == bytes([0, 0, len(body) >> 8, len(body) & 0xFF]) + body


# -- forward compatibility ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"kind": "say", "session": "chat-abcdefgh", "text": "hi", "future": {"a": [1, 2]}},
            Say(session="chat-abcdefgh", text="hi"),
        ),
        ({"kind": "ok", "since": "v2"}, Ok()),
        (
            {
                "kind": "tool_request",
                "session": "mm-8ass9m4b2c",
                "call": {"id": "c1", "name": "recall", "arguments": "{}", "extra": True},
                "taint": {"class": "secret", "untrusted": True, "why": "web"},
                "approval": None,
                "priority": 3,
            },
            ToolRequest(
                session="mm-8ass9m4b2c",
                call=ToolCall(id="c1", name="recall", arguments="{}"),
                taint=Label(class_=Class.secret, untrusted=True),
            ),
        ),
    ],
)
async def test_frames_ignore_unknown_fields(body: dict[str, Any], expected: Message) -> None:
    assert await read_frame(FedStream(framed(json.dumps(body).encode()))) == expected


async def test_defaults_fill_fields_an_older_peer_leaves_out() -> None:
    body = {
        "kind": "tool_response",
        "call_id": "c1",
        "status": "denied",
        "content": "no",
    }
    got = await read_frame(FedStream(framed(json.dumps(body).encode())))
    assert got == ToolResponse(call_id="c1", status="denied", content="no")
    assert isinstance(got, ToolResponse)
    assert got.label == Label(class_=Class.private, untrusted=False)


def test_a_lone_surrogate_in_a_message_is_a_protocol_error_not_a_crash() -> None:
    with pytest.raises(ProtocolError, match="not Unicode"):
        encode_frame(proto.TurnDone(text="\ud800"))
