"""Writing files so that a crash never leaves one half-written (STYLE.md).

Whole files go to a temporary file in the same directory, are fsynced, renamed over the
target, and the directory is fsynced. Append-only logs get whole lines in one `write`
on an O_APPEND descriptor, then an fsync; a short write is cut back, and a line torn by a
crash is ended before the next is written, so a reader only ever sees whole lines, lines
that are fragments of a torn write, or a final line without its newline.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

__all__ = [
    "append_line",
    "dir_mode",
    "file_mode",
    "fsync_dir",
    "given_to_group",
    "shared_with_group",
    "write_atomically",
]


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def given_to_group(mode: int) -> bool:
    """Whether a directory of `mode` was given to a group: r-x for it, nothing for others."""
    return mode & 0o050 == 0o050 and not mode & 0o007


def shared_with_group(directory: Path) -> bool:
    """Whether the installer gave `directory` to a group to read.

    Then what a role writes there is readable by that group too. Under one user every
    directory is 0700 and this is False. Where roles run as their own users
    (docs/install.md), memoryd reads loopd's sessions and the owner the audit log through
    such a group.
    """
    return given_to_group(stat.S_IMODE(directory.stat().st_mode))


def file_mode(directory: Path) -> int:
    """The mode of a new file in `directory`: 0600, or 0640 in a directory given to a group."""
    return 0o640 if shared_with_group(directory) else 0o600


def dir_mode(parent: Path) -> int:
    """The mode of a new directory in `parent`: 0700, or 0750 in a directory given to a group.

    The group itself comes from the parent: the installer makes it set-group-id
    (docs/install.md), and the kernel passes that on to what is made inside.
    """
    return 0o750 if shared_with_group(parent) else 0o700


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: temporary file, fsync, rename, fsync dir.

    The file is 0600 (0640 in a directory given to a group, `file_mode`).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        mode = file_mode(path.parent)
        if mode != 0o600:
            os.fchmod(fd, mode)  # mkstemp made it 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def append_line(path: Path, line: bytes) -> os.stat_result:
    """Append one whole line (a newline is added if missing) in one write, then fsync.

    A file that ends without its newline holds a line torn by a crash (a process killed
    in the middle of its write): that fragment is ended with a newline first, never
    rewritten, so it stays a line of its own that readers skip, and the new line is whole.
    Returns the file's status just after the write (its size, its modification time).
    """
    data = line if line.endswith(b"\n") else line + b"\n"
    mode = file_mode(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, mode)
    try:
        size = os.fstat(fd).st_size
        if size == 0 and stat.S_IMODE(os.fstat(fd).st_mode) != mode:
            os.fchmod(fd, mode)  # a umask cut it
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):
            os.ftruncate(fd, size)
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
        return os.fstat(fd)
    finally:
        os.close(fd)
