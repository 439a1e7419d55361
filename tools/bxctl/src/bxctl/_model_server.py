"""The embedded model's server: llama-cpp-python's, with its prompt written as sent.

`python -m bxctl._model_server ARGS` is `python -m llama_cpp.server ARGS` (the same
options), with one more chat format, `CHAT_FORMAT`. It is llama-cpp-python's
`chatml-function-calling` (the one of its formats that renders the tool schemas into the
prompt, which `bxctl baseline --count` counts), whose template HTML-escapes every message
as it renders it: the model read `I&#39;m` and `&lt;b&gt;` for what was said, and wrote
`I&#39;m` back into its answers. The messages are handed to it marked as safe text, so the
template writes them byte for byte. Run only in the model server's own process.
"""

from __future__ import annotations

import importlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from proto import supervisor_fd

__all__ = ["CHAT_FORMAT", "as_written", "main"]

CHAT_FORMAT = "boxmaker-chatml-tools"


def as_written(messages: list[dict[str, Any]], safe: Callable[[str], Any]) -> list[dict[str, Any]]:
    """The messages with every text a template writes (content, call arguments) as `safe`.

    `safe` is markupsafe's `Markup`: Jinja's autoescape leaves a `Markup` as it is. The
    messages themselves are not changed.
    """
    written: list[dict[str, Any]] = []
    for message in messages:
        copy = dict(message)
        if isinstance(copy.get("content"), str):
            copy["content"] = safe(copy["content"])
        if isinstance(copy.get("tool_calls"), list):
            calls = []
            for call in copy["tool_calls"]:
                call = dict(call)
                function = call.get("function")
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    call["function"] = {**function, "arguments": safe(function["arguments"])}
                calls.append(call)
            copy["tool_calls"] = calls
        written.append(copy)
    return written


def register() -> None:
    """Add `CHAT_FORMAT` to llama-cpp-python's chat formats."""
    formats: Any = importlib.import_module("llama_cpp.llama_chat_format")
    markup: Any = importlib.import_module("markupsafe").Markup
    upstream = formats.chatml_function_calling

    def chatml_tools(*, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        return upstream(messages=as_written(messages, markup), **kwargs)

    formats.register_chat_completion_handler(CHAT_FORMAT)(chatml_tools)


def watch_supervisor() -> None:
    """Stop (SIGTERM, which the server drains on) once the `bxctl up` that started it dies.

    As each role does (`proto.watch_supervisor`): bxctl holds the only write end of the
    pipe `proto.supervisor_fd` names, so its death, however it dies, is an EOF.
    """
    fd = supervisor_fd()
    if fd is None:
        return

    def wait() -> None:
        while os.read(fd, 64):
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="supervisor", daemon=True).start()


def main() -> None:
    """Run llama-cpp-python's server with `CHAT_FORMAT` known, while bxctl lives."""
    watch_supervisor()
    register()
    server: Any = importlib.import_module("llama_cpp.server.__main__")
    server.main()


if __name__ == "__main__":
    main()
