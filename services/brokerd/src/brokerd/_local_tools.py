"""The local runtime: `read_file`, `list_dir` and `http_fetch`, run in-process with caps.

A path is resolved with every symlink followed and must then match the grant's `paths`;
the file is opened without following a final symlink, and the path of what was actually
opened (from /proc/self/fd) is checked again, so a symlink swapped in between leads
nowhere. File system work runs in a worker thread under a deadline; http_fetch is
`_fetch`'s.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from collections.abc import Callable
from functools import partial
from typing import NoReturn, TypeVar

import msgspec
import trio

from proto import (
    Class,
    HttpFetchArgs,
    Label,
    ListDirArgs,
    MemoryArgs,
    ReadFileArgs,
    RecallArgs,
)

from ._approvals import format_duration
from ._arguments import OtherArgs
from ._fetch import check_url, http_fetch
from ._grants import Grant
from ._paths import inside
from ._runtimes import Refusal, RunOutput, RunRequest

__all__ = ["LOCAL_TOOLS", "LocalLimits", "LocalRuntime"]

T = TypeVar("T")

LOCAL_TOOLS = frozenset({"read_file", "list_dir", "http_fetch"})

FETCHED = Label(class_=Class.public, untrusted=True)
"""A fetched page is untrusted whatever its grant says: it is where injected text comes from."""


@dataclasses.dataclass(frozen=True)
class LocalLimits:
    """The caps of the local tools."""

    read_max_bytes: int = 256 * 1024
    list_max_entries: int = 1000
    file_timeout_s: float = 10.0
    fetch_max_bytes: int = 1 << 20
    fetch_timeout_s: float = 10.0
    fetch_max_redirects: int = 5


class LocalRuntime:
    """Runs the three local tools; refuses any other."""

    def __init__(self, limits: LocalLimits | None = None) -> None:
        self.limits = limits or LocalLimits()

    async def check(self, request: RunRequest, grant: Grant) -> RunOutput | None:
        """Refuse what cannot run before the owner is asked: a path or URL outside the grant."""
        try:
            match request.arguments.value:
                case ReadFileArgs(path=path) | ListDirArgs(path=path):
                    await self._in_thread(request.tool, partial(_resolve, path, grant))
                case HttpFetchArgs(url=url):
                    check_url(url, grant.hosts, grant.name)
                case other:
                    _not_local(request.tool, other)
        except Refusal as refusal:
            return refusal.output
        return None

    async def run(self, request: RunRequest, grant: Grant) -> RunOutput:
        """Run the call; every check is made again, now."""
        limits = self.limits
        tool = request.tool
        try:
            match request.arguments.value:
                case ReadFileArgs(path=path):
                    return await self._in_thread(tool, partial(_read_file, path, grant, limits))
                case ListDirArgs(path=path):
                    return await self._in_thread(tool, partial(_list_dir, path, grant, limits))
                case HttpFetchArgs(url=url):
                    return await self._fetch(url, grant)
                case other:
                    _not_local(tool, other)
        except Refusal as refusal:
            return refusal.output

    async def _fetch(self, url: str, grant: Grant) -> RunOutput:
        limits = self.limits
        with trio.move_on_after(limits.fetch_timeout_s):
            output = await http_fetch(
                url,
                grant,
                max_bytes=limits.fetch_max_bytes,
                max_redirects=limits.fetch_max_redirects,
            )
            return dataclasses.replace(output, label=FETCHED)
        waited = format_duration(limits.fetch_timeout_s)
        return RunOutput("error", f"http_fetch gave up after {waited}", FETCHED)

    async def _in_thread(self, tool: str, work: Callable[[], T]) -> T:
        """`work`'s result, from a worker thread; a `Refusal` if it takes too long."""
        with trio.move_on_after(self.limits.file_timeout_s):
            return await trio.to_thread.run_sync(work, abandon_on_cancel=True)
        waited = format_duration(self.limits.file_timeout_s)
        raise Refusal(RunOutput("error", f"{tool} gave up after {waited}"))


def _not_local(tool: str, value: RecallArgs | MemoryArgs | OtherArgs) -> NoReturn:
    """Refuse a tool the local runtime does not run (a grant of another tool sent here).

    `value`'s type is what the matches above leave: a local tool they miss is a type error.
    """
    del value
    raise Refusal(
        RunOutput(
            "error",
            f"the local runtime has no tool {tool!r} (it runs read_file, list_dir, http_fetch)",
        )
    )


def _resolve(path: str, grant: Grant) -> str:
    """The path with every symlink resolved, if it lies inside the grant's paths.

    Raises:
        Refusal: it does not, or cannot be resolved.
    """
    if "\0" in path:
        raise Refusal(RunOutput("error", "the path contains a NUL character"))
    if not path.startswith("/"):
        raise Refusal(RunOutput("error", f"the path must be absolute, got {path!r}"))
    try:
        real = os.path.realpath(path)
    except OSError as exc:
        raise Refusal(RunOutput("error", f"cannot resolve {path!r}: {exc.strerror}")) from None
    if not inside(real, grant.paths):
        raise Refusal(RunOutput("denied", f"{path!r} is outside the paths granted by {grant.name}"))
    return real


def _open_inside(path: str, grant: Grant, flags: int) -> int:
    """Open a path inside the grant; the caller closes the descriptor.

    Raises:
        Refusal: it is outside, or cannot be opened.
    """
    real = _resolve(path, grant)
    try:
        fd = os.open(real, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise Refusal(RunOutput("error", f"no such file or directory: {path!r}")) from None
    except NotADirectoryError:
        raise Refusal(RunOutput("error", f"{path!r} is not a directory; use read_file")) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            changed = RunOutput("denied", f"{path!r} changed while it was being opened")
            raise Refusal(changed) from None
        raise Refusal(RunOutput("error", f"cannot open {path!r}: {exc.strerror}")) from None
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as exc:
        os.close(fd)
        unchecked = RunOutput("error", f"cannot check what {path!r} is: {exc.strerror}")
        raise Refusal(unchecked) from None
    if not inside(opened, grant.paths):
        os.close(fd)
        raise Refusal(RunOutput("denied", f"{path!r} is outside the paths granted by {grant.name}"))
    return fd


def _read_file(path: str, grant: Grant, limits: LocalLimits) -> RunOutput:
    fd = _open_inside(path, grant, os.O_RDONLY)
    cap = limits.read_max_bytes
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            return RunOutput("error", f"{path!r} is a directory; use list_dir")
        if not stat.S_ISREG(mode):
            return RunOutput("error", f"{path!r} is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= cap and (chunk := os.read(fd, cap + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return RunOutput("error", f"cannot read {path!r}: {exc.strerror}")
    finally:
        os.close(fd)
    if size > cap:
        return RunOutput("error", f"{path!r} is larger than {cap:,} bytes; read_file stops there")
    try:
        return RunOutput("ok", b"".join(chunks).decode("utf-8"))
    except UnicodeDecodeError as exc:
        return RunOutput("error", f"{path!r} is not UTF-8 text (byte {exc.start})")


def _list_dir(path: str, grant: Grant, limits: LocalLimits) -> RunOutput:
    fd = _open_inside(path, grant, os.O_RDONLY | os.O_DIRECTORY)
    lines: list[str] = []
    try:
        with os.scandir(fd) as found:
            listed = sorted(found, key=lambda e: e.name)
        for entry in listed[: limits.list_max_entries]:
            name = _show(entry.name)
            if entry.is_symlink():
                lines.append(f"{name}@")
            elif entry.is_dir(follow_symlinks=False):
                lines.append(f"{name}/")
            elif entry.is_file(follow_symlinks=False):
                size = entry.stat(follow_symlinks=False).st_size
                lines.append(f"{name} ({size:,} bytes)")
            else:
                lines.append(f"{name} (not a file)")
    except OSError as exc:
        return RunOutput("error", f"cannot list {path!r}: {exc.strerror}")
    finally:
        os.close(fd)
    if not listed:
        return RunOutput("ok", f"{path}: empty")
    more = len(listed) - limits.list_max_entries
    if more > 0:
        lines.append(f"… and {more:,} more")
    return RunOutput("ok", f"{path}: {len(listed):,} entries\n" + "\n".join(lines))


def _show(name: str) -> str:
    # A file name may hold a newline or a control character: quoted, it cannot pose as
    # another line of the listing.
    return name if name.isprintable() else msgspec.json.encode(name).decode()
