"""The local runtime: read_file and list_dir inside their paths, http_fetch on its hosts.

http_fetch is tested against `http.server` on 127.0.0.1 only; nothing leaves the machine.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from brokerd._arguments import parse_arguments
from brokerd._grants import Grant, parse_grant
from brokerd._local_tools import FETCHED, LocalLimits, LocalRuntime
from brokerd._runtimes import Auto, RunOutput, RunRequest
from proto import Label

CAP_S = 10
LIMITS = LocalLimits(
    read_max_bytes=1000, list_max_entries=3, fetch_max_bytes=2000, fetch_timeout_s=2
)


def paths_grant(tool: str, *globs: str) -> Grant:
    text = (
        f'tool = "{tool}"\nmode = "auto"\nmax_taint = "private"\nresult_class = "private"\n'
        f"untrusted = false\n[constraints]\npaths = {json.dumps(list(globs))}\n"
    )
    return parse_grant("files", text.encode())


def hosts_grant(*hosts: str) -> Grant:
    text = (
        'tool = "http_fetch"\nmode = "auto"\nmax_taint = "private"\nresult_class = "public"\n'
        f"untrusted = true\n[constraints]\nhosts = {json.dumps(list(hosts))}\n"
    )
    return parse_grant("web", text.encode())


def call(tool: str, **args: str) -> RunRequest:
    return RunRequest(
        session="chat-abcdefghijklmnop",
        call_id="c1",
        tool=tool,
        arguments=parse_arguments(tool, json.dumps(args)),
        taint=Label(),
        by=Auto(),
    )


async def run(tool: str, grant: Grant, **args: str) -> RunOutput:
    runtime = LocalRuntime(LIMITS)
    with trio.fail_after(CAP_S):
        checked = await runtime.check(call(tool, **args), grant)
        ran = await runtime.run(call(tool, **args), grant)
    if checked is not None:
        assert (checked.status, checked.content) == (ran.status, ran.content)
    return ran


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "q3.txt").write_text("launch on Thursday\n")
    (notes / "big.txt").write_text("x" * 1001)
    (notes / "binary.bin").write_bytes(b"\xff\xfe")
    (tmp_path / "secret.txt").write_text("the password")
    (notes / "escape.txt").symlink_to(tmp_path / "secret.txt")
    (notes / "escape-dir").symlink_to(tmp_path)
    (notes / "inner.txt").symlink_to(notes / "q3.txt")
    os.mkfifo(notes / "pipe")
    return tmp_path


async def test_read_file_inside_the_grant(tree: Path) -> None:
    grant = paths_grant("read_file", f"{tree}/notes/**")
    assert await run("read_file", grant, path=f"{tree}/notes/q3.txt") == RunOutput(
        "ok", "launch on Thursday\n"
    )
    followed = await run("read_file", grant, path=f"{tree}/notes/inner.txt")
    assert followed.content == "launch on Thursday\n"


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("{tree}/notes/../secret.txt", "denied", "is outside the paths granted by files"),
        ("{tree}/notes/../../../../etc/passwd", "denied", "is outside the paths granted"),
        ("{tree}/notes/escape.txt", "denied", "is outside the paths granted"),
        ("{tree}/notes/escape-dir/secret.txt", "denied", "is outside the paths granted"),
        ("../../etc/passwd", "error", "the path must be absolute, got '../../etc/passwd'"),
        ("notes/q3.txt", "error", "must be absolute"),
        ("{tree}/notes/q3.txt\u0000.png", "error", "NUL character"),
        ("{tree}/notes/nothing.txt", "error", "no such file or directory"),
        ("{tree}/elsewhere/nothing.txt", "denied", "is outside the paths granted"),
        ("{tree}/notes/big.txt", "error", "is larger than 1,000 bytes; read_file stops there"),
        ("{tree}/notes/binary.bin", "error", "is not UTF-8 text (byte 0)"),
        ("{tree}/notes/sub", "error", "is a directory; use list_dir"),
        ("{tree}/notes/pipe", "error", "is not a regular file"),
    ],
)
async def test_read_file_refusals(tree: Path, path: str, status: str, says: str) -> None:
    grant = paths_grant("read_file", f"{tree}/notes/**")
    output = await run("read_file", grant, path=path.format(tree=tree))
    assert output.status == status
    assert says in output.content
    assert "the password" not in output.content


async def test_list_dir(tree: Path) -> None:
    grant = paths_grant("list_dir", f"{tree}/notes/**")
    listed = await run("list_dir", grant, path=f"{tree}/notes")
    assert listed.status == "ok"
    assert listed.content.splitlines() == [
        f"{tree}/notes: 8 entries",
        "big.txt (1,001 bytes)",
        "binary.bin (2 bytes)",
        "escape-dir@",
        "… and 5 more",
    ]
    (tree / "notes" / "sub" / "evil\nq3.txt (1 bytes)").write_text("x")
    odd = await run("list_dir", grant, path=f"{tree}/notes/sub")
    assert odd.content.splitlines() == [
        f"{tree}/notes/sub: 1 entries",
        '"evil\\nq3.txt (1 bytes)" (1 bytes)',
    ]
    escaped = await run("list_dir", grant, path=f"{tree}/notes/escape-dir")
    assert escaped.status == "denied"
    not_dir = await run("list_dir", grant, path=f"{tree}/notes/q3.txt")
    assert not_dir.content.endswith("is not a directory; use read_file")


async def test_other_tools_are_not_run_locally() -> None:
    runtime = LocalRuntime(LIMITS)
    grant = parse_grant(
        "shell",
        b'tool = "shell"\nmode = "auto"\nmax_taint = "private"\nresult_class = "private"\n'
        b"untrusted = false\n",
    )
    shell = call("shell")
    refusal = await runtime.check(shell, grant)
    assert refusal is not None
    assert "the local runtime has no tool 'shell'" in refusal.content
    assert (await runtime.run(shell, grant)).status == "error"


# -- http_fetch -------------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append(self.path)
        routes = self.server.routes
        status, headers, body = routes.get(self.path, (404, {}, b"no such page"))
        if self.path == "/slow":
            self.server.release.wait(5)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if self.path != "/unsized":
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[str] = []
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.release = threading.Event()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def servers() -> Iterator[tuple[_Server, _Server]]:
    started = (_Server(), _Server())
    for server in started:
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    granted, other = started
    text = {"Content-Type": "text/plain; charset=utf-8"}
    granted.routes.update(
        {
            "/page": (200, text, "a page ✓".encode()),
            "/latin": (200, {"Content-Type": "text/plain; charset=latin-1"}, b"caf\xe9"),
            "/big": (200, text, b"x" * 2001),
            "/unsized": (200, text, b"x" * 2001),
            "/fits": (200, text, b"x" * 2000),
            "/image": (200, {"Content-Type": "image/png"}, b"\x89PNG"),
            "/gone": (410, text, b"gone"),
            "/in": (302, {"Location": "/page"}, b""),
            "/out": (302, {"Location": f"{other.base}/page"}, b""),
            "/ftp": (302, {"Location": "ftp://127.0.0.1/page"}, b""),
            "/loop": (302, {"Location": "/loop"}, b""),
            "/slow": (200, text, b"late"),
        }
    )
    other.routes["/page"] = (200, text, b"must not be fetched")
    try:
        yield granted, other
    finally:
        for server in started:
            server.release.set()
            server.shutdown()
            server.server_close()


async def test_http_fetch_on_a_granted_host(servers: tuple[_Server, _Server]) -> None:
    granted, _ = servers
    grant = hosts_grant(granted.host)
    fetched = await run("http_fetch", grant, url=f"{granted.base}/page")
    assert fetched == RunOutput("ok", "a page ✓", FETCHED)
    assert (await run("http_fetch", grant, url=f"{granted.base}/latin")).content == "café"
    followed = await run("http_fetch", grant, url=f"{granted.base}/in")
    assert followed.content == "a page ✓"
    assert granted.seen == ["/page", "/latin", "/in", "/page"]


@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("{other}/page", "denied", "is not among the hosts granted by web"),
        ("http://127.0.0.1/page", "denied", "127.0.0.1 is not among the hosts granted"),
        ("http://localhost:{port}/page", "denied", "is not among the hosts granted"),
        ("{base}/out", "denied", "redirects to {other}/page, not followed"),
        ("{base}/ftp", "error", "only http and https URLs are fetched"),
        ("{base}/loop", "error", "redirects more than 5 times; gave up"),
        ("{base}/big", "error", "is larger than 2,000 bytes; http_fetch stops there"),
        ("{base}/image", "error", "is image/png, not text"),
        ("{base}/gone", "error", "answered HTTP 410 Gone"),
        ("file:///etc/passwd", "error", "only http and https URLs are fetched"),
        ("ftp://127.0.0.1:{port}/page", "error", "only http and https"),
        ("http://user:pw@127.0.0.1:{port}/page", "error", "user name or password"),
        ("127.0.0.1:{port}/page", "error", "only http and https"),
        ("http:///page", "error", "has no host"),
    ],
)
async def test_http_fetch_refusals(
    servers: tuple[_Server, _Server], url: str, status: str, says: str
) -> None:
    granted, other = servers
    port = granted.server_address[1]
    fmt = {"base": granted.base, "other": other.base, "port": port}
    output = await run("http_fetch", hosts_grant(granted.host), url=url.format(**fmt))
    assert output.status == status
    assert says.format(**fmt) in output.content
    assert other.seen == []


# Stopping mid-body leaves httpx's inner async generators unexhausted; trio reports them
# when they are collected (encode/httpx#3686). The response itself is closed.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_body_without_a_length_is_cut_at_the_cap(servers: tuple[_Server, _Server]) -> None:
    granted, _ = servers
    grant = hosts_grant(granted.host)
    cut = await run("http_fetch", grant, url=f"{granted.base}/unsized")
    assert cut == RunOutput(
        "error",
        f"{granted.base}/unsized is larger than 2,000 bytes; http_fetch stops there",
        FETCHED,
    )
    assert (await run("http_fetch", grant, url=f"{granted.base}/fits")).content == "x" * 2000


async def test_http_fetch_gives_up_at_its_deadline(servers: tuple[_Server, _Server]) -> None:
    granted, _ = servers
    limits = LocalLimits(fetch_timeout_s=0.2)
    runtime = LocalRuntime(limits)
    with trio.fail_after(CAP_S):
        output = await runtime.run(
            call("http_fetch", url=f"{granted.base}/slow"), hosts_grant(granted.host)
        )
    assert output == RunOutput("error", "http_fetch gave up after 0.2 s", FETCHED)


async def test_nothing_listens_there(servers: tuple[_Server, _Server]) -> None:
    granted, _ = servers
    granted.shutdown()
    granted.server_close()
    output = await run("http_fetch", hosts_grant(granted.host), url=f"{granted.base}/page")
    assert output.status == "error"
    assert output.content.startswith(f"cannot fetch {granted.base}/page")
