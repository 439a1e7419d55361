"""The audit log's two open files: the month file records go to, and the head file.

Both are append-only while brokerd runs, each held open (O_APPEND) so that a record costs
one `write` and a head one `write`, each made durable by one fsync:

- a record is a line of the month file; it is durable once the month file is fsynced;
- the head is a line appended to `audit/head`, and the last line is the head. It is
  appended only after the records it counts are fsynced, then fsynced itself, so a head
  on disk never counts a record that is not. When the file grows past
  `HEAD_COMPACT_BYTES` it is replaced (temporary file, fsync, rename, directory fsync) by
  its last line alone, as it is at every start.

What was written but not made durable can be cut back (`cut_back`): the month file to its
size at the last fsync, the head file to its last durable line. Each write is checked
against the file at its path first (its inode and the size brokerd left it at), so a
file replaced, cut or added to by someone else is reopened (the log) or reported (the
head) rather than written through a stale descriptor.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

import proto

__all__ = ["HEAD_COMPACT_BYTES", "AuditFiles", "month_files"]

log = logging.getLogger("brokerd.audit")

HEAD_COMPACT_BYTES = 256 * 1024
"""A head file longer than this is replaced by its last line (about a thousand heads)."""

_MONTH_FILE = re.compile(r"\d{4}-\d{2}\.jsonl")


def month_files(directory: Path) -> list[Path]:
    """The month files of the audit directory, oldest first (never the forget's notes)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _MONTH_FILE.fullmatch(p.name))


class AuditFiles:
    """The open month file and head file of one brokerd's audit log; blocking, one thread."""

    def __init__(self, head_path: Path) -> None:
        self.head_path = head_path
        self.log_path: Path | None = None
        self._log_fd: int | None = None
        self._log_ino = 0
        self._log_size = 0
        """The month file's size after brokerd's last write."""
        self._log_synced = 0
        """Its size at its last fsync."""
        self._log_kept = 0
        """Its size when the last head was made durable: what a cut back keeps."""
        self._head_fd: int | None = None
        self._head_ino = 0
        self._head_size = 0
        self._head_durable = 0
        """The head file's size at the end of its last durable line: what a cut back keeps."""
        self._head_line = b""
        """The last head line written: the one on disk, if nobody changed the file."""

    @property
    def unsynced(self) -> bool:
        """Whether the month file holds lines written since its last fsync."""
        return self._log_size != self._log_synced

    def write(self, path: Path, line: bytes) -> None:
        """Append `line` (without its newline) to the month file `path`, in one write.

        Raises:
            OSError: it could not be written; nothing of it is left in the file.
        """
        if self._log_fd is None or path != self.log_path or not self._log_unchanged(path):
            self._open_log(path)
        assert self._log_fd is not None
        data = line + b"\n"
        size = self._log_size
        written = os.write(self._log_fd, data)
        if written != len(data):
            os.ftruncate(self._log_fd, size)
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        self._log_size = size + written

    def sync(self, head_line: bytes) -> None:
        """Make every written line durable, then the head that counts them.

        Raises:
            OSError: the month file or the head could not be made durable; `cut_back`
                takes back what is not.
        """
        if self._log_fd is not None and self.unsynced:
            os.fsync(self._log_fd)
            self._log_synced = self._log_size
        if self._head_fd is None or self._head_size + len(head_line) > HEAD_COMPACT_BYTES:
            self.replace_head(head_line)
        else:
            size = self._head_size
            written = os.write(self._head_fd, head_line)
            self._head_size = size + written
            if written != len(head_line):
                raise OSError(
                    f"short write to {self.head_path}: {written} of {len(head_line)} bytes"
                )
            os.fsync(self._head_fd)
            self._head_durable, self._head_line = self._head_size, head_line
        self._log_kept = self._log_size

    def cut_back(self) -> bool:
        """Take back what was written since the last durable head; False if the head is unsure.

        The month file goes back to its size at that head (lines fsynced since, but not
        counted by a durable head, go too: brokerd's chain goes back to that head).

        A month file that cannot be cut is logged by the caller's next `verify` (its lines
        do not chain); a head that cannot be cut is closed, and the next head replaces it.
        """
        if self._log_fd is not None and self._log_size != self._log_kept:
            try:
                os.ftruncate(self._log_fd, self._log_kept)
                self._log_size = self._log_synced = self._log_kept
            except OSError as exc:
                log.error(
                    "audit lines that failed could not be cut back from %s (%s); verify will "
                    "name them (runbook: audit-unwritable)",
                    self.log_path,
                    exc,
                )
        if self._head_fd is None:
            return True
        if self._head_size == self._head_durable:
            return True
        try:
            os.ftruncate(self._head_fd, self._head_durable)
        except OSError:
            self.forget_head()
            return False
        self._head_size = self._head_durable
        return True

    def head_unchanged(self) -> bool:
        """Whether the file at the head's path is the one brokerd last wrote, as it left it."""
        if self._head_fd is None:
            return False
        try:
            status = os.stat(self.head_path)
        except FileNotFoundError:
            return False
        if status.st_ino != self._head_ino or status.st_size != self._head_size:
            return False
        tail = os.pread(self._head_fd, len(self._head_line), self._head_size - len(self._head_line))
        return tail == self._head_line

    def replace_head(self, head_line: bytes) -> None:
        """Replace the head file by `head_line` alone (atomically) and hold it open.

        Raises:
            OSError: it could not be replaced.
        """
        proto.write_atomically(self.head_path, head_line)
        self.forget_head()
        fd = os.open(self.head_path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        status = os.fstat(fd)
        self._head_fd, self._head_ino = fd, status.st_ino
        self._head_size = self._head_durable = status.st_size
        self._head_line = head_line

    def forget_head(self) -> None:
        """Close the head file: the next head replaces whatever is at its path."""
        if self._head_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._head_fd)
            self._head_fd = None

    def _log_unchanged(self, path: Path) -> bool:
        try:
            status = os.stat(path)
        except FileNotFoundError:
            return False
        return status.st_ino == self._log_ino and status.st_size == self._log_size

    def _open_log(self, path: Path) -> None:
        """Open the month file at `path`, ending a torn last line (never rewriting it).

        Raises:
            OSError: it cannot be opened, or a torn line cannot be ended.
        """
        if self._log_fd is not None and self.unsynced:
            os.fsync(self._log_fd)  # lines written to the file before it moved or changed
        self._close_log()
        mode = proto.file_mode(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, mode)
        try:
            status = os.fstat(fd)
            size = status.st_size
            if size == 0 and (status.st_mode & 0o777) != mode:
                os.fchmod(fd, mode)  # a umask cut it
            if size and os.pread(fd, 1, size - 1) != b"\n":
                size += os.write(fd, b"\n")
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._log_fd, self.log_path, self._log_ino = fd, path, status.st_ino
        self._log_size = self._log_synced = self._log_kept = size

    def _close_log(self) -> None:
        """Close the month file."""
        if self._log_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._log_fd)
            self._log_fd = None
