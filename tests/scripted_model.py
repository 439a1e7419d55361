"""A scripted OpenAI-compatible chat completions server, over real HTTP on loopback.

Each request pops the next step of its script: an assistant text, tool calls, an
HTTP error, or raw bytes. It answers in the real wire format, streaming (SSE) when
the request asks for it, and records every request body so tests can compare them.

It is as strict as OpenAI's API: a request in which an assistant message's tool calls
are not followed at once by a `tool` message for each, or a `tool` message answers no
call, is refused with HTTP 400 and OpenAI's sentence. With `context` set it refuses a
request longer than that many tokens (counted as bytes / 4) as llama.cpp and vLLM do,
and reports its context where they do (`/props`, `/v1/models`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Step:
    """One scripted answer."""

    text: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments)
    reasoning: str | None = None
    status: int = 200
    raw: bytes | None = None  # sent as the body as it is (status still applies)
    raw_type: str = "application/json"  # the content-type sent with `raw`
    # Send `raw` cut at these offsets, a pause after each piece, so loopd reads them apart
    # (a CRLF split across two reads, as a slow server sends it).
    split_at: list[int] = field(default_factory=list)
    usage: int | None = None  # total_tokens to report; default: a count from the request
    cut: bool = False  # promise a longer body than is sent, then close (a reset mid-answer)
    delay_s: float = 0.0  # wait this long before answering (a slow server)
    # Stream each chunk's JSON over several `data:` lines, between comment lines, `id:`,
    # `event:` and `retry:` fields, extra blank lines and CRLF line ends: all valid SSE.
    multiline: bool = False


@dataclass
class ScriptedModel:
    """The server's state: the script still to play and the requests seen."""

    steps: list[Step] = field(default_factory=list)
    requests: list[bytes] = field(default_factory=list)
    url: str = ""
    strict: bool = True
    context: int | None = None
    report_context: str | None = None  # "llama.cpp" (/props) or "vllm" (/v1/models)
    refused: list[str] = field(default_factory=list)  # the 400 sentences it answered
    respond: Callable[[dict[str, Any]], Step] | None = None
    """When the script is played out: the step for a request (its parsed body)."""

    def request_json(self, i: int) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.requests[i])
        return parsed


def _completion(step: Step, body: bytes) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    if step.reasoning:
        message["reasoning_content"] = step.reasoning
    if step.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}_{name}",
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for i, (name, args) in enumerate(step.tool_calls)
        ]
    total = step.usage if step.usage is not None else len(body) // 4
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if step.tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": total - 10, "completion_tokens": 10, "total_tokens": total},
    }


def _chunks(step: Step, body: bytes) -> Iterator[dict[str, Any]]:
    if step.reasoning:
        yield {"choices": [{"index": 0, "delta": {"reasoning_content": step.reasoning}}]}
    if step.text:
        for i in range(0, len(step.text), 5):  # several deltas, as real servers send
            yield {"choices": [{"index": 0, "delta": {"content": step.text[i : i + 5]}}]}
    for i, (name, args) in enumerate(step.tool_calls):
        yield {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": f"call_{i}_{name}",
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    },
                }
            ]
        }
        half = len(args) // 2
        for part in (args[:half], args[half:]):
            yield {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": i, "function": {"arguments": part}}]},
                    }
                ]
            }
    total = step.usage if step.usage is not None else len(body) // 4
    yield {
        "choices": [],
        "usage": {"prompt_tokens": total - 10, "completion_tokens": 10, "total_tokens": total},
    }


def _events(step: Step, body: bytes) -> bytes:
    """The SSE body of a streamed answer, ending with `[DONE]`."""
    chunks = list(_chunks(step, body))
    if not step.multiline:
        return (
            b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
            + b"data: [DONE]\n\n"
        )
    out = [": keep-alive\n\n", "retry: 3000\n\n"]
    for n, chunk in enumerate(chunks):
        end = "\r\n" if n % 2 else "\n"
        lines = [": the next chunk", f"id: {n}", "event: completion.chunk"]
        parts = json.dumps(chunk, indent=2, ensure_ascii=False).split("\n")
        lines += [("data:" if i % 2 else "data: ") + part for i, part in enumerate(parts)]
        out.append(end.join(lines) + end + end + ("\n" if n % 3 == 0 else ""))
    out.append(": done\nevent: done\ndata: [DONE]\n\n")
    return "".join(out).encode()


def _refusal(model: ScriptedModel, body: bytes) -> str | None:
    """The 400 sentence a strict server answers this request with, or None."""
    if model.context is not None and len(body) // 4 > model.context:
        return (
            f"This model's maximum context length is {model.context} tokens. However, "
            f"your messages resulted in {len(body) // 4} tokens. Please reduce the length."
        )
    if not model.strict:
        return None
    messages = json.loads(body).get("messages", [])
    waiting: list[str] = []
    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in waiting:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            waiting.remove(message["tool_call_id"])
            continue
        if waiting:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(waiting)}"
            )
        if message.get("role") == "assistant":
            waiting = [call["id"] for call in message.get("tool_calls") or []]
    return None


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                entry: dict[str, Any] = {"id": "scripted"}
                if model.report_context == "vllm":
                    entry["max_model_len"] = model.context
                self._send(200, json.dumps({"object": "list", "data": [entry]}).encode())
            elif self.path == "/props" and model.report_context == "llama.cpp":
                props = {"default_generation_settings": {"n_ctx": model.context}}
                self._send(200, json.dumps(props).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path != "/v1/chat/completions":
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            model.requests.append(body)
            problem = _refusal(model, body)
            if problem is not None:
                model.refused.append(problem)
                error = {"error": {"message": problem, "type": "invalid_request_error"}}
                self._send(400, json.dumps(error).encode())
                return
            if model.steps:
                step = model.steps.pop(0)
            elif model.respond is not None:
                step = model.respond(json.loads(body))
            else:
                self._send(500, b'{"error": {"message": "the script has no more steps"}}')
                return
            if step.delay_s:
                time.sleep(step.delay_s)
            if step.raw is not None and step.split_at:
                self._send_pieces(step.status, step.raw, step.raw_type, step.split_at)
                return
            if step.raw is not None:
                self._send(step.status, step.raw, step.raw_type)
                return
            if step.status != 200:
                self._send(step.status, json.dumps({"error": {"message": step.text}}).encode())
                return
            if json.loads(body).get("stream"):
                data = _events(step, body)
                if step.cut:
                    self._send_cut(data, "text/event-stream")
                    return
                self._send(200, data, "text/event-stream")
            else:
                self._send(200, json.dumps(_completion(step, body)).encode())

        def _send_cut(self, data: bytes, ctype: str) -> None:
            self.send_response(200)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data) + 1000))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True

        def _send_pieces(self, status: int, data: bytes, ctype: str, cuts: list[int]) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.flush()
            for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
                self.wfile.write(data[start:end])
                self.wfile.flush()
                time.sleep(0.05)

        def _send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer (loopd killed, a turn cancelled) is normal here.
        if not isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            super().handle_error(request, client_address)


@contextmanager
def serve_scripted_model(*steps: Step) -> Iterator[ScriptedModel]:
    """Run the server on 127.0.0.1 in a thread for the duration of the block."""
    model = ScriptedModel(steps=list(steps))
    server = _Server(("127.0.0.1", 0), _handler(model))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield model
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
