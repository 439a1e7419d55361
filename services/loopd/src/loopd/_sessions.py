"""Session files: the baseline written once, the log appended one record per line.

`sessions/<id>/0.baseline.json` is written atomically when the session is created and
never again; a resumed session replays it byte for byte. `sessions/<id>/0.jsonl` gets
one record per line, appended and flushed; nothing in it is ever rewritten. A log whose
last line was torn by a crash gets a newline before the next record, so the fragment
stays a line of its own that readers skip, and no whole record is lost.

A session whose first message is refused (too long for the model's context, or refused
by the server for it) is taken back whole (`unwrite`): its next message writes it again
(`begin` in memory, `write` just before the record), so no empty session stays behind.

The exception to both is the owner's forget (`_forget`): the text becomes a marker in
the log's lines and the baseline's system text, each file rewritten atomically under the
session's turn lock, line count and order kept; a kept session is dropped then.

loopd is the log's only writer, so it keeps what it read of a session and adds what it
appends (`SessionStore.open`), rather than reading the whole log again for every turn.
Each session remembers its files as it left them (inode, size, modification time); if
either file is not so when the session is next used (a crash left a torn line, someone
wrote to the log, the session was made again), it is read again from disk. A kept session
is always what a fresh `load` of its files gives.

Each session created is also a line of `sessions/.catalog.jsonl` (`proto._catalog`), which
bxctl lists and resolves sessions from; each record appended is first a line of
`sessions/.changed` (`proto._changes`), from which memoryd's start learns what changed.

The files' formats and the session's label rule are proto's (`proto._session`), shared
with memoryd and bxctl.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import secrets
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec

import proto
from proto import (
    SESSION_LOG,
    AssistantRecord,
    Baseline,
    Label,
    SessionRecord,
    ToolCall,
    ToolResultRecord,
)

from ._history import History

__all__ = ["CHARS_PER_TOKEN", "KEPT_SESSIONS", "Session", "SessionStore", "new_session_id"]

log = logging.getLogger("loopd.sessions")

_encoder = msgspec.json.Encoder()
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
CHARS_PER_TOKEN = 3
"""A cautious estimate where the server has not counted yet."""
KEPT_SESSIONS = 32
"""How many sessions loopd keeps in memory between turns (the most recently used)."""

FileState = tuple[int, int, int, int]
"""A file as loopd left it: device, inode, size, modification time (ns)."""


def new_session_id() -> str:
    """`chat-` and 26 random lowercase base32 characters."""
    return "chat-" + "".join(secrets.choice(_BASE32) for _ in range(26))


def _state(st: os.stat_result) -> FileState:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _stat(path: Path) -> FileState | None:
    try:
        return _state(os.stat(path))
    except FileNotFoundError:
        return None


class Session:
    """A session as read from its files, and kept up as loopd appends to it."""

    def __init__(
        self,
        id: str,
        directory: Path,
        baseline: Baseline,
        records: list[SessionRecord] | None = None,
        label: Label = proto.SESSION_START,
        *,
        null_content: bool = False,
        files: tuple[FileState | None, FileState | None] | None = None,
        torn: bytes = b"",
        unwritten: str | msgspec.UnsetType | None = None,
        wrote: Callable[[str], None] | None = None,
    ) -> None:
        self.id = id
        self._wrote = wrote
        """Told of each record appended (`SessionStore.watch`)."""
        self.written = unwritten is None
        """Whether its files exist: a session `begin` made has none until `write`."""
        self.origin = msgspec.UNSET if unwritten is None else unwritten
        """Who asked for it (`session_open`'s origin), for the catalog line `write` adds."""
        self.directory = directory
        self.baseline = baseline
        self.label = label
        """The session's taint: proto's rule over every line of its log so far."""
        self.history = History(baseline.system, records or (), null_content=null_content)
        self.files = files
        """The baseline and the log as this session last saw them; None: not known."""
        self._torn = torn
        """The log's unfinished last line when it was read: the next append ends it."""
        self._counted, self._since = 0, 0
        """The server's last token count, and the characters of the records after it."""
        self._counted_at = -1
        for i in range(len(self.records) - 1, -1, -1):
            record = self.records[i]
            if isinstance(record, AssistantRecord) and record.tokens is not None:
                self._counted, self._counted_at = record.tokens, i
                break
            self._since += len(_encoder.encode(record))

    def rebase(self, baseline: Baseline) -> None:
        """Give a begun session, not yet written, another baseline (made again)."""
        assert not self.written, "only a begun session is rebased"
        self.baseline = baseline
        self.history = History(baseline.system, (), null_content=self.history.null_content)

    @property
    def records(self) -> list[SessionRecord]:
        """Every whole record of the log, in order."""
        return self.history.records

    @property
    def log_path(self) -> Path:
        """`0.jsonl`."""
        return self.directory / proto.LOG_FILE

    @property
    def baseline_path(self) -> Path:
        """`0.baseline.json`."""
        return self.directory / proto.BASELINE_FILE

    def taint(self) -> Label:
        """The session's label so far (what brokerd decides a call's taint by)."""
        return self.label

    def unanswered(self) -> list[ToolCall]:
        """Every tool call of the log that no result answers, in order."""
        return self.history.unanswered()

    def estimated_tokens(self, extra_chars: int = 0) -> int:
        """The server's last count plus an estimate for what came after it (and `extra_chars`)."""
        since = self._since + extra_chars
        if self._counted_at < 0:
            since += len(self.baseline.system) + len(_encoder.encode(self.baseline.tools))
        return self._counted + since // CHARS_PER_TOKEN

    def baseline_tokens(self) -> int:
        """An estimate of the system prompt and the tools: what any request of it holds."""
        return (len(self.baseline.system) + len(_encoder.encode(self.baseline.tools))) // (
            CHARS_PER_TOKEN
        )

    def as_left(self) -> bool:
        """Whether the files are as this session left them (blocking: two `stat` calls)."""
        return self.files is not None and self.files == (
            _stat(self.baseline_path),
            _stat(self.log_path),
        )

    def append(self, record: SessionRecord) -> None:
        """Append one record as one whole line, fsynced, and keep it (blocking).

        If the log was not as this session left it (another writer), or the line may not
        have been written whole, the session forgets what it knew of its files, so that
        it is read again before its next turn.
        """
        assert self.written, "a begun session is written before its first record"
        line = _encoder.encode(record)
        before, self.files = self.files, None
        proto.note_change(self.directory.parent, self.id)  # memoryd's start reads only these
        written = proto.append_line(self.log_path, line)
        expected = None
        if before is not None and before[1] is not None:
            dev, inode, size, _ = before[1]
            expected = (dev, inode, size + bool(self._torn) + len(line) + 1)
        if self._wrote is not None:
            self._wrote(self.id)
        if self._torn:
            self._end_torn_line()
        self._keep(record, len(line))
        if expected == (written.st_dev, written.st_ino, written.st_size):
            assert before is not None
            self.files = (before[0], _state(written))

    def _end_torn_line(self) -> None:
        """The fragment the append has just ended is now a line of the log: count it."""
        fragment, self._torn = self._torn, b""
        try:
            record = SESSION_LOG.decode(fragment)
        except ValueError:
            self.label = self.label.join(proto.damaged_label(fragment))
            return
        self._keep(record, len(_encoder.encode(record)))  # a whole record, its newline cut

    def _keep(self, record: SessionRecord, size: int) -> None:
        self.history.add(record)
        if isinstance(record, ToolResultRecord):
            self.label = self.label.join(record.label)
        if isinstance(record, AssistantRecord) and record.tokens is not None:
            self._counted, self._counted_at, self._since = record.tokens, len(self.records) - 1, 0
        else:
            self._since += size


class SessionStore:
    """`{home}/sessions`: creating and loading sessions, never trusting an id.

    `open` keeps the sessions it gives out (the last `KEPT_SESSIONS`), for the turns
    that follow; `load` always reads.
    """

    def __init__(self, root: Path, *, null_content: bool = False) -> None:
        self.root = root
        self.null_content = null_content
        self._kept: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self.writes = 0
        """How many times a session was written (made, or a record appended) in this run."""
        self._written: dict[str, int] = {}
        self._counting = threading.Lock()

    def written_since(self, writes: int) -> set[str]:
        """The sessions written since `writes` was read (a forget looks at those again)."""
        with self._counting:
            return {session for session, n in self._written.items() if n > writes}

    def _wrote(self, session: str) -> None:
        with self._counting:
            self.writes += 1
            self._written[session] = self.writes

    def directory(self, session: str) -> Path:
        """The directory of a valid session id (anything else is refused first)."""
        return self.root / proto.check_session_id(session)

    def exists(self, session: str) -> bool:
        """Whether the session has a baseline."""
        return (self.directory(session) / proto.BASELINE_FILE).is_file()

    def create(
        self, session: str, baseline: Baseline, origin: str | msgspec.UnsetType = msgspec.UNSET
    ) -> Session:
        """A new session written at once (`begin` and `write`); refuse an existing one."""
        begun = self.begin(session, baseline, origin)
        self.write(begun)
        return begun

    def begin(
        self, session: str, baseline: Baseline, origin: str | msgspec.UnsetType = msgspec.UNSET
    ) -> Session:
        """A new session in memory only: `write` makes its files, before its first record.

        A session begins at its first message: a message refused before it is recorded
        (too long for the model) leaves no folder and no copy of memory behind.
        """
        self.directory(session)  # a bad id is refused before anything else
        return Session(
            session,
            self.root / session,
            baseline,
            null_content=self.null_content,
            unwritten=origin,
            wrote=self._wrote,
        )

    def write(self, session: Session) -> None:
        """Write a begun session's directory, baseline and empty log; refuse an existing one.

        The session is then added to the catalog (`proto.CATALOG_FILE`), with its origin
        (who asked for it), once its files are durable: a catalogued session has them.
        """
        assert not session.written, "written already"
        origin = session.origin
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory = self.directory(session.id)
        mode = proto.dir_mode(self.root)  # group-readable where memoryd reads as a group
        try:
            directory.mkdir(mode=mode)
        except FileExistsError:
            if (directory / proto.BASELINE_FILE).exists():
                raise  # a session: the caller checked, and a race lost
            # What a crash in `unwrite` left (the baseline goes first): never a session.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / proto.LOG_FILE)
        made = directory.stat().st_mode
        if stat.S_IMODE(made) & 0o777 != mode:  # a umask cut it; keep the inherited setgid
            os.chmod(directory, mode | (made & stat.S_ISGID))
        proto.write_atomically(directory / proto.BASELINE_FILE, _encoder.encode(session.baseline))
        log_path = directory / proto.LOG_FILE
        file_mode = proto.file_mode(directory)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, file_mode)
        if stat.S_IMODE(os.fstat(fd).st_mode) != file_mode:
            os.fchmod(fd, file_mode)
        os.close(fd)
        proto.fsync_dir(directory)
        proto.fsync_dir(self.root)
        proto.append_to_catalog(
            self.root,
            proto.CatalogEntry(session=session.id, created=session.baseline.created, origin=origin),
        )
        session.written = True
        self._wrote(session.id)
        session.files = (_stat(directory / proto.BASELINE_FILE), _stat(log_path))
        self._keep(session)

    def unwrite(self, session: Session) -> None:
        """Take back a session whose first message the model refused: files, catalog line.

        Its log holds that message and nothing else, and no turn of it ever ran: the
        session is then as if begun only, and its next message writes it again (with a
        fresh baseline). The baseline goes first: from then on it is no session for
        anyone (a folder without one is what `write` clears), and the catalog line last,
        so a crash between leaves a line whose folder is gone, which listings skip.
        """
        self.drop(session.id)
        directory = self.directory(session.id)
        for name in (proto.BASELINE_FILE, proto.LOG_FILE):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)
        proto.fsync_dir(directory)
        with contextlib.suppress(FileNotFoundError):
            directory.rmdir()
        proto.fsync_dir(self.root)
        proto.drop_from_catalog(self.root, session.id)

    def load(self, session: str) -> Session:
        """Read a session's baseline and every whole record of its log."""
        directory = self.directory(session)
        # Seen before reading: whatever is written meanwhile makes them differ next time.
        files = (_stat(directory / proto.BASELINE_FILE), _stat(directory / proto.LOG_FILE))
        baseline = proto.read_baseline(directory)
        read = SESSION_LOG.read(directory / proto.LOG_FILE)
        if problems := read.problems():
            log.warning("%s (they are kept, and left out of the conversation)", problems)
        torn = b""
        if read.torn:
            with open(read.path, "rb") as f:
                f.seek(read.end)
                torn = f.read(SESSION_LOG.max_line_bytes)
        return Session(
            session,
            directory,
            baseline,
            read.records,
            proto.session_label(read),
            null_content=self.null_content,
            files=files,
            torn=torn,
            wrote=self._wrote,
        )

    def kept(self, session: str) -> Session | None:
        """The session as `open` gave it out last, if its files are still as it left them.

        Blocking, but only two `stat` calls.
        """
        found = self._kept.get(session)
        if found is None or not found.as_left():
            return None
        self._kept.move_to_end(session)
        return found

    def open(self, session: str) -> Session:
        """The kept session if its files are as it left them, else the session read anew."""
        return self.kept(session) or self._keep(self.load(session))

    def drop(self, session: str) -> None:
        """Forget the kept copy of `session`: its next turn reads its files again."""
        self._kept.pop(session, None)

    def _keep(self, session: Session) -> Session:
        self._kept[session.id] = session
        self._kept.move_to_end(session.id)
        while len(self._kept) > KEPT_SESSIONS:
            self._kept.popitem(last=False)
        return session

    def list(self) -> list[str]:
        """Every session id with a baseline, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if stat.S_ISDIR(p.lstat().st_mode) and (p / proto.BASELINE_FILE).is_file()
        )
