"""Approved calls as brokerd sends them to memoryd: the authority, with its token."""

from __future__ import annotations

import msgspec

import proto

KEY = bytes(range(32))
"""An approval key for tests that make their own EditApplier."""

HERE = proto.Surface(via="bxctl", uid=1000)
"""Where the owner of these tests decides."""


def signed(
    request: proto.ToolRequest,
    key: bytes = KEY,
    *,
    approval: str = "ap-abc234",
    decided: proto.Decided | None = None,
) -> proto.ToolRequest:
    """`request` with brokerd's authority: `approval`, its token under `key`, and `decided`.

    `decided` is the owner approving where `HERE` says unless given.
    """
    token = proto.approval_token(
        key,
        approval=approval,
        session=request.session,
        call=request.call.id,
        tool=request.call.name,
        arguments=request.call.arguments,
    )
    authority = proto.Authority(
        approval=approval, token=token, decided=decided or proto.OwnerApproved(surface=HERE)
    )
    return msgspec.structs.replace(request, authority=authority)
