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


async def read_frame(
    stream: trio.abc.ReceiveStream, *, max_frame_bytes: int = MAX_FRAME
) -> Message:
    """Read one frame; the length is checked against the limit before the body is read."""
    header = await _receive_exactly(stream, HEADER_BYTES, at_boundary=True)
    size = int.from_bytes(header, "big")
    if size > max_frame_bytes:
        raise FrameTooLarge(size, max_frame_bytes)
    return decode_body(await _receive_exactly(stream, size))


async def write_frame(
    stream: trio.abc.SendStream, message: Message, *, max_frame_bytes: int = MAX_FRAME
) -> None:
    """Send one frame."""
    await stream.send_all(encode_frame(message, max_frame_bytes=max_frame_bytes))


async def _receive_exactly(
    stream: trio.abc.ReceiveStream, n: int, *, at_boundary: bool = False
) -> bytes:
    buffer = bytearray()
    while len(buffer) < n:
        chunk = await stream.receive_some(n - len(buffer))
        if not chunk:
            if at_boundary and not buffer:
                raise PeerClosed
            raise IncompleteFrame(f"peer closed after {len(buffer)} of {n} bytes")
        buffer += chunk
    return bytes(buffer)
