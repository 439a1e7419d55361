"""Issue 12, item 2: no log line of a role can carry raw controls or forge another line.

Every role logs through `proto.setup_logging`, whose formatter renders each record's
message for the terminal on one line; a traceback keeps its lines, indented.
"""

from __future__ import annotations

import logging
import sys

from security.hostile import FORGED, HOSTILE, assert_inert

import proto

PREFIX = "brokerd: INFO brokerd.decide: "


def formatted(message: str, *args: object, exc: bool = False) -> str:
    exc_info = sys.exc_info() if exc else None
    record = logging.LogRecord("brokerd.decide", logging.INFO, __file__, 1, message, args, exc_info)
    return proto.LogFormatter("brokerd").format(record)


def test_a_quoted_value_stays_inside_its_line_and_is_shown_exactly() -> None:
    for call_id in ("call_1" + FORGED, HOSTILE):
        line = formatted("%s %s call %s in session %s: %s", "auto", "recall", call_id, "s", "ok")
        assert "\n" not in line
        assert_inert(line)
        assert line.startswith(PREFIX)
        assert (
            proto.from_terminal(line[len(PREFIX) :])
            == f"auto recall call {call_id} in session s: ok"
        )


def test_a_traceback_keeps_its_lines_indented_and_inert() -> None:
    """A newline in an exception's message starts a traceback line, never a record's."""
    try:
        raise ValueError("bad answer" + FORGED)
    except ValueError:
        text = formatted("call %r failed in its runtime", "c1", exc=True)
    first, *rest = text.split("\n")
    assert first == PREFIX + "call 'c1' failed in its runtime"
    assert rest[0] == "  Traceback (most recent call last):"
    assert all(line.startswith("  ") for line in rest)  # a record's line never does
    assert_inert(text)
    assert rest[-2:] == [
        "  ValueError: bad answer",
        "  " + proto.for_terminal(FORGED.lstrip("\n"), one_line=True),
    ]


def test_setup_logging_installs_it() -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        proto.setup_logging("brokerd")
        (handler,) = root.handlers
        assert isinstance(handler.formatter, proto.LogFormatter)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
