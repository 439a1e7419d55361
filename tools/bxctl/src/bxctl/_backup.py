"""`bxctl backup DEST`: a consistent copy of a home while its roles run (docs/your-data.md).

The copy is made in a new folder beside DEST and renamed to DEST only when whole, so a
backup that was cut off is never taken for one that is not. The order is what makes it
consistent without stopping anything:

1. the recall index first, through SQLite's backup API (a snapshot of one moment, its
   `-wal` folded in): the log offsets it records are then never past the copies of the
   logs taken after it, so memoryd on the restored home only catches up;
2. the audit head before the month files: the head never vouches for records the copy
   lacks (records past the head are a crash between a record and its head, which brokerd
   accepts);
3. the edit journal before memory.md and user.md, and those before archive.md: the
   reverse of the order memoryd writes them in, so the copy is a state a crash could leave;
4. a session's baselines before its logs; the rest in any order.

Append-only logs are copied up to their size when opened, cut after the last whole line
(a reader skips a torn last line anyway). Every other file is replaced atomically by its
writer, so an open file is one whole version. Sockets (`run/`) and writers' temporary
files are left out. Modes are kept: the copy holds the keys, so it is as secret as the home.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._common import CommandError, inline

__all__ = ["backup"]

INDEX_SUFFIX = ".sqlite3"
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
LINE_LOGS = (".jsonl", "head", "chat_history")
"""Files written only by appending whole lines: copied up to their last whole line."""
SKIPPED_DIRS = ("run",)
CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, kw_only=True)
class Copied:
    """What a backup holds: files and bytes copied, and what it left out."""

    files: int
    bytes: int
    skipped: list[str]


def backup(home: Path, dest: Path) -> int:
    """Copy `home` to `dest` (which must not exist); print what was copied."""
    home = home.resolve()
    dest = dest.expanduser().absolute()
    if dest.exists():
        raise CommandError(f"{inline(str(dest))} exists already; name a new folder")
    if dest.resolve().is_relative_to(home):
        raise CommandError(f"{inline(str(dest))} is inside the home; name a folder outside it")
    if not dest.parent.is_dir():
        raise CommandError(f"{inline(str(dest.parent))} is not a folder")
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent))
    try:
        copied = copy_home(home, staging, progress=sys.stderr.isatty())
        _portable_configs(home, staging)
        os.chmod(staging, 0o700)
        os.replace(staging, dest)
    except BaseException:
        _remove_tree(staging)
        raise
    print(f"backed up {home} to {dest}: {copied.files} files, {_size(copied.bytes)}")
    for name in copied.skipped:
        print(f"  left out {name}")
    print(
        "it holds the home's keys and secrets: keep it like the home (mode 0700); "
        "restore: docs/your-data.md#restore"
    )
    return 0


def copy_home(home: Path, dest: Path, *, progress: bool = False) -> Copied:
    """Copy every file of `home` into the existing folder `dest`, in the order above."""
    folders, files, skipped = _walk(home)
    for folder in sorted(folders):  # parents first: empty ones too, with their modes
        _make_parents(home, dest / folder.relative_to(home), dest)
    total = sum(_size_of(path) for path in files)
    done_bytes = 0
    done_files = 0
    for path in sorted(files, key=lambda p: _rank(p.relative_to(home))):
        target = dest / path.relative_to(home)
        _make_parents(home, target.parent, dest)  # a folder made since the walk
        if path.name.endswith(INDEX_SUFFIX):
            written = _copy_index(path, target)
        else:
            written = _copy_file(path, target, whole_lines=_is_line_log(path))
        if written is None:
            continue  # gone since the walk (a session deleted, a temp file renamed)
        done_files += 1
        done_bytes += written
        if progress:
            print(
                f"\rcopied {done_files}/{len(files)} files, {_size(done_bytes)} of {_size(total)}",
                end="",
                file=sys.stderr,
                flush=True,
            )
    if progress:
        print(file=sys.stderr)
    return Copied(files=done_files, bytes=done_bytes, skipped=skipped)


def _walk(home: Path) -> tuple[list[Path], list[Path], list[str]]:
    """The folders and regular files of `home` to copy, and what is left out (named)."""
    folders: list[Path] = []
    files: list[Path] = []
    skipped: list[str] = []
    for path in _entries(home):
        name = str(path.relative_to(home))
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            continue
        if name in SKIPPED_DIRS:
            skipped.append(f"{name}/ (sockets: each role makes its own at start)")
        elif stat.S_ISDIR(mode):
            folders.append(path)
        elif not stat.S_ISREG(mode):
            skipped.append(f"{name} (not a regular file)")
        elif path.name.endswith(SQLITE_SIDE_FILES) or _is_temporary(path.name):
            continue  # folded into the index's copy, or a writer's half-made file
        else:
            files.append(path)
    return folders, files, skipped


def _entries(home: Path) -> Iterator[Path]:
    """Every path under `home`, `run/` itself named but not entered."""
    for directory, subdirs, names in os.walk(home):
        here = Path(directory)
        if here == home:
            for skipped in [d for d in subdirs if d in SKIPPED_DIRS]:
                subdirs.remove(skipped)
                yield here / skipped
        for name in subdirs:
            yield here / name
        for name in names:
            yield here / name


def _is_temporary(name: str) -> bool:
    return name.startswith(".") and (name.endswith(".tmp") or ".partial" in name)


def _is_line_log(path: Path) -> bool:
    return path.name.endswith(LINE_LOGS)


def _rank(relative: Path) -> tuple[int, str]:
    """Where a file comes in the copy: see the module's docstring for why."""
    parts = relative.parts
    name = relative.name
    if name.endswith(INDEX_SUFFIX):
        rank = 0
    elif parts[0] == "audit":
        rank = 1 if parts[1:] == ("head",) else 2
    elif parts[0] == "memory" and len(parts) > 2 and parts[1] in ("edits", "recalls"):
        rank = 3
    elif parts[0] == "memory" and name in ("memory.md", "user.md"):
        rank = 4
    elif parts[0] == "memory" and name == "archive.md":
        rank = 5
    elif parts[0] == "sessions" and name.endswith(".baseline.json"):
        rank = 6
    elif parts[0] == "sessions":
        rank = 7
    else:
        rank = 8
    return rank, str(relative)


def _make_parents(home: Path, directory: Path, dest: Path) -> None:
    """Make `directory` under `dest` and its parents, each with its source folder's mode."""
    missing = []
    while directory != dest and not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for made in reversed(missing):
        source = home / made.relative_to(dest)
        made.mkdir(mode=0o700)
        os.chmod(made, stat.S_IMODE(source.stat().st_mode))


def _copy_file(source: Path, target: Path, *, whole_lines: bool) -> int | None:
    """Copy what `source` holds now (up to its last whole line for a log); bytes written."""
    try:
        reading = open(source, "rb")  # noqa: SIM115 (closed below, with the target)
    except FileNotFoundError:
        return None
    with reading:
        status = os.fstat(reading.fileno())
        left = status.st_size
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as writing:
            last_line_end = 0
            written = 0
            while left > 0:
                chunk = reading.read(min(CHUNK_BYTES, left))
                if not chunk:
                    break  # shortened meanwhile (a forget rewrote it): what was read is whole
                writing.write(chunk)
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    last_line_end = written + newline + 1
                written += len(chunk)
                left -= len(chunk)
            if whole_lines and last_line_end != written:
                writing.truncate(last_line_end)
                written = last_line_end
            writing.flush()
            os.fsync(writing.fileno())
        os.chmod(target, stat.S_IMODE(status.st_mode))
    return written


def _copy_index(source: Path, target: Path) -> int | None:
    """The index as one SQLite snapshot, through the backup API (its WAL folded in)."""
    import sqlean

    if not source.exists():
        return None
    reading = sqlean.connect(f"{source.as_uri()}?mode=ro", uri=True)
    try:
        writing = sqlean.connect(target)
        try:
            reading.backup(writing)
        finally:
            writing.close()
    except sqlean.Error as exc:
        raise CommandError(
            f"the recall index {source} could not be copied: {exc}; leave it out by moving "
            f"it away (memoryd rebuilds it from the logs), or see "
            f"docs/runbook.md#memory-index-damaged"
        ) from None
    finally:
        reading.close()
    os.chmod(target, stat.S_IMODE(source.stat().st_mode))
    return target.stat().st_size


def _portable_configs(home: Path, dest: Path) -> None:
    """Point each copied config's `[paths] home` at its own home, wherever it is put.

    `bxctl init` writes the home's absolute path there; a copy that kept it would, restored
    anywhere else, run its roles on the original home. `..` (next to `config/`) is the
    copy's own folder, at its place now and after a move.
    """
    import tomlkit

    import proto

    for path in sorted((dest / "config").glob("*.toml")):
        document = tomlkit.parse(path.read_text())
        paths = document.get("paths")
        if not isinstance(paths, dict) or not isinstance(paths.get("home"), str):
            continue
        configured = paths["home"]
        if proto.config_home(configured, home / "config") != home:
            continue  # a home named elsewhere on purpose: the owner's to change
        paths["home"] = ".."
        _write_kept_mode(path, tomlkit.dumps(document))


def _write_kept_mode(path: Path, text: str) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    with open(fd, "w") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(path, mode)


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _size(count: int) -> str:
    if count < 1000:
        return f"{count} bytes"
    scaled = count / 1000
    for unit in ("kB", "MB"):
        if scaled < 1000:
            return f"{scaled:.1f} {unit}"
        scaled /= 1000
    return f"{scaled:.1f} GB"


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
