"""Golden tests: the kinds on the wire and the sockets that carry them.

The literal sets below are written out from the frames each socket takes (plus our own
`approval_pending` reply on loop-broker). A change here is a change of the protocol.
"""

from __future__ import annotations

import typing
from pathlib import Path

import msgspec
import pytest

import proto
from proto import (
    SOCKETS,
    ApprovalDecide,
    ApprovalRevise,
    ApprovalsList,
    AuditVerify,
    BaselinePreview,
    Class,
    GrantsList,
    Label,
    MemoryBlock,
    MemoryEdit,
    MemoryHistory,
    MemoryWhy,
    Message,
    ModelInfo,
    PendingApproval,
    RecallQuery,
    Reindex,
    Say,
    SessionOpen,
    SessionUpdated,
    Socket,
    Surface,
    ToolCall,
    ToolRequest,
)
from proto._messages import AllMessages

KINDS: tuple[type[Message], ...] = typing.get_args(AllMessages)


def tag_of(cls: type[Message]) -> str:
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str)
    return tag


# socket name -> (server, peer, path under home, request kinds, reply kinds)
GOLDEN: dict[str, tuple[str, str, str, set[str], set[str]]] = {
    "loop-memory": (
        "memoryd",
        "loopd",
        "run/loop-memory/memory.sock",
        {"memory_block", "session_updated"},
        {"memory_block_reply", "ok", "error"},
    ),
    "broker-memory": (
        "memoryd",
        "brokerd",
        "run/broker-memory/memory.sock",
        # forget_*: ours, not the original frames (issue 31): each role forgets in its own store
        {"tool_request", "forget_look", "forget_prepare", "forget_apply", "forget_abort"},
        {"tool_response", "forget_looked", "forget_prepared", "forget_applied", "ok", "error"},
    ),
    "owner-memory": (
        "memoryd",
        "bxctl",
        "run/owner-memory/admin.sock",
        # memory_find, undo_plan, memory_block: ours, not the original frames (issue 30):
        # one meaning of the owner's commands, and the block on a socket the owner can reach
        {
            "reindex",
            "recall_query",
            "owner_recall",  # ours: the owner's recall hit by hit, each with its source
            "memory_history",
            "memory_why",
            "memory_find",
            "undo_plan",
            "memory_block",
        },
        {
            "reindexed",
            "tool_response",
            "owner_recalled",
            "memory_history_reply",
            "memory_why_reply",
            "memory_found",
            "memory_ambiguous",
            "memory_not_found",
            "undo_planned",
            "undo_hand_change",
            "no_such_edit",
            "memory_block_reply",
            "error",
        },
    ),
    "loop-broker": (
        "brokerd",
        "loopd",
        "run/loop-broker/broker.sock",
        {"tool_request", "call_state"},  # call_state: ours, not the original frames (issue 13)
        {"approval_pending", "tool_response", "call_state_reply", "error"},  # ours too
    ),
    "owner-broker": (
        "brokerd",
        "bxctl",
        "run/owner-broker/admin.sock",
        {
            "approvals_list",
            "approval_decide",
            "approval_revise",
            "memory_edit",
            "grants_list",
            "audit_verify",
            "forget_preview",  # ours (issue 31)
            "forget",
        },
        {
            "approvals",
            "ok",
            "approval_revised",
            "tool_response",
            "grants",
            "audit_verified",
            "forget_previewed",
            "forget_progress",
            "forgotten",
            "error",
        },
    ),
    "owner-loop": (
        "loopd",
        "bxctl",
        "run/owner-loop/chat.sock",
        {"session_open", "say", "turn_follow", "baseline_preview", "model_info"},
        {
            "session_opened",
            "assistant_text",
            "tool_called",
            "tool_result",
            "approval_pending",
            "turn_done",
            "baseline_preview_reply",
            "model_info_reply",
            "error",
        },
    ),
    # ours, not the original frames (issue 31): brokerd asks loopd for its part of a forget
    "broker-loop": (
        "loopd",
        "brokerd",
        "run/broker-loop/loop.sock",
        {"forget_look", "forget_prepare", "forget_apply", "forget_abort"},
        {"forget_looked", "forget_prepared", "forget_applied", "ok", "error"},
    ),
}

ALL_TAGS = {
    "error",
    "ok",
    "memory_block",
    "memory_block_reply",
    "session_updated",
    "tool_request",
    "tool_response",
    "approval_pending",
    "call_state",
    "call_state_reply",
    "reindex",
    "reindexed",
    "recall_query",
    "owner_recall",
    "owner_recalled",
    "memory_history",
    "memory_history_reply",
    "approvals_list",
    "approvals",
    "approval_decide",
    "grants_list",
    "grants",
    "audit_verify",
    "audit_verified",
    "session_open",
    "session_opened",
    "say",
    "turn_follow",
    "assistant_text",
    "tool_called",
    "tool_result",
    "turn_done",
    "baseline_preview",
    "baseline_preview_reply",
    "model_info",
    "model_info_reply",
    "approval_revise",
    "approval_revised",
    "memory_edit",
    "memory_why",
    "memory_why_reply",
    "memory_find",
    "memory_found",
    "memory_ambiguous",
    "memory_not_found",
    "undo_plan",
    "undo_planned",
    "undo_hand_change",
    "no_such_edit",
    "forget_look",
    "forget_looked",
    "forget_prepare",
    "forget_prepared",
    "forget_apply",
    "forget_applied",
    "forget_abort",
    "forget_preview",
    "forget_previewed",
    "forget",
    "forget_progress",
    "forgotten",
}

# The wire fields of every kind besides `kind`.
WIRE_FIELDS: dict[str, set[str]] = {
    "error": {"code", "message", "runbook"},
    "ok": set(),
    "memory_block": set(),
    "memory_block_reply": {"text"},
    "session_updated": {"session", "rewritten"},
    "tool_request": {"session", "call", "taint", "authority"},
    "tool_response": {"call_id", "status", "content", "label"},
    "approval_pending": {"approval"},
    "call_state": {"session", "call"},
    "call_state_reply": {"state", "status"},
    "reindex": set(),
    "reindexed": {"logs", "records", "archive"},
    "recall_query": {"query", "k"},
    "owner_recall": {"query", "k"},
    "owner_recalled": {"hits", "label"},
    "memory_history": {"file", "before"},
    "memory_history_reply": {"edits", "older"},
    "approvals_list": {"ids"},
    "approvals": {"pending", "more"},
    "approval_decide": {"id", "approve", "reason", "arguments", "surface"},
    "approval_revise": {"id", "arguments"},
    "approval_revised": {"id", "arguments"},
    "memory_edit": {"arguments", "surface", "session", "undoes"},
    "memory_why": {"part"},
    "memory_why_reply": {"entries", "omitted"},
    "memory_find": {"part", "file"},
    "memory_found": {"found"},
    "memory_ambiguous": {"entries", "omitted"},
    "memory_not_found": set(),
    "undo_plan": {"edit"},
    "undo_planned": {"id", "edit", "undo"},
    "undo_hand_change": {"id", "change"},
    "no_such_edit": {"edit"},
    "forget_look": {"text"},
    "forget_looked": {"holdings", "entries", "near"},
    "forget_prepare": {"plan", "text"},
    "forget_prepared": {"plan", "holdings"},
    "forget_apply": {"plan", "text"},
    "forget_applied": {"plan", "holdings", "conflicts", "again"},
    "forget_abort": {"plan"},
    "forget_preview": {"text"},
    "forget_previewed": {"holdings", "entries", "near"},
    "forget": {"text", "surface", "session"},
    "forget_progress": {"step", "working", "gone", "waited_s", "bound_s"},
    "forgotten": {"plan", "holdings", "left", "lost", "conflicts", "denied"},
    "grants_list": set(),
    "grants": {"grants", "problems"},
    "audit_verify": set(),
    "audit_verified": {"records", "ok", "broken_at", "forgets"},
    "session_open": {"origin", "session"},
    "session_opened": {"session", "created"},
    "say": {"session", "text", "ref", "keep_going"},
    "turn_follow": {"session", "ref"},
    "assistant_text": {"text"},
    "tool_called": {"call"},
    "tool_result": {"call", "status", "content", "label"},
    "turn_done": {"text"},
    "baseline_preview": set(),
    "baseline_preview_reply": {"system", "tools", "model", "model_url"},
    "model_info": set(),
    "model_info_reply": {"model", "url"},
}

SOCKETS_BY_NAME = {socket.name: socket for socket in SOCKETS}


def wire_names(cls: type[msgspec.Struct]) -> set[str]:
    return {field.encode_name for field in msgspec.structs.fields(cls)}


def test_the_sockets_are_the_six_of_architecture_and_our_seventh() -> None:
    assert [socket.name for socket in SOCKETS] == list(GOLDEN)


@pytest.mark.parametrize("name", list(GOLDEN))
def test_socket_matches_the_golden_table(name: str) -> None:
    socket = SOCKETS_BY_NAME[name]
    server, peer, path, requests, replies = GOLDEN[name]
    assert (socket.server, socket.peer, socket.relative_path) == (server, peer, path)
    assert {tag_of(cls) for cls in socket.requests} == requests
    assert {tag_of(cls) for cls in socket.replies} == replies
    assert len(socket.requests) == len(requests)
    assert len(socket.replies) == len(replies)


@pytest.mark.parametrize("socket", SOCKETS, ids=lambda socket: socket.name)
def test_default_path_is_under_home_run(socket: Socket[Message]) -> None:
    path = socket.default_path(Path("/home/bx"))
    assert path == Path("/home/bx") / GOLDEN[socket.name][2]
    assert path.parent.name == socket.name


def test_every_tag_is_written_out_and_unique() -> None:
    tags = [tag_of(cls) for cls in KINDS]
    assert len(tags) == len(set(tags))
    assert set(tags) == ALL_TAGS
    for cls in KINDS:
        assert tag_of(cls) != cls.__name__
        assert cls.__struct_config__.tag_field == "kind"


def test_every_kind_is_carried_by_some_socket() -> None:
    carried = {cls for socket in SOCKETS for cls in (*socket.requests, *socket.replies)}
    assert carried == set(KINDS)


def test_error_is_a_reply_on_every_socket_and_never_a_request() -> None:
    for socket in SOCKETS:
        assert "error" in {tag_of(cls) for cls in socket.replies}
        assert "error" not in {tag_of(cls) for cls in socket.requests}


@pytest.mark.parametrize("cls", KINDS, ids=tag_of)
def test_wire_fields_of_every_kind(cls: type[Message]) -> None:
    assert wire_names(cls) == WIRE_FIELDS[tag_of(cls)]


def test_payload_fields() -> None:
    assert wire_names(ToolCall) == {"id", "name", "arguments"}
    assert wire_names(PendingApproval) == {
        "id",
        "session",
        "call_id",
        "tool",
        "arguments",
        "taint",
        "time",
    }
    assert wire_names(Label) == {"class", "untrusted"}
    assert ToolCall.__struct_config__.tag is None
    assert Label.__struct_config__.tag is None


def test_label_wire_form() -> None:
    assert msgspec.json.encode(Label()) == b'{"class":"private","untrusted":false}'
    assert (
        msgspec.json.encode(Label(class_=Class.secret, untrusted=True))
        == b'{"class":"secret","untrusted":true}'
    )
    assert msgspec.json.decode(b'{"class":"public","untrusted":true}', type=Label) == Label(
        class_=Class.public, untrusted=True
    )


def test_tool_request_wire_form() -> None:
    request = ToolRequest(
        session="chat-abcdefgh", call=ToolCall(id="c1", name="recall", arguments='{"query":"x"}')
    )
    assert msgspec.json.decode(msgspec.json.encode(request)) == {
        "kind": "tool_request",
        "session": "chat-abcdefgh",
        "call": {"id": "c1", "name": "recall", "arguments": '{"query":"x"}'},
        "taint": {"class": "private", "untrusted": False},
    }  # the original frame less its `approval: null`: brokerd reads no approval from loopd


def test_owner_recalled_wire_form_round_trips() -> None:
    source = proto.HitSource(
        kind="session",
        session="chat-k6m5ert76psohrmw5uwb2ibpb4",
        epoch=0,
        record=12,
        time="2026-09-20T14:02:11Z",
        role="user",
        class_="private",
        untrusted=False,
    )
    hit = proto.RecallHit(source=source, label=Label(), snippet="the launch window moved")
    reply = proto.OwnerRecalled(hits=[hit], label=Label())
    frame = proto.encode_frame(reply)
    assert msgspec.json.decode(frame[proto.HEADER_BYTES :]) == {
        "kind": "owner_recalled",
        "hits": [
            {
                "source": {
                    "kind": "session",
                    "session": "chat-k6m5ert76psohrmw5uwb2ibpb4",
                    "epoch": 0,
                    "record": 12,
                    "time": "2026-09-20T14:02:11Z",
                    "role": "user",
                    "class": "private",
                    "untrusted": False,
                },
                "label": {"class": "private", "untrusted": False},
                "snippet": "the launch window moved",
            }
        ],
        "label": {"class": "private", "untrusted": False},
    }
    assert proto.decode_body(frame[proto.HEADER_BYTES :]) == reply
    request = proto.OwnerRecall(query="launch window", k=3)
    assert proto.decode_body(proto.encode_frame(request)[proto.HEADER_BYTES :]) == request
    assert wire_names(proto.RecallHit) == {"source", "label", "snippet"}


REQUEST_EXAMPLES: list[Message] = [
    proto.CallState(session="chat-abcdefgh", call="call_1"),
    MemoryBlock(),
    SessionUpdated(session="chat-abcdefgh"),
    ToolRequest(session="chat-abcdefgh", call=ToolCall(id="1", name="recall", arguments="{}")),
    Reindex(),
    RecallQuery(query="launch"),
    proto.OwnerRecall(query="launch"),
    MemoryHistory(),
    ApprovalsList(),
    ApprovalDecide(id="a1", approve=True),
    GrantsList(),
    AuditVerify(),
    SessionOpen(origin="cli"),
    Say(session="chat-abcdefgh", text="hi"),
    proto.TurnFollow(session="chat-abcdefgh", ref="mm:x"),
    BaselinePreview(),
    ModelInfo(),
    MemoryWhy(part="tea"),
    proto.MemoryFind(part="tea"),
    proto.UndoPlan(),
    MemoryEdit(arguments="{}", surface=Surface(via="bxctl")),
    ApprovalRevise(id="ap-abcdef", arguments="{}"),
    proto.ForgetLook(text="zebra"),
    proto.ForgetPrepare(plan="fg-abcdef", text="zebra"),
    proto.ForgetApply(plan="fg-abcdef"),
    proto.ForgetAbort(plan="fg-abcdef"),
    proto.ForgetPreview(text="zebra"),
    proto.Forget(text="zebra", surface=Surface(via="bxctl")),
]


def test_request_examples_cover_every_request_kind() -> None:
    every_request = set().union(*(GOLDEN[name][3] for name in GOLDEN))
    assert {tag_of(type(message)) for message in REQUEST_EXAMPLES} == every_request


@pytest.mark.parametrize("socket", SOCKETS, ids=lambda socket: socket.name)
def test_a_socket_accepts_exactly_its_request_kinds(socket: Socket[Message]) -> None:
    accepted = {tag_of(type(m)) for m in REQUEST_EXAMPLES if socket.accepts(m)}
    assert accepted == GOLDEN[socket.name][3]
