"""Server-sent events, decoded from the bytes of a response as they arrive.

The part of the WHATWG event-stream format a chat completions stream uses: lines end
with CRLF, LF or CR (a CR at the end of one read and an LF at the start of the next are
one line end); a line starting with `:` is a comment; `field: value` loses one space
after the colon; `data` lines are joined with LF; a blank line dispatches the event,
if it had data. `event`, `id` and `retry` are read and ignored, and a last event without
its blank line is not dispatched (the stream was cut).

One field beyond the standard: llama.cpp's server (builds of 2025) reports a failure
after its 200 as `error: {json}` lines, not `data:`. The standard says to ignore an
unknown field, which would turn the server's reason into silence, so `error` lines are
kept and dispatched as an event of their own kind, before the data of the same event.

It works on whole network reads, not line by line through text iterators: a fast server
(or a burst after a pause) sends dozens of events in one read, and each layer per event
would cost more than the event's JSON.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Event", "EventDecoder"]


class Event(NamedTuple):
    """One dispatched event: its `data` lines joined, or its `error` lines (`error` true)."""

    data: bytes
    error: bool = False


_BOM = b"\xef\xbb\xbf"


class EventDecoder:
    """Turns the bytes of an event stream, read by read, into each event's data."""

    def __init__(self) -> None:
        self._partial = b""
        """The start of a line whose end has not arrived."""
        self._data: list[bytes] = []
        self._error: list[bytes] = []
        self._skip_lf = False
        """The last read ended with CR: an LF starting the next one ends no line."""
        self._started = False

    def feed(self, chunk: bytes) -> list[Event]:
        """Every event that `chunk` completes, in order."""
        if not chunk:
            return []
        if not self._started:
            if len(self._partial) + len(chunk) < len(_BOM) and _BOM.startswith(
                self._partial + chunk
            ):
                self._partial += chunk  # perhaps a BOM, cut by the read
                return []
            chunk, self._partial = self._partial + chunk, b""
            self._started = True
            chunk = chunk.removeprefix(_BOM)
        if self._skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._skip_lf = False
        if b"\r" in chunk:
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        events: list[Event] = []
        for line in lines:
            if not line:
                if self._error:
                    events.append(Event(b"\n".join(self._error), error=True))
                    self._error = []
                if self._data:
                    events.append(Event(b"\n".join(self._data)))
                    self._data = []
                continue
            if line.startswith(b":"):
                continue
            field, _, value = line.partition(b":")
            if field == b"data":
                self._data.append(value[1:] if value.startswith(b" ") else value)
            elif field == b"error":
                self._error.append(value[1:] if value.startswith(b" ") else value)
        return events
