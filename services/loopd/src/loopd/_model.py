"""The model: any OpenAI-compatible chat completions server, streaming or not.

Each request's body puts `messages` last, so consecutive requests of a session are
byte-wise extensions of each other up to the closing `]}`: the server's prefix cache
holds, and a test can check it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import msgspec
import trio

from proto import ToolCall

from ._config import ModelSection
from ._sse import EventDecoder

__all__ = ["ModelClient", "ModelError", "ModelReply", "OnText"]

OnText = Callable[[str], Awaitable[None]]

log = logging.getLogger("loopd.model")

CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A tool-call id loopd passes on as the model made it; any other is replaced."""


class ModelError(Exception):
    """The model server could not be reached or gave no usable answer; says which."""


class ContextExceeded(ModelError):
    """The server refused the request as longer than its context: the session is full."""


_CONTEXT_REFUSAL = re.compile(
    r"context (length|window|size)|maximum context|n_ctx|context_length_exceeded"
    r"|too many tokens|exceeds the (available )?context",
    re.IGNORECASE,
)

CONTEXT_PROBE_EVERY_S = 60.0
PROBE_DEADLINE_S = 3.0
"""How often loopd asks the server again for its context size."""


@dataclass(frozen=True)
class ModelReply:
    """One assistant message."""

    content: str | None
    reasoning: str | None
    tool_calls: list[ToolCall]
    total_tokens: int | None


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class _ToolCall(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Message(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    message: _Message | None = None
    delta: _Message | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


class _Completion(msgspec.Struct):
    choices: list[_Choice] = msgspec.field(default_factory=list)
    usage: _Usage | None = None
    # A server that fails after its 200 says so in a chunk: `{"error": {"message": …}}`
    # (llama.cpp, OpenAI, newer vLLM) or `{"object": "error", "message": …}` (older vLLM).
    error: Any = None
    object: str | None = None
    message: Any = None

    def failure(self) -> str | None:
        """The server's own words when this chunk reports an error, else None."""
        if self.error is not None:
            if isinstance(self.error, dict):
                return str(self.error.get("message", self.error))
            return str(self.error)
        if self.object == "error":
            return str(self.message)
        return None


_completion = msgspec.json.Decoder(_Completion)
_EMPTY_STREAM = (
    "the model server sent an empty stream; if it cannot stream with tools, "
    "set [model] stream = false in loopd.toml"
)
_encoder = msgspec.json.Encoder()


def _total(usage: _Usage | None) -> int | None:
    if usage is None:
        return None
    if usage.total_tokens is not None:
        return usage.total_tokens
    if usage.prompt_tokens is not None:
        return usage.prompt_tokens + (usage.completion_tokens or 0)
    return None


def _call_ids(made: list[str | None]) -> list[str]:
    """The model's call ids where they are plain and unique in the message, else loopd's own.

    A call id reaches brokerd's log, the audit log and the owner's screen, so one with a
    newline or an escape sequence is not passed on. The replacement is what the session
    log records, and so what the model is sent back with the call's result.
    """
    ids: list[str] = []
    for raw in made:
        if raw and CALL_ID.fullmatch(raw) and raw not in ids:
            ids.append(raw)
            continue
        own = f"call-{secrets.token_hex(8)}"
        if raw:
            log.warning("the model's call id %r is not usable; it is %s in this session", raw, own)
        ids.append(own)
    return ids


def _arguments(value: str | dict[str, Any] | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return _encoder.encode(value).decode()


class ModelClient:
    """Calls the configured server; one client (and connection pool) per loopd."""

    def __init__(self, settings: ModelSection) -> None:
        self.settings = settings
        headers = {"content-type": "application/json"}
        if settings.api_key_env:
            key = os.environ.get(settings.api_key_env)
            if key:
                headers["authorization"] = f"Bearer {key}"
        self._http = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(settings.timeout_s, connect=10.0)
        )
        self.url = settings.url.rstrip("/") + "/chat/completions"
        self.context_tokens = settings.context_tokens
        """The smaller of `[model] context_tokens` and what the server says it holds."""
        self._probed_at: float | None = None

    async def probe_context(self) -> int:
        """The context size in force: the smaller of the config's and the server's own.

        Asked where a server tells it: llama.cpp's `/props` (`n_ctx`), vLLM's and others'
        `/v1/models` (`max_model_len`, `context_length`). At most once a minute; a server
        that tells nothing (or does not answer) leaves the config's value.
        """
        now = trio.current_time()
        if self._probed_at is not None and now - self._probed_at < CONTEXT_PROBE_EVERY_S:
            return self.context_tokens
        self._probed_at = now
        found = await self._server_context()
        configured = self.settings.context_tokens
        self.context_tokens = min(configured, found) if found else configured
        if found and found < configured:
            log.info(
                "the model server holds %d tokens of context, fewer than [model] "
                "context_tokens (%d); using %d",
                found,
                configured,
                found,
            )
        return self.context_tokens

    async def _server_context(self) -> int | None:
        url = self.settings.url.rstrip("/")
        root = url[: -len("/v1")] if url.endswith("/v1") else url
        for endpoint, paths in (
            (f"{root}/props", (("default_generation_settings", "n_ctx"), ("n_ctx",))),
            (f"{url}/models", (("data", 0, "max_model_len"), ("data", 0, "context_length"))),
        ):
            try:
                with trio.move_on_after(PROBE_DEADLINE_S):
                    response = await self._http.get(endpoint)
                    if response.status_code != 200:
                        continue
                    value: Any = msgspec.json.decode(response.content)
                    for path in paths:
                        found = _dig(value, path)
                        if isinstance(found, int) and not isinstance(found, bool) and found > 0:
                            return found
            except (httpx.HTTPError, msgspec.DecodeError):
                continue
        return None

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    def head(self, tools: list[dict[str, Any]]) -> bytes:
        """The request body up to its messages: every option, then `"messages":`."""
        s = self.settings
        head: dict[str, Any] = {
            "model": s.model,
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "stream": s.stream,
        }
        if s.stream:
            head["stream_options"] = {"include_usage": True}
        if tools and s.tool_choice != "none":
            # With "none" the model may not call them: they are not sent, so a server that
            # cannot stream while tools are offered (llama-cpp-python) streams.
            head["tools"] = tools
            head["tool_choice"] = s.tool_choice or "auto"
        return _encoder.encode(head)[:-1] + b',"messages":'

    def body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> bytes:
        """The request body: every option first, `messages` last."""
        return self.head(tools) + _encoder.encode(messages) + b"}"

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_text: OnText
    ) -> ModelReply:
        """Ask for the next assistant message; text deltas go to `on_text` as they arrive."""
        return await self.send(self.body(messages, tools), on_text)

    async def send(self, body: bytes, on_text: OnText) -> ModelReply:
        """Send a request body made by `body` (or `head` and the messages); as `complete`."""
        try:
            if self.settings.stream:
                return await self._stream(body, on_text)
            response = await self._http.post(self.url, content=body)
            _check_status(response)
            reply = _parse(response.content)
            if reply.content:
                await on_text(reply.content)
            return reply
        except httpx.TimeoutException:
            raise ModelError(
                f"the model server at {self.settings.url} did not answer within "
                f"{self.settings.timeout_s:g} s"
            ) from None
        except httpx.ConnectError as exc:
            raise ModelError(
                f"cannot reach the model server at {self.settings.url}: {exc or type(exc).__name__}"
            ) from None
        except httpx.TransportError as exc:
            raise ModelError(
                f"the connection to the model server at {self.settings.url} broke during its "
                f"answer: {exc or type(exc).__name__}"
            ) from None

    async def _stream(self, body: bytes, on_text: OnText) -> ModelReply:
        partial = _Partial()
        async with self._http.stream("POST", self.url, content=body) as response:
            if response.status_code >= 400:
                await response.aread()
                _check_status(response)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                # A server that ignores "stream": true answers with something else.
                await response.aread()
                raise ModelError(_EMPTY_STREAM)
            # Read to the end of the body even after [DONE] or a malformed chunk: breaking
            # out of httpx's nested stream generators leaves them unfinished. The text of
            # every event of one read goes on as one piece.
            decoder = EventDecoder()
            chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    texts: list[str] = []
                    for data in decoder.feed(chunk):
                        # An event's type and id are not used; one without data carries nothing.
                        if data and data.strip() != b"[DONE]":
                            texts += partial.add(data)
                    if texts:
                        await on_text("".join(texts))
        if partial.failed is not None:
            if _CONTEXT_REFUSAL.search(partial.failed):
                raise ContextExceeded(f"the model server's context is full: {partial.failed}")
            raise ModelError(
                f"the model server failed during its answer: {partial.failed}"
                + (" (the text shown so far is not kept)" if partial.content else "")
            )
        if partial.malformed is not None:
            raise ModelError(f"the model server sent a malformed stream chunk: {partial.malformed}")
        if partial.chunks == 0:
            raise ModelError(_EMPTY_STREAM)
        return partial.reply()


@dataclass
class _Partial:
    """A streamed answer so far: the deltas of every chunk, joined."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    total: int | None = None
    chunks: int = 0
    malformed: str | None = None
    """Why the first chunk that did not decode failed; every later chunk is ignored."""
    failed: str | None = None
    """The server's words in the first chunk that reported an error; later ones ignored."""

    def add(self, data: bytes) -> list[str]:
        """Take one chunk's JSON; return its text deltas, to pass on as they arrive."""
        if self.malformed is not None or self.failed is not None:
            return []
        try:
            chunk = _completion.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.malformed = str(exc)
            return []
        if (failure := chunk.failure()) is not None:
            self.failed = failure[:300]
            return []
        self.chunks += 1
        self.total = _total(chunk.usage) or self.total
        texts: list[str] = []
        for choice in chunk.choices:
            delta = choice.delta or choice.message
            if delta is None:
                continue
            if delta.content:
                self.content.append(delta.content)
                texts.append(delta.content)
            if delta.reasoning_content:
                self.reasoning.append(delta.reasoning_content)
            for i, call in enumerate(delta.tool_calls or ()):
                slot = self.calls.setdefault(
                    call.index if call.index is not None else i,
                    {"id": "", "name": "", "arguments": ""},
                )
                slot["id"] = call.id or slot["id"]
                if call.function is not None:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += _arguments(call.function.arguments)
        return texts

    def reply(self) -> ModelReply:
        """The assistant message the chunks made."""
        slots = [slot for _, slot in sorted(self.calls.items())]
        ids = _call_ids([slot["id"] for slot in slots])
        tool_calls = [
            ToolCall(id=call_id, name=slot["name"], arguments=slot["arguments"])
            for call_id, slot in zip(ids, slots, strict=True)
        ]
        return ModelReply(
            content="".join(self.content) or None,
            reasoning="".join(self.reasoning) or None,
            tool_calls=tool_calls,
            total_tokens=self.total,
        )


def _check_status(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    detail = response.text[:300]
    try:
        parsed = msgspec.json.decode(response.content)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            detail = str(parsed["error"].get("message", detail))
        elif isinstance(parsed, dict) and "error" in parsed:
            detail = str(parsed["error"])
    except msgspec.DecodeError:
        pass
    if response.status_code in (400, 413) and _CONTEXT_REFUSAL.search(detail):
        raise ContextExceeded(f"the model server's context is full: {detail}")
    raise ModelError(f"the model server answered HTTP {response.status_code}: {detail}")


def _dig(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and len(value) > step else None
        else:
            value = value.get(step) if isinstance(value, dict) else None
    return value


def _parse(raw: bytes) -> ModelReply:
    try:
        completion = _completion.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ModelError(f"the model server's reply is not a chat completion: {exc}") from None
    if (failure := completion.failure()) is not None:
        raise ModelError(f"the model server failed during its answer: {failure[:300]}")
    if not completion.choices or completion.choices[0].message is None:
        raise ModelError("the model server returned no choices")
    message = completion.choices[0].message
    calls = message.tool_calls or []
    tool_calls = [
        ToolCall(
            id=call_id,
            name=(call.function.name if call.function else None) or "",
            arguments=_arguments(call.function.arguments if call.function else None),
        )
        for call_id, call in zip(_call_ids([call.id for call in calls]), calls, strict=True)
    ]
    return ModelReply(
        content=message.content or None,
        reasoning=message.reasoning_content or None,
        tool_calls=tool_calls,
        total_tokens=_total(completion.usage),
    )
