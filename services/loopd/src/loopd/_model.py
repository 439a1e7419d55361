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
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, assert_never, cast

import httpx
import msgspec
import trio

from proto import ToolCall

from ._config import ModelSection
from ._sse import EventDecoder

__all__ = [
    "ContextExceeded",
    "ModelClient",
    "ModelError",
    "ModelReply",
    "ModelTimeout",
    "ModelUnreachable",
    "OnText",
]

OnText = Callable[[str], Awaitable[None]]

log = logging.getLogger("loopd.model")

CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A tool-call id loopd passes on as the model made it; any other is replaced."""


class ModelError(Exception):
    """The model server gave no usable answer; says which.

    `code` is the stable code the chat client gets: `model-error` for an HTTP error
    status, a broken, cut-off or malformed stream, or the server's own error words.
    """

    code: ClassVar[str] = "model-error"


class ModelTimeout(ModelError):
    """The server did not answer within `[model] timeout_s`."""

    code = "model-timeout"


class ModelUnreachable(ModelError):
    """Nothing answers at `[model] url` (the connection cannot be made)."""

    code = "model-unreachable"


class ContextExceeded(ModelError):
    """The server refused the request as longer than its context; `words` are its own."""

    def __init__(self, words: str) -> None:
        super().__init__(f"the model server's context is full: {words}")
        self.words = words


_CONTEXT_REFUSAL = re.compile(
    r"context (length|window|size)|maximum context|n_ctx|context_length_exceeded"
    r"|exceed_context_size|too many tokens|exceeds the (available )?context",
    re.IGNORECASE,
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
WORDS_CHARS = 300
"""How much of a server's own words an error sentence shows."""


def _words(text: str) -> str:
    r"""A server's words for a sentence: clipped, on one line, no control characters.

    They reach a terminal, a log line and Mattermost; an escape sequence in them is shown
    as its code (`\x1b`), never sent.
    """
    clipped = text[:WORDS_CHARS]
    return _CONTROL.sub(
        lambda m: " " if m.group() in "\t\n\r" else f"\\x{ord(m.group()):02x}", clipped
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
    # Ollama's name for the same (and newer vLLM's); one of the two per message.
    reasoning: str | None = None
    tool_calls: list[_ToolCall] | None = None

    def thinking(self) -> str | None:
        """The reasoning text, in whichever field the server uses."""
        return self.reasoning_content or self.reasoning


class _Choice(msgspec.Struct):
    message: _Message | None = None
    delta: _Message | None = None
    finish_reason: str | None = None


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


def _error_field(data: bytes) -> str:
    """The server's words in an SSE `error:` field (llama.cpp): its JSON, or the text.

    llama.cpp writes the error object itself (`{"code": 400, "message": …}`); one wrapped
    as `{"error": …}` is read as a `data:` error chunk is.
    """
    try:
        value: Any = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return data.decode(errors="replace")
    if isinstance(value, dict):
        if "error" in value:
            inner = value["error"]
            return str(inner.get("message", inner) if isinstance(inner, dict) else inner)
        if "message" in value:
            return str(value["message"])
    return str(value)


_completion = msgspec.json.Decoder(_Completion)
_EMPTY_STREAM = (
    "the model server sent an empty stream; if it cannot stream with tools, "
    "set [model] stream = false in loopd.toml"
)
_CUT_OFF = (
    "the model server's stream ended before its answer did (no finish_reason and no "
    "[DONE]: the server or its model runner stopped mid-answer){kept}; its log says why; "
    "send the message again once it runs"
)
_NOT_KEPT = "; the text shown so far is not kept"
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
        self._url = httpx.URL(self.url)
        """Parsed once: httpx parses a URL given as text on every request."""
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
            response = await self._http.post(self._url, content=body)
            _check_status(response)
            reply = _parse(response.content)
            if reply.content:
                await on_text(reply.content)
            return reply
        except httpx.TimeoutException:
            raise ModelTimeout(
                f"the model server at {self.settings.url} did not answer within "
                f"{self.settings.timeout_s:g} s"
            ) from None
        except httpx.ConnectError as exc:
            raise ModelUnreachable(
                f"cannot reach the model server at {self.settings.url}: {exc or type(exc).__name__}"
            ) from None
        except httpx.TransportError as exc:
            raise ModelError(
                f"the connection to the model server at {self.settings.url} broke during its "
                f"answer: {exc or type(exc).__name__}"
            ) from None

    async def _stream(self, body: bytes, on_text: OnText) -> ModelReply:
        partial = _Partial()
        async with self._http.stream("POST", self._url, content=body) as response:
            if response.status_code >= 400:
                await response.aread()
                _check_status(response)
            content_type = response.headers.get("content-type", "")
            if "text/event-stream" not in content_type:
                # A server that ignores "stream": true answers with one whole completion.
                await response.aread()
                return await _whole_answer(response.content, content_type, on_text)
            # Read to the end of the body even after [DONE] or a malformed chunk: breaking
            # out of httpx's nested stream generators leaves them unfinished. The text of
            # every event of one read goes on as one piece.
            decoder = EventDecoder()
            chunks, closing = _body(response)
            async with contextlib.aclosing(closing):
                async for chunk in chunks:
                    texts: list[str] = []
                    for data, error in decoder.feed(chunk):
                        # An event's type and id are not used; one without data carries nothing.
                        if error:
                            partial.fail(_error_field(data))
                        elif data.strip() == b"[DONE]":
                            partial.ended = True
                        elif data:
                            texts += partial.add(data)
                    if texts:
                        await on_text("".join(texts))
        match partial.state:
            case _Failed(words=words):
                if _CONTEXT_REFUSAL.search(words):
                    raise ContextExceeded(words)
                raise ModelError(
                    f"the model server failed during its answer: {words}"
                    + (" (the text shown so far is not kept)" if partial.content else "")
                )
            case _Malformed(why=why):
                raise ModelError(f"the model server sent a malformed stream chunk: {_words(why)}")
            case _Streaming():
                if partial.chunks == 0:
                    raise ModelError(_EMPTY_STREAM)
                if not partial.ended:
                    # Ollama's runner dying mid-answer: one empty chunk, then the stream closes.
                    raise ModelError(_CUT_OFF.format(kept=_NOT_KEPT if partial.content else ""))
                return partial.reply()
            case unexpected:
                assert_never(unexpected)


def _body(
    response: httpx.Response,
) -> tuple[AsyncIterable[bytes], httpx.Response | AsyncGenerator[bytes, None]]:
    """The bytes of a streamed response's body as they arrive, and what to close after.

    A server sends each event in a chunk of its own, and every layer of async generators
    between h11 and loopd costs several µs per chunk: unless the body is content-encoded
    (then httpx decodes it), it is read from the response's stream itself, without
    `aiter_bytes` and `aiter_raw` over it (which only decode, rechunk and count).
    """
    stream = response.stream
    if response.headers.get("content-encoding", "identity") == "identity" and isinstance(
        stream, httpx.AsyncByteStream
    ):
        return stream, response  # closing the response gives its connection back
    chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    return chunks, chunks


async def _whole_answer(body: bytes, content_type: str, on_text: OnText) -> ModelReply:
    """A streamed request answered with one whole chat completion: used as it is.

    The answer is complete (it is what `stream = false` gets), and an error in it is the
    server's own; anything else is reported with what was received.
    """
    try:
        completion = _completion.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        completion = None
    if completion is None or (completion.failure() is None and not completion.choices):
        if not body.strip():
            raise ModelError(_EMPTY_STREAM)
        raise ModelError(
            f"the model server answered a streamed request with "
            f"{content_type or 'no content type'}, neither an event stream nor a chat "
            f"completion: {_words(body.decode(errors='replace'))}; if it cannot stream, set "
            "[model] stream = false in loopd.toml"
        )
    reply = _parse(body)
    if reply.content:
        await on_text(reply.content)
    return reply


@dataclass
class _MadeCall:
    """A tool call as the model made it: its id (if it gave one), name and arguments."""

    id: str | None
    name: str
    arguments: str


def _tool_calls(made: list[_MadeCall]) -> list[ToolCall]:
    """The calls as loopd passes them on: each with an id it can use (`_call_ids`)."""
    ids = _call_ids([call.id for call in made])
    return [
        ToolCall(id=call_id, name=call.name, arguments=call.arguments)
        for call_id, call in zip(ids, made, strict=True)
    ]


@dataclass(frozen=True)
class _Streaming:
    """Every chunk so far decoded, and none reported an error."""


@dataclass(frozen=True)
class _Failed:
    """A chunk reported an error: the server's words, clipped. Later chunks are ignored."""

    words: str


@dataclass(frozen=True)
class _Malformed:
    """A chunk did not decode: why. Later chunks are ignored."""

    why: str


_StreamState = _Streaming | _Failed | _Malformed
"""How a stream is going: the first failure or malformed chunk is the last state."""


@dataclass
class _Partial:
    """A streamed answer so far: the deltas of every chunk, joined."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[_MadeCall] = field(default_factory=list)
    """Each call so far, in the order they started."""
    by_index: dict[int, int] = field(default_factory=dict)
    """Where in `calls` the call a delta's index (or its position) continues is."""
    total: int | None = None
    chunks: int = 0
    state: _StreamState = _Streaming()
    ended: bool = False
    """The answer is whole: a choice said why it ended (`finish_reason`), or `[DONE]` came."""

    def fail(self, words: str) -> None:
        """The server reported an error (the first one counts)."""
        if isinstance(self.state, _Streaming):
            self.state = _Failed(_words(words))

    def add(self, data: bytes) -> list[str]:
        """Take one chunk's JSON; return its text deltas, to pass on as they arrive."""
        if not isinstance(self.state, _Streaming):
            return []
        try:
            chunk = _completion.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.state = _Malformed(str(exc))
            return []
        if (failure := chunk.failure()) is not None:
            self.fail(failure)
            return []
        self.chunks += 1
        self.total = _total(chunk.usage) or self.total
        texts: list[str] = []
        for choice in chunk.choices:
            self.ended = self.ended or bool(choice.finish_reason)
            delta = choice.delta or choice.message
            if delta is None:
                continue
            if delta.content:
                self.content.append(delta.content)
                texts.append(delta.content)
            if thinking := delta.thinking():
                self.reasoning.append(thinking)
            for position, call in enumerate(delta.tool_calls or ()):
                slot = self._slot(call, position)
                slot.id = call.id or slot.id
                if call.function is not None:
                    slot.name += call.function.name or ""
                    slot.arguments += _arguments(call.function.arguments)
        return texts

    def _slot(self, call: _ToolCall, position: int) -> _MadeCall:
        """The call a tool-call delta continues, or a new one.

        By the server's `index`; without one, by the delta's position in its list. But a
        delta without an index whose `id` differs from that call's starts a new call:
        Ollama 0.4.0-0.4.6 streams each parallel call whole, in a chunk of its own, every
        one at position 0 and none with an index (0.4.7 added it).
        """
        key = call.index if call.index is not None else position
        at = self.by_index.get(key)
        if at is not None and call.index is None and call.id:
            known = self.calls[at].id
            if known and known != call.id:
                at = None
        if at is None:
            at = self.by_index[key] = len(self.calls)
            self.calls.append(_MadeCall(id=None, name="", arguments=""))
        return self.calls[at]

    def reply(self) -> ModelReply:
        """The assistant message the chunks made."""
        return ModelReply(
            content="".join(self.content) or None,
            reasoning="".join(self.reasoning) or None,
            tool_calls=_tool_calls(self.calls),
            total_tokens=self.total,
        )


def _check_status(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    detail = response.text
    try:
        parsed = msgspec.json.decode(response.content)
        if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
            detail = str(parsed["error"].get("message", detail))
        elif isinstance(parsed, dict) and "error" in parsed:
            detail = str(parsed["error"])
    except msgspec.DecodeError:
        pass
    detail = _words(detail)
    if response.status_code in (400, 413) and _CONTEXT_REFUSAL.search(detail):
        raise ContextExceeded(detail)
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
        raise ModelError(
            f"the model server's reply is not a chat completion: {_words(str(exc))}"
        ) from None
    if (failure := completion.failure()) is not None:
        words = _words(failure)
        if _CONTEXT_REFUSAL.search(words):
            raise ContextExceeded(words)
        raise ModelError(f"the model server failed during its answer: {words}")
    if not completion.choices or completion.choices[0].message is None:
        raise ModelError("the model server returned no choices")
    message = completion.choices[0].message
    made = [
        _MadeCall(
            id=call.id,
            name=(call.function.name if call.function else None) or "",
            arguments=_arguments(call.function.arguments if call.function else None),
        )
        for call in message.tool_calls or []
    ]
    return ModelReply(
        content=message.content or None,
        reasoning=message.thinking() or None,
        tool_calls=_tool_calls(made),
        total_tokens=_total(completion.usage),
    )
