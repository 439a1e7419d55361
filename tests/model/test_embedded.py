"""Against the real embedded model server (`just check-model`): llama-cpp-python serving
SmolLM2 on one thread, temperature 0. Not in the gate: it needs the `model` group."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from realistic import fill_entries
from stack import Stack, running_stack

import entries
import proto
from bxctl._embedded import find_gguf, free_port, prompt_counts, server_command
from loopd._config import ModelSection
from loopd._model import ModelClient
from loopd._tools import tool_schemas

pytestmark = pytest.mark.model

CAP_S = 300
CONFIG = Path(__file__).parents[2] / "config"


@dataclass(frozen=True)
class Served:
    url: str
    log: Path
    """The server's output: llama-cpp-python's own lines and llama.cpp's."""


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed: run `just check-model`")
    port = free_port()
    log = tmp_path_factory.mktemp("model") / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            server_command(find_gguf(), port), stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, "the model server exited"
            assert time.monotonic() < deadline, "the model server did not start"
            time.sleep(0.2)
        yield Served(url, log)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def model_url(model_server: Served) -> str:
    return model_server.url


@pytest.fixture
def stack(short_dir: Path, model_url: str) -> Iterator[Stack]:
    # as bxctl up runs the embedded model: no streaming, text answers
    with running_stack(short_dir, model_url=model_url, stream=False, tool_choice="none") as running:
        yield running


async def test_a_chat_round_trip(stack: Stack) -> None:
    with trio.fail_after(CAP_S):
        opened = await proto.call(
            stack.socket(proto.OWNER_LOOP),
            proto.SessionOpen(origin="check-model"),
            proto.SessionOpened,
        )
        frames = []
        async with proto.open_call(
            stack.socket(proto.OWNER_LOOP), proto.Say(session=opened.session, text="Say hello.")
        ) as call:
            async for frame in call:
                frames.append(frame)
    assert isinstance(frames[-1], proto.TurnDone), frames[-1]
    assert frames[-1].text.strip()
    print(f"\nthe model said: {frames[-1].text!r}")


async def test_a_forced_recall_call_validates_and_round_trips(stack: Stack, model_url: str) -> None:
    body = {
        "model": "smollm2",
        "temperature": 0,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "What did we decide about the launch?"}],
        "tools": tool_schemas(),
        "tool_choice": {"type": "function", "function": {"name": "recall"}},
    }
    async with httpx.AsyncClient(timeout=CAP_S) as http:
        reply = (await http.post(f"{model_url}/chat/completions", json=body)).json()
    [call] = reply["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "recall"
    arguments = call["function"]["arguments"]
    parsed = proto.parse_recall_args(arguments)  # the schema's shape and limits
    assert 1 <= len(parsed.query) <= 500
    request = proto.ToolRequest(
        session="chat-checkmodel0001",
        call=proto.ToolCall(id=call.get("id") or "c1", name="recall", arguments=arguments),
    )
    with trio.fail_after(CAP_S):
        async with proto.open_call(stack.socket(proto.LOOP_BROKER), request) as conversation:
            response = await conversation.receive()
    assert isinstance(response, proto.ToolResponse), response
    assert response.status == "ok", response.content
    print(f"\nrecall {arguments} -> {response.content[:80]!r}")


async def test_an_sse_stream_is_parsed_to_the_end(model_url: str) -> None:
    client = ModelClient(ModelSection(url=model_url, stream=True, max_tokens=40, temperature=0))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    try:
        with trio.fail_after(CAP_S):
            reply = await client.complete(
                [{"role": "user", "content": "Count from one to five."}], [], on_text
            )
    finally:
        await client.aclose()
    assert reply.content
    assert "".join(deltas) == reply.content
    assert len(deltas) > 1  # it really streamed


async def test_a_request_that_extends_the_last_reuses_its_prompt(model_server: Served) -> None:
    # The frozen block's payoff, without timing: the next turn's request starts with the
    # last one's prompt and answer, and the server evaluates only what is new (its log).
    system = "\n\n".join(
        [
            (CONFIG / "system.md").read_text().strip(),
            entries.render_block(
                soul=(CONFIG / "soul.md").read_text(),
                memory=fill_entries(800, "memory"),
                user=fill_entries(400, "user"),
            ),
        ]
    )
    client = ModelClient(
        ModelSection(url=model_server.url, stream=True, max_tokens=30, temperature=0)
    )

    async def on_text(delta: str) -> None:
        pass

    seen = model_server.log.stat().st_size
    messages: list[dict[str, object]] = [{"role": "system", "content": system}]
    try:
        for text in ("When is the standup?", "Who is the accountant?"):
            messages.append({"role": "user", "content": text})
            with trio.fail_after(CAP_S):
                reply = await client.complete(messages, [], on_text)
            messages.append({"role": "assistant", "content": reply.content or ""})
    finally:
        await client.aclose()
    with model_server.log.open("rb") as log:
        log.seek(seen)
        (reused_1, evaluated_1), (reused_2, evaluated_2) = prompt_counts(log.read())
    first_prompt = reused_1 + evaluated_1
    assert first_prompt > 300
    assert reused_2 >= first_prompt  # the whole first prompt, from the cache
    assert evaluated_2 < first_prompt / 4  # the new message (and the answer, re-read)
    print(f"\nturn 2 reused {reused_2:,} tokens and evaluated {evaluated_2}")


def test_the_server_reads_the_embedded_settings_as_meant() -> None:
    # Parsed by the server's own command line (a flag it misread would change nothing).
    cli = importlib.import_module("llama_cpp.server.cli")
    settings = importlib.import_module("llama_cpp.server.settings")
    parser = argparse.ArgumentParser()
    cli.add_args_from_model(parser, settings.Settings)
    args = parser.parse_args(server_command(Path("smollm2.gguf"), 8080, 4096)[3:])
    model = cli.parse_model_from_args(settings.ModelSettings, args)
    server = cli.parse_model_from_args(settings.ServerSettings, args)
    assert (model.n_threads, model.n_threads_batch, model.n_ctx) == (1, 1, 4096)
    assert server.interrupt_requests is False


async def test_a_request_waits_for_an_answer_that_streams(model_url: str) -> None:
    # llama-cpp-python's default cuts a streaming answer off for any other request, even
    # a `GET /v1/models` (a second session, a probe); the embedded server makes it wait.
    body = {
        "model": "smollm2",
        "temperature": 0,
        "max_tokens": 48,
        "min_tokens": 48,
        "stream": True,
        "messages": [{"role": "user", "content": "Count from one to fifty."}],
    }
    finish: list[str] = []
    probed: list[int] = []
    async with httpx.AsyncClient(timeout=CAP_S) as http, trio.open_nursery() as nursery:

        async def probe() -> None:
            probed.append((await http.get(f"{model_url}/models")).status_code)

        with trio.fail_after(CAP_S):
            async with http.stream("POST", f"{model_url}/chat/completions", json=body) as answer:
                async for line in answer.aiter_lines():
                    if not line.startswith("data: {"):
                        continue
                    if not probed and not nursery.child_tasks:
                        nursery.start_soon(probe)  # while the answer streams
                    for choice in json.loads(line[6:])["choices"]:
                        if choice.get("finish_reason"):
                            finish.append(choice["finish_reason"])
    assert finish == ["length"]  # the whole answer, not cut off
    assert probed == [200]


def _count(home: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "bxctl", "baseline", "--count", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=CAP_S,
    )
    assert done.returncode == 0, done.stderr
    tokens: dict[str, object] = json.loads(done.stdout)["tokens"]
    assert tokens["exact"] is True
    return tokens


def test_baseline_token_count_from_the_server(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = _count(stack.home)
    memory = stack.home / "memory"
    (memory / "memory.md").write_text(entries.render(fill_entries(entries.MEMORY_LIMIT, "memory")))
    (memory / "user.md").write_text(entries.render(fill_entries(entries.USER_LIMIT, "user")))
    full = _count(stack.home)
    with capsys.disabled():
        print(
            f"\nbaseline with the starter soul and the tool schemas [{empty['method']}]:"
            f"\n  empty memory: {empty['count']:,} tokens"
            f"\n  memory.md and user.md full: {full['count']:,} tokens"
        )
    assert isinstance(empty["count"], int)
    assert isinstance(full["count"], int)
    assert 200 < empty["count"] < full["count"] <= 2000  # spec: 3,000; our goal: 2,000


def test_bxctl_up_runs_the_embedded_model(short_dir: Path) -> None:
    home = short_dir / "home"
    env = {**os.environ}
    assert (
        subprocess.run(
            [sys.executable, "-m", "bxctl", "init", "--home", str(home)], timeout=60
        ).returncode
        == 0
    )
    up = subprocess.Popen(
        [sys.executable, "-m", "bxctl", "up", "--home", str(home)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert up.stderr is not None
        for line in up.stderr:
            if "boxmaker is up" in line:
                break
        else:
            pytest.fail("bxctl up stopped before it was up")
        chat = subprocess.run(
            [sys.executable, "-m", "bxctl", "chat", "--home", str(home), "--message", "hello"],
            capture_output=True,
            text=True,
            timeout=CAP_S,
        )
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.strip()
        assert "embedded demo model" in chat.stderr
    finally:
        up.send_signal(2)
        up.wait(timeout=60)
        if up.stderr:
            up.stderr.close()
    assert up.returncode == 0


def test_a_killed_bxctl_up_takes_the_embedded_model_with_it(short_dir: Path) -> None:
    home = short_dir / "home"
    init = [sys.executable, "-m", "bxctl", "init", "--home", str(home)]
    assert subprocess.run(init, timeout=60).returncode == 0
    up = subprocess.Popen(
        [sys.executable, "-m", "bxctl", "up", "--home", str(home)],
        stderr=subprocess.PIPE,
        text=True,
    )
    started: dict[str, int] = {}
    try:
        assert up.stderr is not None
        for line in up.stderr:
            if line.startswith("bxctl: started "):  # bxctl: started model (pid 4997)
                name, _, pid = line.removeprefix("bxctl: started ").partition(" (pid ")
                started[name] = int(pid.rstrip(")\n"))
            if "boxmaker is up" in line:
                break
        else:
            pytest.fail("bxctl up stopped before it was up")
    finally:
        up.kill()  # SIGKILL: bxctl stops nothing itself
        up.wait(timeout=60)
        if up.stderr:
            up.stderr.close()
    assert set(started) == {"model", "memoryd", "brokerd", "loopd"}
    deadline = time.monotonic() + CAP_S
    alive = set(started)
    while alive and time.monotonic() < deadline:
        alive = {name for name in alive if Path(f"/proc/{started[name]}").exists()}
        time.sleep(0.1)
    assert not alive, "orphaned by a killed bxctl up"


def test_the_prompt_holds_the_messages_as_they_were_said() -> None:
    # llama-cpp-python's tool-calling ChatML template HTML-escapes what it renders: the
    # model read `I&#39;m` and wrote it back. The embedded server's format writes the bytes.
    model_server = importlib.import_module("bxctl._model_server")
    formats = importlib.import_module("llama_cpp.llama_chat_format")
    model_server.register()
    said = 'I\'m <b>bold</b> & "quoted"'
    arguments = '{"query": "Heron\'s <launch> & more"}'
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You help. Use <tags> & 'quotes'."},
        {"role": "user", "content": said},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "recall", "arguments": arguments},
                }
            ],
        },
        {"role": "assistant", "content": "It's < 3 & > 1."},
        {"role": "user", "content": said},
    ]
    prompts: list[str] = []

    class Recording:
        def create_completion(self, prompt: str, **_: object) -> dict[str, object]:
            prompts.append(prompt)
            return {
                "id": "cmpl-0",
                "object": "text_completion",
                "created": 0,
                "model": "smollm2",
                "choices": [{"text": "ok", "index": 0, "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }

    handler = formats.get_chat_completion_handler(model_server.CHAT_FORMAT)
    handler(llama=Recording(), messages=messages, tool_choice="none")
    (prompt,) = prompts
    assert "You help. Use <tags> & 'quotes'." in prompt
    assert prompt.count(f"<|im_start|>user\n{said}<|im_end|>") == 2
    assert f"functions.recall:\n{arguments}" in prompt
    assert "It's < 3 & > 1." in prompt
    assert not any(escaped in prompt for escaped in ("&#39;", "&#34;", "&lt;", "&gt;", "&amp;"))
    # the messages the server holds are its own, unchanged
    assert type(messages[1]["content"]) is str
    # without it, the same template escapes (the reason for the format)
    prompts.clear()
    formats.chatml_function_calling(llama=Recording(), messages=messages, tool_choice="none")
    assert "I&#39;m &lt;b&gt;" in prompts[0]
