"""Frames: a 4-byte big-endian length, then that many bytes of msgspec JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ._messages import AllMessages, Message
from ._text import lower_first

if TYPE_CHECKING:
    import trio

__all__ = [
    "HEADER_BYTES",
    "MAX_FRAME",
    "FrameReader",
    "FrameTooLarge",
    "IncompleteFrame",
    "PeerClosed",
    "ProtocolError",
    "decode_body",
    "encode_frame",
    "read_frame",
    "write_frame",
]

HEADER_BYTES = 4
MAX_FRAME = 1 << 20
"""The largest frame body anyone sends or accepts: 1 MiB."""


class ProtocolError(Exception):
    """Bytes that are not a valid frame; `code` is what the `error` reply says."""

    code = "bad-frame"


class FrameTooLarge(ProtocolError):
    """A length prefix (or an encoded message) over the frame limit."""

    code = "frame-too-large"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size:,} bytes exceeds the limit of {limit:,}")
        self.size = size
        self.limit = limit


class IncompleteFrame(ProtocolError):
    """The peer closed in the middle of a frame."""


class PeerClosed(Exception):
    """EOF before the first byte of a frame: a probe, or a peer that is done. Not an error."""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AllMessages)


def encode_frame(message: Message, *, max_frame_bytes: int = MAX_FRAME) -> bytes:
    """Encode `message` as one frame, or raise `FrameTooLarge`."""
    buffer = bytearray(HEADER_BYTES)
    try:
        _encoder.encode_into(message, buffer, HEADER_BYTES)
    except UnicodeEncodeError as exc:
        raise ProtocolError(
            f"a {type(message).__name__} holds text that is not Unicode: {exc}"
        ) from None
    size = len(buffer) - HEADER_BYTES
    if size > max_frame_bytes:
        raise FrameTooLarge(size, max_frame_bytes)
    buffer[:HEADER_BYTES] = size.to_bytes(HEADER_BYTES, "big")
    return bytes(buffer)


def decode_body(body: bytes) -> Message:
    """Decode a frame's body into its message, or raise `ProtocolError` with msgspec's path."""
    try:
        message: Message = _decoder.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ProtocolError(lower_first(str(exc))) from exc
    except RecursionError:
        raise ProtocolError("the frame nests JSON too deeply") from None
    return message


class FrameReader:
    """Frames out of bytes as they arrive, without I/O: what every reader of frames uses.

    Give it what a read returned (`receive`; `b""` is the end of the stream) and ask for
    the next frame (`next_frame`) until one comes. `wanted` is how many bytes the frame
    under way still needs (its header, then its body), so a reader that asks for no more
    never reads past a frame, and the length is checked before its body is asked for.
    """

    def __init__(self, *, max_frame_bytes: int = MAX_FRAME) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._size: int | None = None
        """The body's length, once its header is in."""
        self._ended = False

    def wanted(self) -> int:
        """How many more bytes the frame under way needs (its header, then its body)."""
        if self._size is None:
            return HEADER_BYTES - len(self._buffer)
        return HEADER_BYTES + self._size - len(self._buffer)

    def receive(self, data: bytes | bytearray) -> None:
        """Bytes as a read returned them; `b""` says the peer closed."""
        if data:
            self._buffer += data
        else:
            self._ended = True

    def next_frame(self) -> Message | None:
        """The next whole frame, or `None` while it needs more bytes.

        Raises:
            FrameTooLarge: its header says more than `max_frame_bytes` (the body unread).
            ProtocolError: its body is not a message.
            PeerClosed: the stream ended before the frame's first byte.
            IncompleteFrame: the stream ended in the middle of the frame.
        """
        if self._size is None and len(self._buffer) >= HEADER_BYTES:
            size = int.from_bytes(self._buffer[:HEADER_BYTES], "big")
            if size > self._max_frame_bytes:
                raise FrameTooLarge(size, self._max_frame_bytes)
            self._size = size
        if self._size is not None and len(self._buffer) >= HEADER_BYTES + self._size:
            end = HEADER_BYTES + self._size
            body = bytes(self._buffer[HEADER_BYTES:end])
            del self._buffer[:end]
            self._size = None
            return decode_body(body)
        if not self._ended:
            return None
        if not self._buffer:
            raise PeerClosed
        if self._size is None:
            got, whole = len(self._buffer), HEADER_BYTES
        else:
            got, whole = len(self._buffer) - HEADER_BYTES, self._size
        raise IncompleteFrame(f"peer closed after {got} of {whole} bytes")


async def read_frame(
    stream: trio.abc.ReceiveStream, *, max_frame_bytes: int = MAX_FRAME
) -> Message:
    """Read one frame; the length is checked against the limit before the body is read."""
    reader = FrameReader(max_frame_bytes=max_frame_bytes)
    while (message := reader.next_frame()) is None:
        reader.receive(await stream.receive_some(reader.wanted()))
    return message


async def write_frame(
    stream: trio.abc.SendStream, message: Message, *, max_frame_bytes: int = MAX_FRAME
) -> None:
    """Send one frame."""
    await stream.send_all(encode_frame(message, max_frame_bytes=max_frame_bytes))
