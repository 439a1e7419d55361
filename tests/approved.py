"""Approved calls as brokerd sends them to memoryd: the approval id and its token."""

from __future__ import annotations

import msgspec

import proto

KEY = bytes(range(32))
"""An approval key for tests that make their own EditApplier."""


def signed(request: proto.ToolRequest, key: bytes = KEY) -> proto.ToolRequest:
    """`request` with brokerd's token for its approval (which it must carry)."""
    assert request.approval is not None
    token = proto.approval_token(
        key,
        approval=request.approval,
        session=request.session,
        call=request.call.id,
        tool=request.call.name,
        arguments=request.call.arguments,
    )
    return msgspec.structs.replace(request, token=token)
