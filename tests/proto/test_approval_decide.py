"""`approval_decide` (issue 30): the frame `{id, approve, reason?}` as it was,
a verdict code matches on, and a denial with arguments that is not a frame at all; and
loopd's `tool_request` as documented, which carries no authority."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import proto
from proto import ApprovalDecide, Approve, Deny, Surface

TEXTS = st.none() | st.text(max_size=20)
VERDICTS = st.builds(Approve, version=TEXTS, note=TEXTS) | st.builds(Deny, reason=TEXTS)
SURFACES = st.none() | st.builds(
    Surface, via=st.sampled_from(["bxctl", "mattermost"]), user=TEXTS, post=TEXTS
)


def decoded(fields: dict[str, Any]) -> proto.Message:
    body = json.dumps({"kind": "approval_decide", **fields}).encode()
    return proto.decode_body(body)


@pytest.mark.parametrize(
    ("fields", "verdict"),
    [
        ({"id": "ap-abc234", "approve": True}, Approve()),
        ({"id": "ap-abc234", "approve": False}, Deny()),
        ({"id": "ap-abc234", "approve": False, "reason": "not now"}, Deny(reason="not now")),
        ({"id": "ap-abc234", "approve": True, "reason": "fine"}, Approve(note="fine")),
        ({"id": "ap-abc234", "approve": False, "reason": None}, Deny()),
        ({"id": "ap-abc234", "approve": True, "arguments": "{}"}, Approve(version="{}")),
    ],
)
def test_the_documented_frame_decodes_to_its_verdict(
    fields: dict[str, Any], verdict: Approve | Deny
) -> None:
    message = decoded(fields)
    assert isinstance(message, ApprovalDecide)
    assert message.verdict == verdict
    assert message.surface is None  # brokerd makes it bxctl and the peer's uid


def test_what_bxctl_sends_is_the_documented_frame() -> None:
    frame = ApprovalDecide.deciding("ap-abc234", Deny(reason="not now"))
    assert msgspec.json.decode(msgspec.json.encode(frame)) == {
        "kind": "approval_decide",
        "id": "ap-abc234",
        "approve": False,
        "reason": "not now",
    }
    assert msgspec.json.decode(msgspec.json.encode(ApprovalDecide.deciding("x", Approve()))) == {
        "kind": "approval_decide",
        "id": "x",
        "approve": True,
    }


def test_a_denial_with_arguments_is_not_a_frame() -> None:
    with pytest.raises(proto.ProtocolError, match="arguments go with an approval only"):
        decoded({"id": "ap-abc234", "approve": False, "arguments": "{}"})
    with pytest.raises(ValueError, match="arguments go with an approval only"):
        ApprovalDecide(id="ap-abc234", approve=False, arguments="{}")


@given(approval=st.text(max_size=10), verdict=VERDICTS, surface=SURFACES)
def test_a_verdict_survives_the_wire(
    approval: str, verdict: Approve | Deny, surface: Surface | None
) -> None:
    frame = ApprovalDecide.deciding(approval, verdict, surface=surface)
    again = proto.decode_body(msgspec.json.encode(frame))
    assert again == frame
    assert isinstance(again, ApprovalDecide)
    assert (again.id, again.verdict, again.surface) == (approval, verdict, surface)


@given(
    approve=st.booleans(),
    reason=TEXTS,
    arguments=TEXTS,
)
def test_any_combination_is_a_verdict_or_refused(
    approve: bool, reason: str | None, arguments: str | None
) -> None:
    fields = {"id": "a", "approve": approve, "reason": reason, "arguments": arguments}
    try:
        message = decoded(fields)
    except proto.ProtocolError:
        assert not approve
        assert arguments is not None
        return
    assert isinstance(message, ApprovalDecide)
    match message.verdict:
        case Approve(version=version, note=note):
            assert approve
            assert (version, note) == (arguments, reason)
        case Deny(reason=said):
            assert not approve
            assert arguments is None
            assert said == reason


def test_loopds_documented_tool_request_decodes_with_no_authority() -> None:
    # loopd sends `approval: null`; it says nothing of authority.
    body = json.dumps(
        {
            "kind": "tool_request",
            "session": "chat-abcdefgh",
            "call": {"id": "c1", "name": "recall", "arguments": "{}"},
            "taint": {"class": "private", "untrusted": False},
            "approval": None,
        }
    ).encode()
    message = proto.decode_body(body)
    assert isinstance(message, proto.ToolRequest)
    assert message.authority is None
    assert b"authority" not in msgspec.json.encode(message)  # absent when there is none
