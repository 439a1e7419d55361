"""What every bxctl command shares: the home, the sockets, errors, and showing outside text.

Text from a model, a tool, a log file, memory or the index reaches the owner's terminal
only through `proto.for_terminal` (a block of lines) or `inline` (a value inside a
line); JSON for scripts through `print_json`, which escapes the same code points the
JSON way. A `CommandError` holds raw text and is rendered where it is printed.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

import proto

__all__ = [
    "CALL_DEADLINE_S",
    "CommandError",
    "Sockets",
    "ask",
    "bxctl",
    "clipped",
    "failure_sentence",
    "given_home",
    "home_of",
    "inline",
    "not_utf8",
    "print_json",
    "program",
    "remember_home",
    "unreachable_sentence",
]

M = TypeVar("M", bound=proto.Message)

CALL_DEADLINE_S = 30.0


class CommandError(Exception):
    """A failure the owner can act on: printed as one line, exit code 1."""


_given_home: Path | None = None
"""The `--home` the owner typed, if any: sentences that name a command repeat it."""


def remember_home(home: Path) -> None:
    """Note the `--home` the owner typed, for the commands bxctl suggests."""
    global _given_home
    _given_home = home


def home_of(home: Path | None, *, must_exist: bool = True) -> Path:
    """`--home`, else `$BOXMAKER_HOME`, else `~/.boxmaker`: as the roles resolve it.

    A home that does not exist is a `CommandError` saying so, and how to make one or
    choose another, rather than an empty answer (`must_exist=False` for `init` and `up`,
    which make it).
    """
    if home is not None:
        remember_home(home)
    resolved = proto.resolve_home(home)
    if must_exist and not (resolved / "config").is_dir():
        where = (
            "--home"
            if home is not None or _given_home is not None
            else "$BOXMAKER_HOME"
            if "BOXMAKER_HOME" in os.environ
            else "the default home"
        )
        raise CommandError(
            f"there is no boxmaker home at {resolved} ({where}). Make one there with "
            f"`{program()} init --home {resolved}` or `{program()} up --home {resolved}`; or name "
            "yours with --home or $BOXMAKER_HOME."
        )
    return resolved


def given_home() -> Path | None:
    """The `--home` the owner gave on the command line, if any."""
    return _given_home


@functools.cache
def program() -> str:
    """How the owner's shell runs this bxctl: `bxctl` when that is on PATH, else `uv run bxctl`.

    On PATH means the `bxctl` found there is this very one; under `uv run` the project's
    environment is on PATH for bxctl, not for the shell it was typed in, so it is left out.
    """
    path = os.environ.get("PATH", "")
    venv = os.environ.get("VIRTUAL_ENV")
    if "UV_RUN_RECURSION_DEPTH" in os.environ and venv:
        theirs = Path(venv) / "bin"
        path = os.pathsep.join(p for p in path.split(os.pathsep) if p and Path(p) != theirs)
    found = shutil.which("bxctl", path=path)
    running = Path(sys.executable).parent / "bxctl"
    if found is not None and Path(found).resolve() == running.resolve():
        return "bxctl"
    return "uv run bxctl"


def bxctl(command: str) -> str:
    """`bxctl COMMAND` as the owner's shell runs it, with the `--home` the owner gave."""
    if _given_home is None:
        return f"{program()} {command}"
    return f"{program()} {command} --home {_given_home}"


SERVED_AT: dict[str, tuple[str, str]] = {
    proto.LOOP_MEMORY.name: ("memoryd", "loop"),
    proto.BROKER_MEMORY.name: ("memoryd", "broker"),
    proto.OWNER_MEMORY.name: ("memoryd", "admin"),
    proto.LOOP_BROKER.name: ("brokerd", "loop"),
    proto.OWNER_BROKER.name: ("brokerd", "admin"),
    proto.OWNER_LOOP.name: ("loopd", "chat"),
    proto.BROKER_LOOP.name: ("loopd", "broker"),
}
"""Each socket's key in its server's `[sockets]` table: (config file stem, key)."""

_CONFIGS: dict[str, type[proto.MemorydConfig | proto.BrokerdConfig | proto.LoopdConfig]] = {
    "memoryd": proto.MemorydConfig,
    "brokerd": proto.BrokerdConfig,
    "loopd": proto.LoopdConfig,
}

_unread: dict[Path, str] = {}
"""Default socket paths bxctl fell back to because a config could not be read, and why."""


class Sockets:
    """The socket paths of a home, where each role's config says it serves them.

    A role serves a socket at its config's `[sockets]` path, resolved by the same proto
    function the role uses (`proto.socket_path`, under the config's `[paths] home` if it
    names one), else at the default under the home. A config that
    cannot be read gives the default: the role cannot start on it either, and says why;
    if the call then finds nobody, its sentence says which config bxctl could not read.
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self._read: dict[str, proto.MemorydConfig | proto.BrokerdConfig | proto.LoopdConfig] = {}

    def path(self, spec: proto.Socket[proto.Message]) -> Path:
        """Where `spec`'s server serves it, by its config."""
        role, key = SERVED_AT[spec.name]
        default = spec.default_path(self.home)
        if not self._config_path(role).exists():
            return default  # nothing configured (the role, if started, says it is missing)
        try:
            config = self._config(role)
        except proto.ConfigError as exc:
            _unread[default] = str(exc)
            return default
        home = self.home
        if config.paths.home:
            home = proto.config_home(config.paths.home, self._config_path(role).parent)
        return proto.socket_path(getattr(config.sockets, key), spec, home)

    def _config_path(self, role: str) -> Path:
        return self.home / "config" / f"{role}.toml"

    def _config(self, role: str) -> proto.MemorydConfig | proto.BrokerdConfig | proto.LoopdConfig:
        if role not in self._read:
            self._read[role] = proto.read_config(self._config_path(role), _CONFIGS[role])
        return self._read[role]


def ask(
    path: Path,
    spec: proto.Socket[proto.Message],
    request: proto.Message,
    expect: type[M],
    *,
    deadline_s: float = CALL_DEADLINE_S,
    on_progress: Callable[[proto.Message], None] | None = None,
) -> M:
    """One request to a role, every failure a `CommandError` sentence.

    bxctl's one client: blocking (no trio), so the one-request commands start without
    trio; under trio (the chat, `up`) a command runs it in a worker thread. A long
    request's progress frames go to `on_progress`, each restarting the deadline.
    """
    try:
        return proto.call_blocking(
            path, request, expect, deadline_s=deadline_s, on_progress=on_progress
        )
    except proto.CallFailed as exc:
        raise CommandError(failure_sentence(spec.server, path, exc)) from None


def failure_sentence(role: str, path: Path, exc: proto.CallFailed) -> str:
    """What the owner reads when a call to `role` at `path` failed, by how it failed."""
    match exc:
        case proto.RequestTooLarge(kind="say", size=size, limit=limit):
            return (
                f"the message is too long to send: {size:,} bytes; a message can be at most "
                f"about {_mib(limit)}"
            )
        case proto.RequestTooLarge(size=size, limit=limit):
            return (
                f"the request to {role} is too long to send: {size:,} bytes; a request can be "
                f"at most about {_mib(limit)}"
            )
        case proto.BadRequest():
            return f"the request to {role} cannot be sent: {exc}"
        case proto.Unreachable(reason=reason):
            return unreachable_sentence(role, path, reason)
        case proto.RemoteError():
            return _refused(role, exc)
        case proto.CallTimedOut(seconds=seconds):
            return f"{role} did not answer within {seconds:g} s at {path}"
        case proto.NoReply():
            return f"{role} closed the connection without answering ({path})"
        case proto.CallBroken():
            return f"the connection to {role} broke before it answered ({path}): {exc}"
        case _:
            return f"{role} sent something unexpected at {path}: {exc}"


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.3g} MiB"


def _refused(role: str, exc: proto.RemoteError) -> str:
    runbook = f" (runbook: {exc.error.runbook})" if exc.error.runbook else ""
    return f"{role} refused: {exc.error.message}{runbook}"


def unreachable_sentence(role: str, path: Path, reason: str) -> str:
    """What to do when a role does not answer on its socket."""
    hint = f" (runbook: {role}-start-failed)"
    sentence = (
        f"cannot reach {role} at {path}: {reason}. Start boxmaker with `{bxctl('up')}`; "
        f"if {role} does not start, its log line says why{hint}."
    )
    if path in _unread:
        sentence += f" bxctl looked there because {role}'s config cannot be read: {_unread[path]}."
    return sentence


def inline(text: str) -> str:
    """Outside text shown inside a line: rendered for the terminal, newlines revealed too."""
    return proto.for_terminal(text, one_line=True)


def _json_escape(char: str) -> str:
    point = ord(char)
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


def print_json(value: object) -> None:
    """Print a value as JSON (for `--json` listings), nothing in it live on a terminal.

    msgspec escapes only what JSON requires; every other code point the terminal
    rendering reveals (DEL, C1 controls, bidi, invisible ones) is written as a JSON
    escape too, which a JSON reader turns back into the exact text.
    """
    text = msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    shown = "".join(_json_escape(c) if c != "\n" and proto.revealed(c) else c for c in text)
    sys.stdout.write(shown + "\n")


SHOWN = 64
"""How much of a mistyped id an error repeats."""


def clipped(text: str) -> str:
    """`text`, or its start and its length when it is longer than an id could be."""
    if len(text) <= SHOWN:
        return text
    return f"{text[:SHOWN]}… ({len(text):,} characters)"


def plural(n: int, one: str, many: str | None = None) -> str:
    """`1 log`, `42 logs`, with thousands separators."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def not_utf8(text: str) -> str | None:
    """Where `text` stops being UTF-8 (`byte 0xff at byte 7`), or None if it is.

    Bytes that are not UTF-8 reach Python (arguments, a pipe) as lone surrogates, which
    no frame can carry.
    """
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raw = text.encode(errors="surrogateescape")
        at = len(text[: exc.start].encode(errors="surrogateescape"))
        return f"byte 0x{raw[at]:02x} at byte {at + 1}"
    return None
