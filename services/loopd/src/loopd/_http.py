"""HTTP/1.1 to the model server, lean enough for an answer that comes a token per chunk.

httpx spends tens of microseconds of Python on every chunk of a chunked response (h11's
reader and state machine, then a layer of async generators in httpcore and httpx each):
a server streams a token per chunk, and from a fast server a whole answer arrives in one
network read of dozens of chunks. This client reads a response in whole reads and takes
the chunked framing apart itself, one pass over each read's bytes.

It does what loopd's one request needs, and no more: a POST with a body of known length;
a response framed by Content-Length, chunked encoding or the end of the connection;
connections kept alive and reused one request at a time (a reused connection that turns
out closed before a byte of the answer came back is tried once more on a new one); TLS
with httpx's own context, so the certificates trusted are the same. No redirects, no
compression (none is asked for), no proxy: loopd leaves a server behind a proxy to httpx
(`proxied`).
"""

from __future__ import annotations

import re
import ssl
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

import httpx
import trio

__all__ = [
    "Broken",
    "ChunkedDecoder",
    "ConnectFailed",
    "HttpClient",
    "HttpError",
    "Response",
    "TimedOut",
    "proxied",
]

MAX_HEAD_BYTES = 64 << 10
"""The most a response's status line and headers may take."""
MAX_LINE_BYTES = 4096
"""The most a chunk's size line (or a trailer line) may take."""
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_READ = 1 << 16


class HttpError(Exception):
    """The request could not be made or its answer not read; the message says how."""


class ConnectFailed(HttpError):
    """No connection could be made."""


class TimedOut(HttpError):
    """Connecting, sending or waiting for the next bytes took longer than allowed."""


class Broken(HttpError):
    """The connection broke, or the server's bytes are not an HTTP/1.1 answer."""


def proxied(url: str) -> bool:
    """Whether the environment names a proxy for `url`'s scheme (httpx would use it)."""
    proxies = urllib.request.getproxies()
    return urlsplit(url).scheme in proxies or "all" in proxies


class ChunkedDecoder:
    """The data of a chunked body, from its bytes read by read."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._state: Literal["size", "data", "data end", "trailers"] = "size"
        self._left = 0
        """Bytes of the current chunk's data still to come."""
        self.done = False
        """The last chunk and its trailers have been read."""

    def feed(self, data: bytes) -> bytes:
        """The chunk data that `data` brings; raise `Broken` where the framing is wrong."""
        buffer = self._buffer
        buffer += data
        out: list[bytes] = []
        position = 0
        while not self.done:
            if self._state == "data":
                take = min(self._left, len(buffer) - position)
                if not take:
                    break
                out.append(bytes(buffer[position : position + take]))
                position += take
                self._left -= take
                if not self._left:
                    self._state = "data end"
            elif self._state == "data end":
                if len(buffer) - position < 2:
                    break
                if buffer[position : position + 2] != b"\r\n":
                    raise Broken("a chunk's data does not end where its size said")
                position += 2
                self._state = "size"
            else:
                end = buffer.find(b"\r\n", position)
                if end < 0:
                    if len(buffer) - position > MAX_LINE_BYTES:
                        raise Broken(f"a chunk line longer than {MAX_LINE_BYTES:,} bytes")
                    break
                line = bytes(buffer[position:end])
                position = end + 2
                if self._state == "trailers":
                    self.done = not line  # trailer lines, then a blank one
                    continue
                size = line.partition(b";")[0].strip()
                if not _HEX.fullmatch(size):
                    raise Broken(f"a chunk size that is not hexadecimal: {size[:20]!r}")
                self._left = int(size, 16)
                self._state = "data" if self._left else "trailers"
        del buffer[:position]
        return b"".join(out)

    @property
    def rest(self) -> bytes:
        """What came after the body (once `done`): none, from a server that waits its turn."""
        return bytes(self._buffer)


@dataclass
class _Connection:
    stream: trio.abc.Stream
    buffer: bytearray = field(default_factory=bytearray)
    reused: bool = False


@dataclass
class Response:
    """A response's status and headers; its body is read with `chunks` or `read`."""

    status: int
    headers: dict[str, str]
    """Names lower-case; a repeated header's values joined with `, `."""
    _client: HttpClient
    _connection: _Connection
    _framing: str  # "length", "chunked" or "close"
    _length: int = 0
    finished: bool = False
    """The whole body has been read."""

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, a piece per network read (none empty)."""
        connection = self._connection
        if self._framing == "length":
            left = self._length
            if connection.buffer:
                first = bytes(connection.buffer[:left])
                del connection.buffer[:left]
                left -= len(first)
                yield first
            while left:
                data = await self._client.receive(connection)
                if not data:
                    raise Broken("the server closed the connection before the body ended")
                piece = data[:left]
                left -= len(piece)
                yield piece
        elif self._framing == "chunked":
            decoder = ChunkedDecoder()
            data = bytes(connection.buffer)
            connection.buffer.clear()
            while True:
                piece = decoder.feed(data)
                if piece:
                    yield piece
                if decoder.done:
                    connection.buffer += decoder.rest
                    break
                data = await self._client.receive(connection)
                if not data:
                    raise Broken("the server closed the connection before the body ended")
        else:
            if connection.buffer:
                yield bytes(connection.buffer)
                connection.buffer.clear()
            while data := await self._client.receive(connection):
                yield data
        self.finished = True

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([piece async for piece in self.chunks()])


class HttpClient:
    """Requests to one server, on connections kept alive between them."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        *,
        timeout_s: float,
        connect_timeout_s: float = 10.0,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http or https address: {url!r}")
        self.host = parts.hostname
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        default = self.port == (443 if self.tls else 80)
        name = f"[{self.host}]" if ":" in self.host else self.host
        authority = name if default else f"{name}:{self.port}"
        self._headers = "".join(
            f"{key}: {value}\r\n"
            for key, value in {
                "host": authority,
                "user-agent": "boxmaker-loopd",
                "accept": "*/*",
                **headers,
            }.items()
        )
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._ssl: ssl.SSLContext | None = httpx.create_ssl_context() if self.tls else None
        self._idle: list[_Connection] = []

    async def aclose(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for connection in idle:
            await trio.aclose_forcefully(connection.stream)

    @asynccontextmanager
    async def post(self, path: str, body: bytes) -> AsyncIterator[Response]:
        """Send `body` to `path`; yield the response once its head has come.

        The connection is kept for the next request if the body was read to its end.
        """
        head = (
            f"POST {path} HTTP/1.1\r\n{self._headers}content-length: {len(body)}\r\n\r\n"
        ).encode()
        connection = self._idle.pop() if self._idle else await self._connect()
        try:
            try:
                response = await self._exchange(connection, head, body)
            except Broken:
                if not connection.reused:
                    raise
                # A kept connection the server had closed meanwhile: once more, anew.
                await trio.aclose_forcefully(connection.stream)
                connection = await self._connect()
                response = await self._exchange(connection, head, body)
            yield response
        except BaseException:
            await trio.aclose_forcefully(connection.stream)
            raise
        if response.finished and response._framing != "close" and _keep_alive(response):
            connection.reused = True
            self._idle.append(connection)
        else:
            await trio.aclose_forcefully(connection.stream)

    async def receive(self, connection: _Connection) -> bytes:
        """The next bytes from the server (b"" at its end)."""
        try:
            with trio.fail_after(self.timeout_s):
                return bytes(await connection.stream.receive_some(_READ))
        except trio.TooSlowError:
            raise TimedOut(f"no answer within {self.timeout_s:g} s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise Broken(str(exc) or type(exc).__name__) from None

    async def _connect(self) -> _Connection:
        try:
            with trio.fail_after(self.connect_timeout_s):
                stream: trio.abc.Stream = await trio.open_tcp_stream(self.host, self.port)
                if self._ssl is not None:
                    tls = trio.SSLStream(
                        stream, self._ssl, server_hostname=self.host, https_compatible=True
                    )
                    await tls.do_handshake()
                    stream = tls
        except trio.TooSlowError:
            raise TimedOut(f"no connection within {self.connect_timeout_s:g} s") from None
        except (OSError, trio.BrokenResourceError) as exc:
            raise ConnectFailed(str(exc) or type(exc).__name__) from None
        return _Connection(stream)

    async def _exchange(self, connection: _Connection, head: bytes, body: bytes) -> Response:
        try:
            with trio.fail_after(self.timeout_s):
                await connection.stream.send_all(head + body if len(body) < _READ else head)
                if len(body) >= _READ:
                    await connection.stream.send_all(body)
        except trio.TooSlowError:
            raise TimedOut(f"the request was not sent within {self.timeout_s:g} s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise Broken(str(exc) or type(exc).__name__) from None
        buffer = connection.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise Broken(f"a response head longer than {MAX_HEAD_BYTES:,} bytes")
            data = await self.receive(connection)
            if not data:
                raise Broken("the server closed the connection without an answer")
            buffer += data
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        del buffer[: end + 4]
        version, _, rest = lines[0].partition(" ")
        code = rest.partition(" ")[0]
        if not version.startswith("HTTP/1.") or not (code.isdigit() and len(code) == 3):
            raise Broken(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise Broken(f"not a header line: {line[:80]!r}")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        status = int(code)
        if version == "HTTP/1.0":
            headers.setdefault("connection", "close")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            framing, length = "chunked", 0
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"].split(",")[0])
            except ValueError:
                raise Broken(f"a bad content-length: {headers['content-length']!r}") from None
            framing = "length"
        else:
            framing, length = "close", 0
        return Response(status, headers, self, connection, framing, length)


def _keep_alive(response: Response) -> bool:
    return "close" not in response.headers.get("connection", "").lower()
