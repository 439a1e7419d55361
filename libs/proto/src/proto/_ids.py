"""Session ids: checked before they touch a path."""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

__all__ = [
    "SESSION_ID_PATTERN",
    "BadSessionId",
    "SessionId",
    "check_session_id",
    "is_session_id",
]

SESSION_ID_PATTERN = r"^[a-z]{2,8}-[a-z0-9]{8,64}$"
_SESSION_ID = re.compile(SESSION_ID_PATTERN)

# `\A…\Z`, not `^…$`: msgspec uses re.search, and `$` also matches before a final newline.
SessionId = Annotated[str, msgspec.Meta(pattern=r"\A[a-z]{2,8}-[a-z0-9]{8,64}\Z")]
"""A session id on the wire: `chat-…` for bxctl chat, `mm-…` for a Mattermost thread."""


class BadSessionId(ValueError):
    """A session id that does not match `SESSION_ID_PATTERN`."""

    code = "bad-session-id"


def is_session_id(value: str) -> bool:
    """Whether `value` is a valid session id."""
    # fullmatch, not match: `$` would accept a trailing newline.
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None


def check_session_id(value: str) -> str:
    """Return `value` if it is a valid session id, else raise `BadSessionId`."""
    if not is_session_id(value):
        raise BadSessionId(f"bad session id {value!r}: expected {SESSION_ID_PATTERN}")
    return value
