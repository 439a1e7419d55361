"""The memory directory: created, read fresh, and never left half-written.

Whole files are written to a temporary file in the same directory, fsynced, renamed
over the target, and the directory fsynced. Append-only files (archive.md, the edit
journal, the recall log) get whole records in one `write` on an O_APPEND descriptor.
Nothing here caches what it read: the owner may edit the files at any time.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime
from pathlib import Path

import entries
import proto
from proto import MemoryFile

__all__ = [
    "FILE_NAMES",
    "MemoryDir",
    "MemoryUnavailable",
    "StartError",
    "ensure_private_dir",
]

FILE_NAMES = ("soul.md", "memory.md", "user.md", "archive.md")


class StartError(proto.StartFailed):
    """The home cannot be used: memoryd refuses to start (runbook memoryd-start-failed)."""


class MemoryUnavailable(Exception):
    """A memory file is unreadable, unparsable or over its limit (runbook memory-unavailable)."""


def ensure_private_dir(path: Path) -> None:
    """Create `path` as a 0700 directory if missing; refuse a non-directory in its place."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        raise StartError(f"{path} exists and is not a directory") from None
    except OSError as exc:
        raise StartError(f"cannot create {path}: {exc.strerror}") from exc
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode):
        raise StartError(f"{path} exists and is not a directory")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)


class MemoryDir:
    """`{home}/memory`: soul.md, memory.md, user.md, archive.md, edits/, recalls/."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.edits = root / "edits"
        self.recalls = root / "recalls"

    def path(self, name: str) -> Path:
        """The path of one of `FILE_NAMES`."""
        return self.root / name

    def ensure(self, soul_starter: Path) -> list[str]:
        """Create what is missing (never overwrite); return the names created."""
        ensure_private_dir(self.root)
        self._remove_stale_temporaries()
        created = []
        for name in FILE_NAMES:
            target = self.path(name)
            if target.exists() or target.is_symlink():
                if not target.is_file():
                    raise StartError(f"{target} exists and is not a regular file")
                continue
            if name == "soul.md":
                self._copy_starter(soul_starter, target)
            else:
                self._create_empty(target)
            created.append(name)
        return created

    def _remove_stale_temporaries(self) -> None:
        # A crash between writing a temporary file and renaming it leaves the temporary
        # behind; the real file is intact, so the leftover is only litter.
        for leftover in self.root.glob(".*.tmp"):
            if leftover.is_file():
                leftover.unlink(missing_ok=True)

    def _create_empty(self, target: Path) -> None:
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            return  # created meanwhile, by the owner: theirs wins
        except OSError as exc:
            raise StartError(f"cannot create {target}: {exc.strerror}") from exc
        os.close(fd)

    def _copy_starter(self, starter: Path, target: Path) -> None:
        try:
            text = starter.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise StartError(
                f"soul.md is missing and the starter {starter} cannot be read: {reason} "
                "(set [memory] soul_starter, or write soul.md yourself)"
            ) from exc
        if len(text.strip()) > entries.SOUL_LIMIT:
            raise StartError(
                f"the starter {starter} is {len(text.strip()):,} characters; "
                f"soul.md allows {entries.SOUL_LIMIT:,}"
            )
        try:
            proto.write_atomically(target, text.encode())
        except OSError as exc:
            raise StartError(f"cannot create {target}: {exc.strerror}") from exc

    def read(self, name: str) -> str:
        """The text of one file, read now; `MemoryUnavailable` if it cannot be read."""
        path = self.path(name)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MemoryUnavailable(f"{name} is missing (restart memoryd to recreate it)") from None
        except UnicodeDecodeError as exc:
            raise MemoryUnavailable(f"{name} is not valid UTF-8 (byte {exc.start})") from None
        except OSError as exc:
            raise MemoryUnavailable(f"{name} cannot be read: {exc.strerror}") from None

    def read_soul(self) -> str:
        """soul.md, trimmed, within its limit."""
        soul = self.read("soul.md").strip()
        if len(soul) > entries.SOUL_LIMIT:
            raise MemoryUnavailable(
                f"soul.md is {len(soul):,} of {entries.SOUL_LIMIT:,} characters; shorten it by hand"
            )
        return soul

    def read_entries(self, file: MemoryFile) -> tuple[str, ...]:
        """The entries of memory.md or user.md as they are now, parsed and within the limit."""
        name = entries.file_name(file)
        try:
            current = entries.parse(self.read(name), name=name)
        except entries.ParseError as exc:
            raise MemoryUnavailable(str(exc)) from None
        size, limit = entries.chars(current), entries.limit_for(file)
        if size > limit:
            raise MemoryUnavailable(
                f"{name} is {size:,} of {limit:,} characters (edited by hand?); "
                "bring it under the limit by hand"
            )
        return current

    def write_entries(self, file: MemoryFile, new: tuple[str, ...]) -> None:
        """Replace memory.md or user.md with `new`, atomically."""
        proto.write_atomically(self.path(entries.file_name(file)), entries.render(new).encode())

    def append_archive(self, records: str) -> None:
        """Append moved entries (already rendered) to archive.md in one write."""
        if records:
            proto.append_line(self.path("archive.md"), records.encode())

    def append_journal(self, line: str, now: datetime) -> None:
        """Append one journal line to `edits/YYYY-MM.jsonl`; `OSError` if it cannot be.

        An edit is applied by the time its line is written, so every failure here is an
        `OSError` the caller can report as a missing line, never as a failed edit.
        """
        self.edits.mkdir(mode=0o700, exist_ok=True)
        proto.append_line(proto.month_file(self.edits, now), line.encode())
