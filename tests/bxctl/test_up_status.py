"""What `bxctl up` shows under its banner from a role's READY status (`_still_reading`)."""

from __future__ import annotations

from typing import Any

import proto
from bxctl._up import _Child, _still_reading


def child(status: str) -> _Child:
    process: Any = None  # not run: only its READY status is read
    return _Child(role="memoryd", process=process, notify=None, status=status)


def test_a_role_caught_up_shows_nothing() -> None:
    assert (
        _still_reading(child("serving /h (memory /h/memory); the recall index is caught up")) == ""
    )


def test_what_a_role_is_still_reading_is_shown_quoted() -> None:
    status = f"serving /h; {proto.STILL_READING}the index is being built \x1b[2J(about 40 s)"
    shown = _still_reading(child(status))
    assert shown.startswith("the index is being built ")
    assert "\x1b" not in shown, (
        "a role's status is outside text: no raw escape reaches the terminal"
    )
    assert shown.endswith("(about 40 s)")
