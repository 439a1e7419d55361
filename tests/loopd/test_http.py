"""loopd's lean HTTP/1.1 client for the model (issue 16): framing, reuse, and httpx for proxies.

The chunked decoder is property-tested against bodies cut anywhere by the reads; a small
server on a real socket answers with each framing real servers use, and closes a kept
connection behind the client's back; with a proxy in the environment loopd uses httpx.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_model import Step, serve_scripted_model

from loopd._config import ModelSection
from loopd._http import Broken, ChunkedDecoder, HttpClient
from loopd._model import ModelClient, ModelError, ModelReply

CAP_S = 20


@st.composite
def chunked(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A chunked body as servers write it, and the data it carries."""
    pieces = draw(st.lists(st.binary(min_size=1, max_size=40), max_size=8))
    out = b""
    for piece in pieces:
        size = f"{len(piece):x}"
        size = size.upper() if draw(st.booleans()) else size
        extension = b";name=value" if draw(st.booleans()) else b""
        out += size.encode() + extension + b"\r\n" + piece + b"\r\n"
    out += b"0\r\n"
    if draw(st.booleans()):
        out += b"trailer: yes\r\n"
    return out + b"\r\n", b"".join(pieces)


@settings(max_examples=300, deadline=None)
@given(body=chunked(), data=st.data())
def test_a_chunked_body_comes_out_whole_wherever_the_reads_cut_it(
    body: tuple[bytes, bytes], data: st.DataObject
) -> None:
    raw, expected = body
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=10)))
    decoder = ChunkedDecoder()
    got = b""
    for start, end in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        got += decoder.feed(raw[start:end])
    assert decoder.done
    assert got == expected
    assert decoder.rest == b""


@pytest.mark.parametrize(
    "raw", [b"zz\r\n", b"+5\r\nhello\r\n", b"0x5\r\nhello\r\n", b"3\r\nabcd\r\n", b"9" * 5000]
)
def test_bad_chunk_framing_is_refused(raw: bytes) -> None:
    with pytest.raises(Broken):
        ChunkedDecoder().feed(raw)


Answer = Callable[[int], bytes]
"""The bytes a test server sends for its n-th request (from 0)."""


async def serve(nursery: trio.Nursery, answer: Answer, *, close_after: bool = False) -> str:
    """A server on loopback answering each request with `answer(n)`; its address."""
    count = 0

    async def handle(stream: trio.SocketStream) -> None:
        nonlocal count
        buffer = b""
        async with stream:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some()
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                while len(buffer) < length:
                    buffer += await stream.receive_some()
                buffer = buffer[length:]
                n, count = count, count + 1
                await stream.send_all(answer(n))
                if close_after:
                    return  # a kept connection closed without saying so

    listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def events(*texts: str) -> bytes:
    chunks = [json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) for text in texts]
    stream = "data:\n\n"  # an event without data (a keep-alive some servers send)
    stream += "".join(f"data: {chunk}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in _split(stream.encode()))
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"
    )


def _split(data: bytes) -> list[bytes]:
    return [data[i : i + 7] for i in range(0, len(data), 7)]


async def ask(url: str, times: int = 1, **model: object) -> list[tuple[ModelReply, list[str]]]:
    client = ModelClient(ModelSection(**{"url": url, "stream": True, **model}))  # type: ignore[arg-type]
    out = []
    try:
        for _ in range(times):
            deltas: list[str] = []

            async def on_text(text: str, deltas: list[str] = deltas) -> None:
                deltas.append(text)

            reply = await client.complete([{"role": "user", "content": "hi"}], [], on_text)
            out.append((reply, deltas))
    finally:
        await client.aclose()
    return out


async def test_a_chunked_stream_is_read_and_its_connection_kept(nursery: trio.Nursery) -> None:
    with trio.fail_after(CAP_S):
        url = await serve(nursery, lambda n: events("Hello", ", owner", f" #{n}"))
        answers = await ask(url, times=3)
    assert [reply.content for reply, _ in answers] == [
        "Hello, owner #0",
        "Hello, owner #1",
        "Hello, owner #2",
    ]
    assert all("".join(deltas) == reply.content for reply, deltas in answers)


async def test_a_kept_connection_the_server_closed_is_tried_again(nursery: trio.Nursery) -> None:
    with trio.fail_after(CAP_S):
        url = await serve(nursery, lambda n: events(f"answer {n}"), close_after=True)
        answers = await ask(url, times=3)
    assert [reply.content for reply, _ in answers] == ["answer 0", "answer 1", "answer 2"]


async def test_a_body_ended_by_the_connection_is_read_to_its_end(nursery: trio.Nursery) -> None:
    body = b'{"choices": [{"message": {"content": "old server"}}]}'
    with trio.fail_after(CAP_S):
        url = await serve(
            nursery,
            lambda n: b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n" + body,
            close_after=True,
        )
        [(reply, deltas)] = await ask(url, stream=False)
    assert reply.content == "old server"
    assert deltas == ["old server"]


async def test_a_stream_cut_mid_chunk_is_a_broken_answer(nursery: trio.Nursery) -> None:
    with trio.fail_after(CAP_S):
        url = await serve(nursery, lambda n: events("cut")[:-20], close_after=True)
        with pytest.raises(ModelError, match="broke during its answer"):
            await ask(url)


async def test_a_server_that_is_not_http_is_a_broken_answer(nursery: trio.Nursery) -> None:
    with trio.fail_after(CAP_S):
        url = await serve(nursery, lambda n: b"SSH-2.0-OpenSSH\r\n\r\n", close_after=True)
        with pytest.raises(ModelError, match=r"not an HTTP/1\.1 status line"):
            await ask(url)


def test_only_http_and_https_addresses_are_taken() -> None:
    with pytest.raises(ValueError, match="not an http or https address"):
        HttpClient("ftp://example.org/v1", {}, timeout_s=1)


async def test_with_a_proxy_in_the_environment_httpx_carries_the_request(
    monkeypatch: pytest.MonkeyPatch, short_dir: Path
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # httpx's rule: reach the model directly
    with serve_scripted_model(Step(text="through httpx")) as model, trio.fail_after(CAP_S):
        client = ModelClient(ModelSection(url=model.url, stream=True))
        assert client._direct is None
        await client.aclose()
        [(reply, deltas)] = await ask(model.url)
    assert reply.content == "through httpx"
    assert "".join(deltas) == "through httpx"
