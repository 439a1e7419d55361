"""`bxctl baseline`: what a new session would start with, and what it costs in tokens.

With `--count` the token count comes from the model server itself, by the first method
that answers: llama.cpp's exact request count, vLLM's tokenizer over messages and
tools, the usage of a one-token completion, then llama-cpp-python's raw text count.
When none answers, an estimate is printed and labelled as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import trio

import proto
from proto import BaselinePreview, BaselinePreviewReply

from ._common import Sockets, ask, inline, print_json

__all__ = ["TokenCount", "baseline", "count_tokens"]

COUNT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class TokenCount:
    """A token count and how it was obtained."""

    tokens: int
    method: str
    exact: bool


def _root(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


async def count_tokens(preview: BaselinePreviewReply) -> TokenCount:
    """Count the baseline's tokens with the model server, or estimate them (labelled)."""
    messages = [{"role": "system", "content": preview.system}]
    url = preview.model_url.rstrip("/")
    root = _root(url)
    async with httpx.AsyncClient(timeout=COUNT_TIMEOUT_S) as http:
        attempts: list[tuple[str, str, dict[str, Any], str, bool]] = [
            (
                "llama.cpp /v1/chat/completions/input_tokens",
                f"{url}/chat/completions/input_tokens",
                {"model": preview.model, "messages": messages, "tools": preview.tools},
                "input_tokens",
                True,
            ),
            (
                "vLLM /tokenize (messages and tools)",
                f"{root}/tokenize",
                {"model": preview.model, "messages": messages, "tools": preview.tools},
                "count",
                True,
            ),
            (
                "usage.prompt_tokens of a one-token completion",
                f"{url}/chat/completions",
                {
                    "model": preview.model,
                    "messages": messages,
                    "tools": preview.tools,
                    # without it, some servers leave the tools out of the prompt
                    "tool_choice": "auto",
                    "max_tokens": 1,
                    "stream": False,
                },
                "usage.prompt_tokens",
                True,
            ),
            (
                "llama-cpp-python /extras/tokenize/count (raw text, without chat template)",
                f"{root}/extras/tokenize/count",
                {"input": preview.system + "\n" + _compact(preview.tools)},
                "count",
                False,
            ),
        ]
        for method, endpoint, body, field, exact in attempts:
            value = await _try(http, endpoint, body, field)
            if value is not None:
                return TokenCount(value, method, exact)
    chars = len(preview.system) + len(_compact(preview.tools))
    return TokenCount(
        chars // 4, f"ESTIMATE (characters / 4): no model server answered at {url}", False
    )


def _compact(value: object) -> str:
    return msgspec.json.encode(value).decode()


async def _try(
    http: httpx.AsyncClient, endpoint: str, body: dict[str, Any], field: str
) -> int | None:
    try:
        response = await http.post(endpoint, json=body)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        value: Any = response.json()
    except ValueError:
        return None
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, int) and value > 0 else None


async def baseline(home: Path, *, count: bool, as_json: bool) -> int:
    """Print the system prompt and tool schemas a new session would get, and their size."""
    path = Sockets(home).path(proto.OWNER_LOOP)
    preview = await trio.to_thread.run_sync(
        ask, path, proto.OWNER_LOOP, BaselinePreview(), BaselinePreviewReply
    )
    tools = _compact(preview.tools)
    counted = await count_tokens(preview) if count else None
    if as_json:
        out: dict[str, Any] = {
            "system": preview.system,
            "tools": preview.tools,
            "characters": {"system": len(preview.system), "tools": len(tools)},
        }
        if counted:
            out["tokens"] = {
                "count": counted.tokens,
                "method": counted.method,
                "exact": counted.exact,
            }
        print_json(out)
        return 0
    print(proto.for_terminal(preview.system))
    print("\n# tools")
    print_json(preview.tools)
    print(
        f"\nsystem prompt: {len(preview.system):,} characters; "
        f"tool schemas: {len(tools):,} characters"
    )
    if counted:
        print(f"tokens: {counted.tokens:,} ({inline(counted.method)})")
    return 0
