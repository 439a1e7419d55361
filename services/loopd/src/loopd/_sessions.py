"""Session files: the baseline written once, the log appended one record per line.

`sessions/<id>/0.baseline.json` is written atomically when the session is created and
never again; a resumed session replays it byte for byte. `sessions/<id>/0.jsonl` gets
one record per line, appended and flushed; nothing in it is ever rewritten. A log whose
last line was torn by a crash gets a newline before the next record, so the fragment
stays a line of its own that readers skip, and no whole record is lost.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec

import proto
from proto import Baseline, Label, SessionRecord, ToolResultRecord

__all__ = ["Session", "SessionStore", "new_session_id", "utc_timestamp"]

log = logging.getLogger("loopd.sessions")

_encoder = msgspec.json.Encoder()
_record_decoder = msgspec.json.Decoder(SessionRecord)
_baseline_decoder = msgspec.json.Decoder(Baseline)
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"


def new_session_id() -> str:
    """`chat-` and 26 random lowercase base32 characters."""
    return "chat-" + "".join(secrets.choice(_BASE32) for _ in range(26))


def utc_timestamp(now: datetime | None = None) -> str:
    """UTC, ISO 8601 with seconds and `Z`."""
    return (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Session:
    """A session as read from its files."""

    id: str
    directory: Path
    baseline: Baseline
    records: list[SessionRecord]

    @property
    def log_path(self) -> Path:
        """`0.jsonl`."""
        return self.directory / "0.jsonl"

    def taint(self) -> Label:
        """The join of the labels of every tool result so far (public and trusted if none)."""
        label = Label(class_=proto.Class.public, untrusted=False)
        for record in self.records:
            if isinstance(record, ToolResultRecord):
                label = label.join(Label(class_=record.class_, untrusted=record.untrusted))
        return label

    def append(self, record: SessionRecord) -> None:
        """Append one record as one whole line, flushed, and keep it in `records`."""
        line = _encoder.encode(record) + b"\n"
        fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        try:
            if _ends_torn(fd):
                line = b"\n" + line  # terminate a torn fragment; never rewrite it
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.records.append(record)


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


class SessionStore:
    """`{home}/sessions`: creating and loading sessions, never trusting an id."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def directory(self, session: str) -> Path:
        """The directory of a valid session id (anything else is refused first)."""
        return self.root / proto.check_session_id(session)

    def exists(self, session: str) -> bool:
        """Whether the session has a baseline."""
        return (self.directory(session) / "0.baseline.json").is_file()

    def create(self, session: str, baseline: Baseline) -> Session:
        """Write a new session's directory, baseline and empty log; refuse an existing one."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory = self.directory(session)
        directory.mkdir(mode=0o700)  # FileExistsError: the caller checked; a race lost
        proto.write_atomically(directory / "0.baseline.json", _encoder.encode(baseline))
        os.close(os.open(directory / "0.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        proto.fsync_dir(directory)
        proto.fsync_dir(self.root)
        return Session(session, directory, baseline, [])

    def load(self, session: str) -> Session:
        """Read a session's baseline and every whole record of its log."""
        directory = self.directory(session)
        baseline = _baseline_decoder.decode((directory / "0.baseline.json").read_bytes())
        path = directory / "0.jsonl"
        records: list[SessionRecord] = []
        data = path.read_bytes() if path.exists() else b""
        lines = data.split(b"\n")
        if lines[-1]:
            log.warning(
                "%s ends in a torn line (%d bytes); it is kept and skipped", path, len(lines[-1])
            )
        for number, line in enumerate(lines[:-1], start=1):
            if not line:
                continue
            try:
                records.append(_record_decoder.decode(line))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("%s line %d is not a record (%s); skipped", path, number, exc)
        return Session(session, directory, baseline, records)

    def list(self) -> list[str]:
        """Every session id with a baseline, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if stat.S_ISDIR(p.lstat().st_mode) and (p / "0.baseline.json").is_file()
        )
