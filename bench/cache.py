"""The frozen memory block in the model's cache: turn k of a session beside a cold request.

The embedded model (llama-cpp-python's server with SmolLM2, started with the command
`bxctl up` uses) answers a real session: `bxctl up` runs the roles on a temporary home
whose memory holds a few realistic entries, loopd talks to the server through a proxy
that passes every byte on and keeps each request's body and its time to first token (the
first streamed delta carrying text or a tool call), and the owner's twenty messages go
one after the other through loopd's chat socket, as `bxctl chat` sends them.

Then, on a fresh server, the body loopd sent for turn k is sent again, alone, right after
a request as long as it that shares nothing with it (so the server's buffers are warm and
its cache holds nothing of the session; its log shows that the cold request reused no
token): the cold time to first token of the same prompt. The same server then gets that
body with the memory block re-rendered after one entry added to memory.md: what each
request would cost after an edit if the block were not frozen for the session.

Printed for k = 2, 5, 10, 20, the median over the repeats (a new session each): the
prompt's tokens and how many of them the warm request had to evaluate (from the server's
own log), warm and cold time to first token, their ratio, the edited-block time and its
ratio, the target (turn 10 at most 0.3x cold) and the machine's load average.

    just bench cache [--repeats N] [--max-tokens N] [--keep] [--server-args ARGS]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import msgspec
import trio

import entries
import proto
from bxctl._embedded import context_tokens, find_gguf, free_port, prompt_counts, server_command

TURNS = (2, 5, 10, 20)
TARGET_TURN = 10
TARGET_RATIO = 0.3
READY_DEADLINE_S = 120.0
REQUEST_DEADLINE_S = 600.0
_JSON = {"content-type": "application/json"}

MISSING = (
    "the cache bench needs the embedded model (llama-cpp-python and the SmolLM2 GGUF, the "
    "`model` dependency group): run it as `just bench cache`, which runs "
    "`uv run --group model python -m bench cache` (the first run compiles "
    "llama-cpp-python, several minutes)"
)

MEMORY = [
    "The quarterly report is due on the first Friday of each quarter; drafts go to Priya.",
    "The home server runs Debian 12; backups go to the NAS at 02:00 and are kept 30 days.",
    "Project Heron launched on 2026-09-14; the launch window for Heron 2 moved to Thursday.",
    "The team standup is at 09:30 Berlin time on weekdays, on the usual video link.",
    "Invoices are paid from the business account; the accountant is Jonas Weber.",
    "Flight to Lisbon booked for 12 December, returning 3 January; seat 14A both ways.",
    "The car's next service is due at 90,000 km or in March, whichever comes first.",
    "The domain example.net renews on 1 August; DNS is managed at the registrar.",
    "Dentist: Dr. Okafor, every six months; the last visit was in October.",
    "The book club meets the last Tuesday of the month; next title: The Left Hand of Darkness.",
    "The house insurance policy renews in February; the broker is Ana Costa.",
    "Weekly review on Fridays at 16:00: open loops, calendar, next week's three goals.",
]
USER = [
    "The owner's name is Ada; she prefers to be addressed by first name.",
    "Prefers short answers with the conclusion first, and sources when facts matter.",
    "Works in UTC for anything written down; lives in Berlin (Europe/Berlin).",
    "Prefers metric units and 24-hour time, dates as YYYY-MM-DD.",
    "Wants to be asked before anything is sent, booked or paid on her behalf.",
]
EDIT = "The dentist moved the next check-up to 2027-03-14 at 10:00."
"""The entry added to memory.md for the edited-block request."""

MESSAGES = [
    "Good morning. When is the quarterly report due?",
    "Who gets the drafts of it?",
    "What time is the standup?",
    "Remind me who our accountant is.",
    "When does my flight to Lisbon leave?",
    "And when do I come back?",
    "Which seat did I book?",
    "When is the car due for a service?",
    "When does example.net renew?",
    "Who is my dentist?",
    "When was my last visit there?",
    "What is the book club reading next?",
    "When does the book club meet?",
    "Who is our insurance broker?",
    "When does the house insurance renew?",
    "What do I go through in the weekly review?",
    "When did Project Heron launch?",
    "What changed for Heron 2?",
    "Where do the server backups go?",
    "Thanks. Summarise today's answers in one sentence.",
]


# -- the server's stream and its log ------------------------------------------------------


class _Delta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[Any] | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = msgspec.field(default_factory=list)


_chunk = msgspec.json.Decoder(_Chunk)


def _carries_token(line: bytes) -> bool:
    """Whether one SSE line is a chunk with the answer's first text or tool call."""
    if not line.startswith(b"data:"):
        return False
    payload = line[5:].strip()
    if not payload or payload == b"[DONE]":
        return False
    try:
        chunk = _chunk.decode(payload)
    except msgspec.DecodeError:
        return False
    return any(
        choice.delta is not None and bool(choice.delta.content or choice.delta.tool_calls)
        for choice in chunk.choices
    )


class FirstToken:
    """Watches an SSE byte stream for the first chunk that carries a token."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.seconds: float | None = None
        self._pending = b""

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream, noting the time if they hold the first token."""
        if self.seconds is not None:
            return
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        if any(_carries_token(line) for line in lines):
            self.seconds = time.perf_counter() - self.started


# -- the model server ---------------------------------------------------------------------


@dataclass
class Server:
    """One embedded model server, as `bxctl up` starts it."""

    process: trio.Process
    url: str
    log: Path


async def start_server(
    directory: Path, name: str, context_tokens: int, extra: Sequence[str]
) -> Server:
    """Start the embedded server (with `extra` arguments) and wait until it answers."""
    port = free_port()
    log = directory / f"{name}.log"
    with log.open("wb") as out:
        process = await trio.lowlevel.open_process(
            [*server_command(find_gguf(), port, context_tokens), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(timeout=2.0) as http:
        with trio.fail_after(READY_DEADLINE_S):
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"the model server exited; see {log}")
                try:
                    if (await http.get(f"{url}/v1/models")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await trio.sleep(0.2)
    return Server(process, url, log)


async def stop(process: trio.Process) -> None:
    """SIGTERM, then wait for it."""
    process.send_signal(signal.SIGTERM)
    with trio.move_on_after(60):
        await process.wait()
        return
    process.kill()
    await process.wait()


async def time_to_first_token(http: httpx.AsyncClient, url: str, body: bytes) -> float:
    """Send one streaming completion, read it to the end; seconds to its first token."""
    request = http.build_request("POST", f"{url}/v1/chat/completions", content=body, headers=_JSON)
    watch = FirstToken(time.perf_counter())
    response = await http.send(request, stream=True)
    try:
        response.raise_for_status()
        async for data in response.aiter_raw():
            watch.feed(data)
    finally:
        await response.aclose()
    if watch.seconds is None:
        raise SystemExit("the model server's answer carried no token")
    return watch.seconds


# -- the proxy between loopd and the server ------------------------------------------------


@dataclass
class Exchange:
    """One completion request loopd sent, and its time to first token."""

    body: bytes
    seconds: float | None


class _Closed(Exception):
    """The client closed the connection before a whole request."""


async def _read_request(stream: trio.abc.Stream) -> tuple[str, str, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        more = await stream.receive_some()
        if not more:
            raise _Closed
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    request_line, *headers = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    length = 0
    for header in headers:
        name, _, value = header.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        more = await stream.receive_some()
        if not more:
            raise _Closed
        body += more
    return method, path, body


def proxy_handler(
    http: httpx.AsyncClient, upstream: str, exchanges: list[Exchange]
) -> Callable[[trio.SocketStream], Awaitable[None]]:
    """A connection handler passing one request on to `upstream` and its answer back.

    Each answer is sent close-delimited (`connection: close`), so the proxy need not
    re-chunk it; a completion's body and time to first token are kept in `exchanges`.
    """

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            try:
                method, path, body = await _read_request(stream)
            except (_Closed, trio.BrokenResourceError):
                return
            request = http.build_request(
                method, upstream + path, content=body or None, headers=_JSON if body else None
            )
            watch = FirstToken(time.perf_counter())
            try:
                response = await http.send(request, stream=True)
            except httpx.HTTPError as exc:
                print(f"cache: the model server did not answer: {exc!r}", file=sys.stderr)
                return  # loopd sees the connection close, and says so
            try:
                kind = response.headers.get("content-type", "application/octet-stream")
                await stream.send_all(
                    f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n"
                    f"content-type: {kind}\r\nconnection: close\r\n\r\n".encode("latin-1")
                )
                async for data in response.aiter_raw():
                    watch.feed(data)
                    await stream.send_all(data)
            except trio.BrokenResourceError:
                return
            except httpx.HTTPError as exc:
                print(f"cache: the model server broke off: {exc!r}", file=sys.stderr)
                return
            finally:
                await response.aclose()
            if path.endswith("/chat/completions"):
                exchanges.append(Exchange(body, watch.seconds))

    return handle


# -- one session through the real roles ---------------------------------------------------


@dataclass
class Turn:
    """Turn k of one session: loopd's request, its time to first token, its tokens."""

    body: bytes
    warm_s: float
    reused: int | None = None
    evaluated: int | None = None


async def bxctl(home: Path, *args: str) -> None:
    """Run one bxctl command on `home`."""
    await trio.run_process(
        [sys.executable, "-m", "bxctl", *args, "--home", os.fspath(home)],
        capture_stdout=True,
        capture_stderr=True,
    )


async def make_home(home: Path, max_tokens: int) -> None:
    """A home with a few memories, whose loopd asks as it asks the embedded model."""
    await bxctl(home, "init")
    # With `url = "embedded"` loopd streams and sends no tools (tool_choice "none").
    await bxctl(home, "config", "set", "model.tool_choice", "none")
    await bxctl(home, "config", "set", "model.max_tokens", str(max_tokens))
    memory = home / "memory"
    memory.mkdir(mode=0o700)
    (memory / "memory.md").write_text(entries.render(MEMORY))
    (memory / "user.md").write_text(entries.render(USER))


async def wait_up(process: trio.Process, log: Path) -> None:
    """Wait until `bxctl up` says boxmaker is up."""
    with trio.fail_after(READY_DEADLINE_S):
        while b"boxmaker is up" not in await trio.Path(log).read_bytes():
            if process.poll() is not None:
                raise SystemExit(f"bxctl up stopped; see {log}")
            await trio.sleep(0.1)


async def say_all(chat: Path, messages: Iterable[str]) -> None:
    """One new session; each message a turn, waited for to its end."""
    opened = await proto.call(chat, proto.SessionOpen(origin="bench"), proto.SessionOpened)
    for text in messages:
        last: proto.Message | None = None
        with trio.fail_after(REQUEST_DEADLINE_S):
            async with proto.open_call(chat, proto.Say(session=opened.session, text=text)) as call:
                async for frame in call:
                    last = frame
        if not isinstance(last, proto.TurnDone):
            raise SystemExit(f"turn {text!r} did not finish: {last!r}")


async def run_sessions(
    directory: Path, repeats: int, max_tokens: int, extra: Sequence[str]
) -> list[list[Turn]]:
    """`repeats` sessions of every message, through the roles, on one warm server."""
    home = directory / "home"
    await make_home(home, max_tokens)
    server = await start_server(directory, "warm", context_tokens(home), extra)
    exchanges: list[Exchange] = []
    sessions: list[list[Turn]] = []
    try:
        async with (
            httpx.AsyncClient(timeout=REQUEST_DEADLINE_S) as http,
            trio.open_nursery() as nursery,
        ):
            handler = proxy_handler(http, server.url, exchanges)
            listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            await bxctl(home, "config", "set", "model.url", f"http://127.0.0.1:{port}/v1")
            up_log = directory / "up.log"
            with up_log.open("wb") as out:
                up = await trio.lowlevel.open_process(
                    [sys.executable, "-m", "bxctl", "up", "--home", os.fspath(home)],
                    stdout=subprocess.DEVNULL,
                    stderr=out,
                )
            try:
                await wait_up(up, up_log)
                chat = proto.OWNER_LOOP.default_path(home)
                for repeat in range(repeats):
                    first = len(exchanges)
                    await say_all(chat, MESSAGES[: max(TURNS)])
                    turns = exchanges[first:]
                    if len(turns) != max(TURNS):
                        raise SystemExit(f"{len(turns)} model requests for {max(TURNS)} turns")
                    sessions.append([_turn(exchange) for exchange in turns])
                    print(f"  session {repeat + 1} of {repeats} done", file=sys.stderr)
            finally:
                up.send_signal(signal.SIGINT)
                with trio.CancelScope(shield=True), trio.move_on_after(90):
                    await up.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await stop(server.process)
    counts = prompt_counts(server.log.read_bytes())
    if len(counts) == repeats * max(TURNS):
        for index, turn in enumerate(t for session in sessions for t in session):
            turn.reused, turn.evaluated = counts[index]
    return sessions


def _turn(exchange: Exchange) -> Turn:
    if exchange.seconds is None:
        raise SystemExit("a streamed answer carried no token")
    return Turn(exchange.body, exchange.seconds)


# -- the same requests, cold ----------------------------------------------------------------


def edited(body: bytes, soul: str) -> bytes:
    """`body` with its memory block as re-rendered after one entry added to memory.md."""
    old = entries.render_block(soul=soul, memory=MEMORY, user=USER)
    new = entries.render_block(soul=soul, memory=[*MEMORY, EDIT], user=USER)
    request = msgspec.json.decode(body)
    system = request["messages"][0]
    if old not in system["content"]:
        raise SystemExit("the session's system prompt does not hold the expected memory block")
    system["content"] = system["content"].replace(old, new, 1)
    return msgspec.json.encode(request)


def flush(body: bytes) -> bytes:
    """A request as long as `body` that shares nothing with it past its first token.

    The same messages, the first one's role changed: the server evaluates as many tokens
    (so its buffers are as warm as they will be for `body`), and keeps none of them.
    """
    request = msgspec.json.decode(body)
    request["messages"][0]["role"] = "user"
    request.update(stream=False, max_tokens=1)
    return msgspec.json.encode(request)


async def cold_requests(
    directory: Path,
    name: str,
    bodies: dict[int, bytes],
    soul: str,
    context: int,
    extra: Sequence[str],
) -> dict[int, tuple[float, float]]:
    """One fresh server; for each turn: the time to first token of its body after a flush,
    then of the same body with its memory block edited."""
    server = await start_server(directory, name, context, extra)
    found: dict[int, tuple[float, float]] = {}
    try:
        async with httpx.AsyncClient(timeout=REQUEST_DEADLINE_S) as http:
            for k, body in bodies.items():
                response = await http.post(
                    f"{server.url}/v1/chat/completions", content=flush(body), headers=_JSON
                )
                response.raise_for_status()
                first = await time_to_first_token(http, server.url, body)
                after_edit = await time_to_first_token(http, server.url, edited(body, soul))
                found[k] = (first, after_edit)
    finally:
        with trio.CancelScope(shield=True):
            await stop(server.process)
    # flush, cold, edited for each turn: a cold request must have reused nothing
    counts = prompt_counts(server.log.read_bytes())
    for index, k in enumerate(bodies):
        reused = counts[3 * index + 1][0] if len(counts) == 3 * len(bodies) else None
        if reused is None or reused > 1:
            raise SystemExit(
                f"the cold request of turn {k} reused {reused} tokens; see {server.log}"
            )
    return found


# -- the report ---------------------------------------------------------------------------


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _median(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def _tokens(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f}"


async def measure(directory: Path, repeats: int, max_tokens: int, extra: Sequence[str]) -> None:
    """Run the sessions, then the cold requests, and print the table."""
    load_before = _load()
    print(
        f"cache: {repeats} sessions of {max(TURNS)} turns through the roles, then turns "
        f"{', '.join(map(str, TURNS))} of each cold, on a fresh server (load {load_before}) …",
        file=sys.stderr,
    )
    sessions = await run_sessions(directory, repeats, max_tokens, extra)
    home = directory / "home"
    context = context_tokens(home)
    soul = (home / "memory" / "soul.md").read_text()
    cold: list[dict[int, tuple[float, float]]] = []
    for repeat, session in enumerate(sessions, 1):
        bodies = {k: session[k - 1].body for k in TURNS}
        cold.append(await cold_requests(directory, f"cold-{repeat}", bodies, soul, context, extra))
        print(f"  cold requests {repeat} of {repeats} done", file=sys.stderr)
    rows = [
        (
            k,
            [session[k - 1] for session in sessions],
            [found[k][0] for found in cold],
            [found[k][1] for found in cold],
        )
        for k in TURNS
    ]

    version = importlib.metadata.version("llama-cpp-python")
    started = "started as `bxctl up` starts it" + (f", plus {shlex.join(extra)}" if extra else "")
    print(
        f"\nthe frozen block in the model's cache: SmolLM2-135M on llama-cpp-python {version}, "
        f"{started}; {repeats} sessions of {max(TURNS)} turns (answers of at most "
        f"{max_tokens} tokens); median of {repeats}"
    )
    print(f"load average {load_before} at the start, {_load()} at the end (1, 5, 15 min)")
    print(
        f"{'turn':>4} {'prompt':>7} {'evaluated':>9} {'warm ms':>8} {'cold ms':>8} "
        f"{'warm/cold':>9}   {'block edited ms':>15} {'edited/cold':>11}"
    )
    verdict = ""
    for k, warm, cold_s, edited_s in rows:
        prompt = _median(
            None if t.reused is None or t.evaluated is None else t.reused + t.evaluated
            for t in warm
        )
        evaluated = _median(t.evaluated for t in warm)
        warm_ms = statistics.median(t.warm_s for t in warm) * 1000
        cold_ms = statistics.median(cold_s) * 1000
        edited_ms = statistics.median(edited_s) * 1000
        ratio = warm_ms / cold_ms
        print(
            f"{k:>4} {_tokens(prompt):>7} {_tokens(evaluated):>9} {warm_ms:>8,.0f} "
            f"{cold_ms:>8,.0f} {ratio:>8.2f}x   {edited_ms:>15,.0f} {edited_ms / cold_ms:>10.2f}x"
        )
        if k == TARGET_TURN:
            holds = "holds" if ratio <= TARGET_RATIO else "MISSED"
            verdict = f"target: turn {k} warm ≤ {TARGET_RATIO}x cold: {holds} ({ratio:.2f}x)"
    print(verdict)
    print(
        "prompt: the request's tokens; evaluated: those the warm server computed (the rest\n"
        "came from its cache); cold: the same body on a fresh server, after a request as long\n"
        "that shares none of it; block edited: that body with memory.md's block re-rendered\n"
        "after one added entry, sent next (what an unfrozen block would cost after an edit)"
    )


def main(argv: list[str]) -> None:
    """Run the cache benchmark and print the table."""
    parser = argparse.ArgumentParser(prog="just bench cache", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="sessions (and cold requests)")
    parser.add_argument("--max-tokens", type=int, default=64, help="[model] max_tokens")
    parser.add_argument("--keep", action="store_true", help="keep the home and the servers' logs")
    parser.add_argument(
        "--server-args",
        default="",
        help="more arguments for the model server, to try a setting: "
        "--server-args=--n_threads_batch=2",
    )
    args = parser.parse_args(argv)
    if importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit(MISSING)
    directory = Path(tempfile.mkdtemp(prefix="bxc", dir="/tmp"))
    try:
        trio.run(measure, directory, args.repeats, args.max_tokens, shlex.split(args.server_args))
    except BaseException:
        print(f"cache: the home and the servers' logs are kept in {directory}", file=sys.stderr)
        raise
    if args.keep:
        print(f"cache: the home and the servers' logs are in {directory}", file=sys.stderr)
    else:
        shutil.rmtree(directory, ignore_errors=True)
