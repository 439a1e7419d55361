"""proto.call against a serve_unix role, beside a bare trio Unix-socket round trip.

Both servers run in a child process and answer one small frame per connection; the
client side runs here. Printed: requests/s, p50 and p99, sequential and with 16
concurrent clients, and the ratio proto/bare. Target: proto within 1.5x of bare on p99
and throughput (the uid check, the kind allow-list and the error policy stay cheap).

    just bench sockets [--requests N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

import proto

SERVER = r"""
import os, sys
from pathlib import Path
import trio
import proto

kind, path = sys.argv[1], Path(sys.argv[2])
REPLY = proto.encode_frame(proto.MemoryBlockReply(text="x" * 64))

async def reply(request, conn):
    return proto.MemoryBlockReply(text="x" * 64)

async def bare_handler(stream):
    async with stream:
        header = b""
        while len(header) < 4:
            chunk = await stream.receive_some(4 - len(header))
            if not chunk:
                return
            header += chunk
        size = int.from_bytes(header, "big")
        body = b""
        while len(body) < size:
            body += await stream.receive_some(size - len(body))
        await stream.send_all(REPLY)

async def main():
    if kind == "proto":
        await proto.serve_unix(proto.LOOP_MEMORY, path, reply, shutdown=trio.Event())
    else:
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(os.fspath(path))
        sock.listen(128)
        await trio.serve_listeners(bare_handler, [trio.SocketListener(sock)])

trio.run(main)
"""

REQUEST = proto.encode_frame(proto.MemoryBlock())


async def _bare_call(path: Path) -> None:
    stream = await trio.open_unix_socket(os.fspath(path))
    async with stream:
        await stream.send_all(REQUEST)
        header = b""
        while len(header) < 4:
            header += await stream.receive_some(4 - len(header))
        size = int.from_bytes(header, "big")
        body = b""
        while len(body) < size:
            body += await stream.receive_some(size - len(body))


async def _proto_call(path: Path) -> None:
    await proto.call(path, proto.MemoryBlock(), proto.MemoryBlockReply)


async def _run(kind: str, path: Path, requests: int, clients: int) -> tuple[float, list[float]]:
    one = _proto_call if kind == "proto" else _bare_call
    latencies: list[float] = []
    per_client = requests // clients

    async def client() -> None:
        for _ in range(per_client):
            t0 = time.perf_counter()
            await one(path)
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(client)
    return time.perf_counter() - started, latencies


def _serve(kind: str, path: Path) -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", SERVER, kind, os.fspath(path)])
    deadline = time.monotonic() + 10
    while not path.exists():
        if time.monotonic() > deadline or child.poll() is not None:
            child.kill()
            raise SystemExit(f"the {kind} server did not start")
        time.sleep(0.01)
    return child


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str]) -> None:
    """Run the socket benchmark and print the table."""
    parser = argparse.ArgumentParser(prog="just bench sockets", description=__doc__)
    parser.add_argument("--requests", type=int, default=5000, help="requests per run")
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="bxb", dir="/tmp"))
    results: dict[tuple[str, int], tuple[float, float, float]] = {}
    try:
        for kind in ("bare", "proto"):
            path = directory / kind / "s.sock"
            path.parent.mkdir(mode=0o700)
            child = _serve(kind, path)
            try:
                trio.run(_run, kind, path, 200, 1)  # warm up
                for clients in (1, 16):
                    wall, lat = trio.run(_run, kind, path, args.requests, clients)
                    results[kind, clients] = (
                        len(lat) / wall,
                        _pct(lat, 0.50) * 1e6,
                        _pct(lat, 0.99) * 1e6,
                    )
            finally:
                child.kill()
                child.wait()
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    print(f"sockets: {args.requests:,} one-shot requests per run, server in a child process")
    print(f"{'clients':>7} {'':>6} {'req/s':>8} {'p50 µs':>8} {'p99 µs':>8}")
    for clients in (1, 16):
        for kind in ("bare", "proto"):
            rps, p50, p99 = results[kind, clients]
            print(f"{clients:>7} {kind:>6} {rps:>8,.0f} {p50:>8,.0f} {p99:>8,.0f}")
        bare, ours = results["bare", clients], results["proto", clients]
        print(
            f"{clients:>7} {'ratio':>6} {bare[0] / ours[0]:>7.2f}x {ours[1] / bare[1]:>7.2f}x"
            f" {ours[2] / bare[2]:>7.2f}x   (proto cost vs bare; target <= 1.5x)"
        )
