"""Session files: the baseline written once, the log appended one record per line.

`sessions/<id>/0.baseline.json` is written atomically when the session is created and
never again; a resumed session replays it byte for byte. `sessions/<id>/0.jsonl` gets
one record per line, appended and flushed; nothing in it is ever rewritten. A log whose
last line was torn by a crash gets a newline before the next record, so the fragment
stays a line of its own that readers skip, and no whole record is lost.

The files' formats and the session's label rule are proto's (`proto._session`), shared
with memoryd and bxctl.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

import msgspec

import proto
from proto import Baseline, Label, SessionRecord, ToolResultRecord

__all__ = ["Session", "SessionStore", "new_session_id"]

log = logging.getLogger("loopd.sessions")

_encoder = msgspec.json.Encoder()
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"


def new_session_id() -> str:
    """`chat-` and 26 random lowercase base32 characters."""
    return "chat-" + "".join(secrets.choice(_BASE32) for _ in range(26))


@dataclass
class Session:
    """A session as read from its files, and kept up as loopd appends to it."""

    id: str
    directory: Path
    baseline: Baseline
    records: list[SessionRecord]
    label: Label = proto.SESSION_START
    """The session's taint: proto's rule over every line of its log so far."""

    @property
    def log_path(self) -> Path:
        """`0.jsonl`."""
        return self.directory / proto.LOG_FILE

    def taint(self) -> Label:
        """The session's label so far (what brokerd decides a call's taint by)."""
        return self.label

    def append(self, record: SessionRecord) -> None:
        """Append one record as one whole line, fsynced, and keep it in `records`."""
        proto.append_line(self.log_path, _encoder.encode(record))
        self.records.append(record)
        if isinstance(record, ToolResultRecord):
            self.label = self.label.join(record.label)


class SessionStore:
    """`{home}/sessions`: creating and loading sessions, never trusting an id."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def directory(self, session: str) -> Path:
        """The directory of a valid session id (anything else is refused first)."""
        return self.root / proto.check_session_id(session)

    def exists(self, session: str) -> bool:
        """Whether the session has a baseline."""
        return (self.directory(session) / proto.BASELINE_FILE).is_file()

    def create(self, session: str, baseline: Baseline) -> Session:
        """Write a new session's directory, baseline and empty log; refuse an existing one."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory = self.directory(session)
        mode = proto.dir_mode(self.root)  # group-readable where memoryd reads as a group
        directory.mkdir(mode=mode)  # FileExistsError: the caller checked; a race lost
        made = directory.stat().st_mode
        if stat.S_IMODE(made) & 0o777 != mode:  # a umask cut it; keep the inherited setgid
            os.chmod(directory, mode | (made & stat.S_ISGID))
        proto.write_atomically(directory / proto.BASELINE_FILE, _encoder.encode(baseline))
        log_path = directory / proto.LOG_FILE
        file_mode = proto.file_mode(directory)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode)
        if stat.S_IMODE(os.fstat(fd).st_mode) != file_mode:
            os.fchmod(fd, file_mode)
        os.close(fd)
        proto.fsync_dir(directory)
        proto.fsync_dir(self.root)
        return Session(session, directory, baseline, [])

    def load(self, session: str) -> Session:
        """Read a session's baseline and every whole record of its log."""
        directory = self.directory(session)
        baseline = proto.read_baseline(directory)
        read = proto.SESSION_LOG.read(directory / proto.LOG_FILE)
        if problems := read.problems():
            log.warning("%s (they are kept, and left out of the conversation)", problems)
        return Session(session, directory, baseline, read.records, proto.session_label(read))

    def list(self) -> list[str]:
        """Every session id with a baseline, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if stat.S_ISDIR(p.lstat().st_mode) and (p / proto.BASELINE_FILE).is_file()
        )
