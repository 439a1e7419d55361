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
import tempfile
from pathlib import Path

__all__ = ["append_line", "fsync_dir", "write_atomically"]


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` (mode 0600): temporary file, fsync, rename, fsync dir."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
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


def append_line(path: Path, line: bytes) -> None:
    """Append one whole line (a newline is added if missing) in one write, then fsync.

    A file that ends without its newline holds a line torn by a crash (a process killed
    in the middle of its write): that fragment is ended with a newline first, never
    rewritten, so it stays a line of its own that readers skip, and the new line is whole.
    """
    data = line if line.endswith(b"\n") else line + b"\n"
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):
            os.ftruncate(fd, size)
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)
