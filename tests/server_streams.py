"""Stream shapes real OpenAI-compatible servers send, byte for byte, each with its source.

`recorded`: bytes a server sent, kept by a project that recorded them (the files in
`tests/streams/`). `rebuilt`: written here the way the server's own serializer writes them
(key order, spacing, line ends, where `usage` and errors go), from the source file named;
the ids, timestamps and texts are ours. `tests/e2e/test_server_streams.py` replays each
through a real turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STREAMS = Path(__file__).parent / "streams"


@dataclass(frozen=True)
class Answer:
    """The assistant record the stream must give (calls as (name, arguments))."""

    content: str | None
    reasoning: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)
    tokens: int | None = None


@dataclass(frozen=True)
class Fails:
    """The turn fails with this code and these words in its sentence; nothing is kept."""

    code: str
    says: str


@dataclass(frozen=True)
class Shape:
    server: str
    version: str
    source: str
    how: str  # "recorded" or "rebuilt"
    raw: bytes
    expect: Answer | Fails
    split_at: list[int] = field(default_factory=list)  # reads the bytes arrive in
    content_type: str = "text/event-stream"

    @property
    def id(self) -> str:
        return f"{self.server} {self.version}: {self.source.split(' — ')[-1]}"


def _compact(value: Any) -> str:
    """JSON as Go's encoding/json, nlohmann's dump() and pydantic write it: no spaces."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _events(
    chunks: list[Any], *, done: bool = True, end: str = "\n", dumps: Any = _compact
) -> bytes:
    out = "".join(f"data: {dumps(chunk)}{end}{end}" for chunk in chunks)
    return (out + (f"data: [DONE]{end}{end}" if done else "")).encode()


# --- llama.cpp's llama-server --------------------------------------------------------------
# tools/server/server.cpp: `server_sent_event(sink, "data", …)` writes
# `data: ` + json.dump(-1) + "\n\n"; each chunk is `{"choices":[…],"created",…,"id",…,
# "model",…,"system_fingerprint",…,"object":"chat.completion.chunk"}`; the deltas come from
# common/chat.cpp's `common_chat_msg_diff_to_json_oaicompat` (reasoning in
# `reasoning_content`, a call's name with `"arguments":""` then argument pieces, each with
# its `index`); the last chunk has `finish_reason`, `usage` and `timings`; then `[DONE]`.


def _llama(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
        "created": 1754000000,
        "id": "chatcmpl-Fz3kq0",
        "model": "qwen3-8b",
        "system_fingerprint": "b6100-5c0eb5ef",
        "object": "chat.completion.chunk",
        **extra,
    }


_LLAMA_USAGE = {"completion_tokens": 21, "prompt_tokens": 1203, "total_tokens": 1224}
_LLAMA_TIMINGS = {"prompt_n": 1203, "prompt_ms": 812.4, "predicted_n": 21, "predicted_ms": 640.2}

LLAMA_CPP = [
    Shape(
        "llama.cpp",
        "b6100 (2025)",
        "tools/server/server.cpp + common/chat.cpp — text and reasoning_content, usage in "
        "the finish chunk",
        "rebuilt",
        _events(
            [
                _llama({"role": "assistant", "content": None}),
                _llama({"reasoning_content": "The owner asks the date."}),
                _llama({"content": "It is "}),
                _llama({"content": "Thursday."}),
                _llama({}, "stop", usage=_LLAMA_USAGE, timings=_LLAMA_TIMINGS),
            ]
        ),
        Answer("It is Thursday.", "The owner asks the date.", tokens=1224),
    ),
    Shape(
        "llama.cpp",
        "b6100 (2025)",
        "common/chat.cpp common_chat_msg_diff_to_json_oaicompat — parallel calls in pieces",
        "rebuilt",
        _events(
            [
                _llama({"role": "assistant", "content": None}),
                _llama(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "K3wIh6hD0HgnNvAi4lNfIbbq2PLhR0uK",
                                "type": "function",
                                "function": {"name": "recall", "arguments": ""},
                            }
                        ]
                    }
                ),
                _llama({"tool_calls": [{"index": 0, "function": {"arguments": '{"query":"la'}}]}),
                _llama({"tool_calls": [{"index": 0, "function": {"arguments": 'unch"}'}}]}),
                _llama(
                    {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "pWm8sL2vA0cX4yQ1eR7tU9iO3kJ6hG5f",
                                "type": "function",
                                "function": {"name": "clock", "arguments": ""},
                            }
                        ]
                    }
                ),
                _llama({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
                _llama({}, "tool_calls", usage=_LLAMA_USAGE, timings=_LLAMA_TIMINGS),
            ]
        ),
        Answer(None, calls=[("recall", '{"query":"launch"}'), ("clock", "{}")], tokens=1224),
    ),
    Shape(
        "llama.cpp",
        "b6100 (2025)",
        'tools/server/server.cpp server_sent_event(sink, "error", …) — context over '
        "the size as an error field",
        "rebuilt",
        b'error: {"code":400,"message":"the request exceeds the available context size, '
        b'try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,'
        b'"n_ctx":4096}\n\ndata: [DONE]\n\n',
        Fails("context-refused", "the request exceeds the available context size"),
    ),
    Shape(
        "llama.cpp",
        "b4000 (2024)",
        'examples/server/server.cpp server_sent_event(sink, "error", …) — another error '
        "as an error field",
        "rebuilt",
        b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"The"}}],'
        b'"created":1731000000,"id":"chatcmpl-a1","model":"qwen","object":"chat.completion.chunk"}'
        b'\n\nerror: {"code":500,"message":"failed to decode the batch","type":"server_error"}'
        b"\n\ndata: [DONE]\n\n",
        Fails("model-error", "the model server failed during its answer: failed to decode"),
    ),
    Shape(
        "llama.cpp",
        "b3900 (2024)",
        'examples/server/server.cpp send_error → data: {"error": …} — error as a data chunk',
        "rebuilt",
        b'data: {"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
        b"\n\ndata: [DONE]\n\n",
        Fails("model-error", "the model server failed during its answer: Loading model"),
    ),
]


# --- vLLM ------------------------------------------------------------------------------
# vllm/entrypoints/openai/serving_chat.py `chat_completion_stream_generator`: each chunk is
# `ChatCompletionStreamResponse.model_dump_json(exclude_unset=True)` after `data: `; the
# first delta carries the role and `"content":""`; a tool parser's first delta for a call
# has its `id`, `type`, `index` and name without arguments, then argument pieces by index;
# the finish chunk has `"delta":{"content":""}` (tools) and `stop_reason`; with
# include_usage a last chunk with `"choices":[]` and `usage`; with continuous_usage_stats,
# usage in every chunk too. Reasoning parsers write `reasoning_content` (before 0.10.2),
# `reasoning` after. An error after the 200: `create_streaming_error_response`, then [DONE].


def _vllm(choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-9c1f7a2e",
        "object": "chat.completion.chunk",
        "created": 1752000000,
        "model": "Qwen/Qwen3-8B",
        "choices": choices,
        **extra,
    }


def _vllm_delta(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    if finish is not None:
        choice["stop_reason"] = None
    return _vllm([choice])


_VLLM_USAGE = {"prompt_tokens": 980, "total_tokens": 1010, "completion_tokens": 30}

VLLM = [
    Shape(
        "vLLM",
        "0.9 (2025)",
        "vllm/entrypoints/openai/serving_chat.py + reasoning/qwen3_reasoning_parser.py — "
        "reasoning_content, usage in its own last chunk",
        "rebuilt",
        _events(
            [
                _vllm_delta({"role": "assistant", "content": ""}),
                _vllm_delta({"reasoning_content": "Short answer."}),
                _vllm_delta({"content": "Yes, "}),
                _vllm_delta({"content": "it is."}),
                _vllm_delta({"content": ""}, "stop"),
                _vllm([], usage=_VLLM_USAGE),
            ]
        ),
        Answer("Yes, it is.", "Short answer.", tokens=1010),
    ),
    Shape(
        "vLLM",
        "0.11+ (2025)",
        "vllm/entrypoints/openai/protocol.py DeltaMessage.reasoning — reasoning in `reasoning`, "
        "usage in every chunk",
        "rebuilt",
        _events(
            [
                _vllm_delta({"role": "assistant", "content": ""})
                | {"usage": {"prompt_tokens": 980, "total_tokens": 980, "completion_tokens": 0}},
                _vllm_delta({"reasoning": "Think first."})
                | {"usage": {"prompt_tokens": 980, "total_tokens": 981, "completion_tokens": 1}},
                _vllm_delta({"content": "Fine."})
                | {"usage": {"prompt_tokens": 980, "total_tokens": 982, "completion_tokens": 2}},
                _vllm_delta({"content": ""}, "stop")
                | {"usage": {"prompt_tokens": 980, "total_tokens": 982, "completion_tokens": 2}},
            ]
        ),
        Answer("Fine.", "Think first.", tokens=982),
    ),
    Shape(
        "vLLM",
        "0.9 (2025)",
        "vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py — parallel calls, name "
        "first, arguments in pieces",
        "rebuilt",
        _events(
            [
                _vllm_delta({"role": "assistant", "content": ""}),
                _vllm_delta(
                    {
                        "tool_calls": [
                            {
                                "id": "chatcmpl-tool-0a1b2c3d4e5f",
                                "type": "function",
                                "index": 0,
                                "function": {"name": "clock"},
                            }
                        ]
                    }
                ),
                _vllm_delta({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
                _vllm_delta(
                    {
                        "tool_calls": [
                            {
                                "id": "chatcmpl-tool-6a7b8c9d0e1f",
                                "type": "function",
                                "index": 1,
                                "function": {"name": "recall"},
                            }
                        ]
                    }
                ),
                _vllm_delta(
                    {"tool_calls": [{"index": 1, "function": {"arguments": '{"query": "'}}]}
                ),
                _vllm_delta({"tool_calls": [{"index": 1, "function": {"arguments": "launch"}}]}),
                _vllm_delta({"tool_calls": [{"index": 1, "function": {"arguments": '"}'}}]}),
                _vllm_delta({"content": ""}, "tool_calls"),
                _vllm([], usage=_VLLM_USAGE),
            ]
        ),
        Answer(None, calls=[("clock", "{}"), ("recall", '{"query": "launch"}')], tokens=1010),
    ),
    Shape(
        "vLLM",
        "0.9 (2025)",
        'serving_chat.py create_streaming_error_response — data: {"error": …}',
        "rebuilt",
        _events(
            [
                _vllm_delta({"role": "assistant", "content": ""}),
                _vllm_delta({"content": "Partly"}),
                {
                    "error": {
                        "message": "The engine died unexpectedly.",
                        "type": "InternalServerError",
                        "param": None,
                        "code": 500,
                    }
                },
            ]
        ),
        Fails("model-error", "failed during its answer: The engine died unexpectedly."),
    ),
    Shape(
        "vLLM",
        "0.6 (2024)",
        'serving_engine.py create_streaming_error_response — data: {"object": "error", …}',
        "rebuilt",
        _events(
            [
                _vllm_delta({"role": "assistant", "content": ""}),
                {
                    "object": "error",
                    "message": "Expecting value: line 1 column 2 (char 1)",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                },
            ]
        ),
        Fails("model-error", "failed during its answer: Expecting value: line 1 column 2"),
    ),
]


# --- Ollama ----------------------------------------------------------------------------
# openai/openai.go `ToChunk` and middleware/openai.go `ChatWriter.writeResponse`: Go's
# json.Marshal, `data: %s\n\n`; each chunk `{"id":"chatcmpl-N","object":…,"created":…,
# "model":…,"system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":
# "assistant","content":…},"finish_reason":…}]}`; a tool call whole in one chunk (an
# `index` since 0.4.7; none in 0.4.0-0.4.6); thinking in `delta.reasoning` (0.9+); with
# include_usage a chunk with `"choices":[]` and usage; then `data: [DONE]`. A runner that
# dies mid-answer: routes.go streams `{"error": …}`, which the middleware decodes as an
# empty ChatResponse: one chunk with empty content and no finish_reason; no [DONE].


def _ollama(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-412",
        "object": "chat.completion.chunk",
        "created": 1744445346,
        "model": "qwen3:8b",
        "system_fingerprint": "fp_ollama",
        "choices": [{"index": 0, "delta": {"role": "assistant", **delta}, "finish_reason": finish}],
    }


def _ollama_call(call_id: str, name: str, arguments: str, index: int | None) -> dict[str, Any]:
    call: dict[str, Any] = {"id": call_id}
    if index is not None:
        call["index"] = index
    return call | {"type": "function", "function": {"name": name, "arguments": arguments}}


_OLLAMA_USAGE = {
    "id": "chatcmpl-412",
    "object": "chat.completion.chunk",
    "created": 1744445346,
    "model": "qwen3:8b",
    "system_fingerprint": "fp_ollama",
    "choices": [],
    "usage": {"prompt_tokens": 655, "completion_tokens": 12, "total_tokens": 667},
}

OLLAMA = [
    Shape(
        "Ollama",
        "0.9 (2025)",
        "openai/openai.go ToChunk Reasoning — thinking in delta.reasoning, usage chunk",
        "rebuilt",
        _events(
            [
                _ollama({"content": "", "reasoning": "The owner greets me."}),
                _ollama({"content": "Hello"}),
                _ollama({"content": " there."}),
                _ollama({"content": ""}, "stop"),
                _OLLAMA_USAGE,
            ]
        ),
        Answer("Hello there.", "The owner greets me.", tokens=667),
    ),
    Shape(
        "Ollama",
        "0.4.7+ (2025)",
        "recorded in g0t4/ask-openai.nvim lua/ask-openai/backends/ollama/notes/sses.md — "
        "parallel calls whole, each with its index",
        "rebuilt",
        _events(
            [
                _ollama(
                    {"content": "", "tool_calls": [_ollama_call("call_wteop8bt", "clock", "{}", 0)]}
                ),
                _ollama(
                    {
                        "content": "",
                        "tool_calls": [
                            _ollama_call("call_rk2xye1l", "recall", '{"query":"launch"}', 1)
                        ],
                    }
                ),
                _ollama({"content": ""}, "tool_calls"),
                _OLLAMA_USAGE,
            ]
        ),
        Answer(None, calls=[("clock", "{}"), ("recall", '{"query":"launch"}')], tokens=667),
    ),
    Shape(
        "Ollama",
        "0.4.0-0.4.6 (2024)",
        "openai/openai.go ToolCall without Index (added in 0.4.7) — parallel calls whole, no index",
        "rebuilt",
        _events(
            [
                _ollama(
                    {
                        "content": "",
                        "tool_calls": [
                            _ollama_call("call_1rkkr7k5", "recall", '{"query":"launch"}', None)
                        ],
                    }
                ),
                _ollama(
                    {
                        "content": "",
                        "tool_calls": [_ollama_call("call_pq0fwx3n", "clock", "{}", None)],
                    }
                ),
                _ollama({"content": ""}, "stop"),
            ]
        ),
        Answer(None, calls=[("recall", '{"query":"launch"}'), ("clock", "{}")]),
    ),
    Shape(
        "Ollama",
        "0.5 (2025)",
        'middleware/openai.go writeResponse of routes.go\'s {"error"} — runner died: one '
        "empty chunk, no finish_reason, no [DONE]",
        "rebuilt",
        _events(
            [
                _ollama({"content": "The launch window"}),
                _ollama({"content": " is on"}),
                {
                    "id": "chatcmpl-412",
                    "object": "chat.completion.chunk",
                    "created": 1744445347,
                    "model": "",
                    "system_fingerprint": "fp_ollama",
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None,
                        }
                    ],
                },
            ],
            done=False,
        ),
        Fails("model-error", "stream ended before its answer did"),
    ),
    Shape(
        "Ollama",
        "0.6 (2025)",
        "openai/openai.go — a streamed answer with no usage chunk and no [DONE] after its "
        "finish chunk",
        "rebuilt",
        _events([_ollama({"content": "Short."}), _ollama({"content": ""}, "stop")], done=False),
        Answer("Short."),
    ),
]


# --- llama-cpp-python ------------------------------------------------------------------
# llama_cpp/server/app.py sends each chunk as `dict(data=json.dumps(chunk))` through
# sse_starlette's EventSourceResponse, whose ServerSentEvent.encode ends lines with CRLF
# and which sends `: ping - <time>` comments while waiting; chunks from
# llama_cpp/llama_chat_format.py `_convert_text_completion_chunks_to_chat` (json.dumps:
# spaces after `,` and `:`); no usage in the stream; `data: [DONE]` last.


def _spaced(value: Any) -> str:
    return json.dumps(value)


def _lcp(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-6f1b0c2d",
        "model": "smollm2-135m",
        "created": 1730000000,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


_LCP_TEXT = b": ping - 2025-01-01 00:00:00.000000+00:00\r\n\r\n" + _events(
    [
        _lcp({"role": "assistant"}),
        _lcp({"content": "Ready"}),
        _lcp({"content": " when you are."}),
        _lcp({}, "stop"),
    ],
    end="\r\n",
    dumps=_spaced,
)

LLAMA_CPP_PYTHON = [
    Shape(
        "llama-cpp-python",
        "0.3 (2024)",
        "llama_cpp/server/app.py + sse_starlette EventSourceResponse — CRLF line ends, "
        "ping comments, CRLF split across reads",
        "rebuilt",
        _LCP_TEXT,
        Answer("Ready when you are."),
        split_at=[_LCP_TEXT.index(b"\r\n", 60) + 1, _LCP_TEXT.index(b"Ready") + 3],
    ),
]


# --- DeepSeek --------------------------------------------------------------------------
# api-docs.deepseek.com (reasoning_model guide, and the FAQ: a streamed request waiting
# in the queue gets `: keep-alive` comments): reasoning in `reasoning_content`; the last
# chunk has `finish_reason` and `usage` together; then `data: [DONE]`.


def _deepseek(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "5c2a9f0e-8d1b-4a57-9e61-0b7f3c2d1a90",
        "object": "chat.completion.chunk",
        "created": 1738000000,
        "model": "deepseek-reasoner",
        "system_fingerprint": "fp_7e73fd9a08",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        **extra,
    }


DEEPSEEK = [
    Shape(
        "DeepSeek",
        "API (2025)",
        "api-docs.deepseek.com reasoning_model guide and FAQ — keep-alive comments, "
        "reasoning_content, usage with the finish",
        "rebuilt",
        b": keep-alive\n\n: keep-alive\n\n"
        + _events(
            [
                _deepseek({"role": "assistant", "content": None, "reasoning_content": ""}),
                _deepseek({"content": None, "reasoning_content": "Count the letters."}),
                _deepseek({"content": "Three.", "reasoning_content": None}),
                _deepseek(
                    {"content": "", "reasoning_content": None},
                    "stop",
                    usage={"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39},
                ),
            ]
        ),
        Answer("Three.", "Count the letters.", tokens=39),
    ),
]


# --- OpenAI ----------------------------------------------------------------------------
# Recorded by openai-python from the live API (tests/lib/chat/test_completions_streaming.py,
# its snapshots in .inline-snapshot/external/), byte for byte in tests/streams/.

OPENAI = [
    Shape(
        "OpenAI",
        "gpt-4o-2024-08-06",
        "openai-python .inline-snapshot/external/e2aad469b71d….bin — text, usage in its "
        "own last chunk",
        "recorded",
        (STREAMS / "openai-gpt-4o-2024-08-06-text.sse").read_bytes(),
        Answer(
            "I'm unable to provide real-time weather updates. To get the current weather in "
            "San Francisco, I recommend checking a reliable weather website or a weather app.",
            tokens=44,
        ),
    ),
    Shape(
        "OpenAI",
        "gpt-4o-2024-08-06",
        "openai-python .inline-snapshot/external/453df473e962….bin — parallel calls in pieces",
        "recorded",
        (STREAMS / "openai-gpt-4o-2024-08-06-parallel-tools.sse").read_bytes(),
        Answer(
            None,
            calls=[
                ("GetWeatherArgs", '{"city": "Edinburgh", "country": "UK", "units": "c"}'),
                ("get_stock_price", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
            ],
            tokens=209,
        ),
    ),
    Shape(
        "OpenAI",
        "API",
        'openai-python src/openai/_streaming.py (reads data: {"error": …} mid-stream) — '
        "an error chunk",
        "rebuilt",
        b'data: {"error":{"message":"The server had an error while processing your request. '
        b'Sorry about that!","type":"server_error","param":null,"code":null}}\n\n',
        Fails("model-error", "The server had an error while processing your request."),
    ),
]

# --- Older servers that leave reasoning inline --------------------------------------------
INLINE_THINK = [
    Shape(
        "llama.cpp",
        "b4400 (2024, --reasoning-format none)",
        "examples/server/server.cpp — <think> inline in content, kept as it came",
        "rebuilt",
        _events(
            [
                _llama({"role": "assistant", "content": None}),
                _llama({"content": "<think>\nThe owner asks."}),
                _llama({"content": "\n</think>\n\nHi."}),
                _llama({}, "stop", usage=_LLAMA_USAGE),
            ]
        ),
        Answer("<think>\nThe owner asks.\n</think>\n\nHi.", tokens=1224),
    ),
]

# --- A streamed request answered with one whole completion -----------------------------------
WHOLE_JSON = [
    Shape(
        "Ollama",
        "any (a proxy or server that ignores stream: true)",
        "openai/openai.go ToChatCompletion — one application/json completion to a streamed "
        "request, used as it is",
        "rebuilt",
        _compact(
            {
                "id": "chatcmpl-77",
                "object": "chat.completion",
                "created": 1744445346,
                "model": "qwen3:8b",
                "system_fingerprint": "fp_ollama",
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [
                                {
                                    "id": "call_x8c2m1qa",
                                    "index": 0,
                                    "type": "function",
                                    "function": {"name": "clock", "arguments": "{}"},
                                }
                            ],
                        },
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 640, "completion_tokens": 9, "total_tokens": 649},
            }
        ).encode()
        + b"\n",
        Answer(None, calls=[("clock", "{}")], tokens=649),
        content_type="application/json",
    ),
]

SHAPES = [
    *OPENAI,
    *LLAMA_CPP,
    *VLLM,
    *OLLAMA,
    *LLAMA_CPP_PYTHON,
    *DEEPSEEK,
    *INLINE_THINK,
    *WHOLE_JSON,
]
