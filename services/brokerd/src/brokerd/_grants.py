"""Grants: one TOML file per tool in `grants/`, plus the two built in.

A grant's name is its file's stem and its `grant_sha256` the hash of the file's bytes,
so every audit record names the exact text it was decided under. A file that does not
parse, names recall or memory, or carries constraints its tool does not take, is a load
problem (runbook grants-invalid); the other grants still load. Several files may grant
read_file, list_dir or http_fetch (told apart by their paths or hosts); several for any
other tool are all load problems. Grants are read once, at start.

Loading one file can fail in any way (a parser's RecursionError on deep nesting, a
file larger than any grant, a read error): every failure but cancellation is that file's
problem, never brokerd's, so one hostile file cannot stop brokerd from serving the rest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from proto import BOM_SENTENCE, Class, GrantInfo, GrantProblem, Label, lower_first

from ._paths import GlobError, PathGlob

__all__ = [
    "BUILTIN_MEMORY_TEXT",
    "BUILTIN_RECALL_TEXT",
    "BUILT_IN_POLICY",
    "MAX_GRANT_BYTES",
    "SHAREABLE",
    "Grant",
    "GrantInvalid",
    "GrantSet",
    "load_grants",
    "parse_grant",
]

log = logging.getLogger("brokerd.grants")

BUILT_IN_POLICY = "the policy of recall and memory is built in; remove this grant."
"""The fixed sentence for a grant file that names recall or memory."""

BUILTIN_RECALL_TEXT = (
    "# built in: recall\n"
    'tool = "recall"\n'
    'mode = "auto"\n'
    'max_taint = "secret"\n'
    'result_class = "private"\n'
    "untrusted = false\n"
)
BUILTIN_MEMORY_TEXT = (
    "# built in: memory\n"
    'tool = "memory"\n'
    'mode = "ask"\n'
    'max_taint = "secret"\n'
    'result_class = "private"\n'
    "untrusted = false\n"
)
_BUILT_IN = {"builtin-recall": BUILTIN_RECALL_TEXT, "builtin-memory": BUILTIN_MEMORY_TEXT}

# Which constraint each known tool takes; a tool not listed here may carry any of them
# (a future runtime reads them). recall and memory take none.
_TAKES: dict[str, frozenset[str]] = {
    "recall": frozenset(),
    "memory": frozenset(),
    "read_file": frozenset({"paths"}),
    "list_dir": frozenset({"paths"}),
    "http_fetch": frozenset({"hosts"}),
}
SHAREABLE = frozenset({"read_file", "list_dir", "http_fetch"})
"""Tools several grant files may name: each call is decided under the one whose paths or
hosts admit it."""
_HOST = re.compile(
    r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*"
    r"|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?"
)

MAX_GRANT_BYTES = 64 << 10
"""A grant file is a few lines; a larger one is refused before it is read whole."""

ToolName = Annotated[str, msgspec.Meta(pattern=r"\A[a-z][a-z0-9_]{0,63}\Z")]
Mode = Literal["auto", "ask", "deny"]


class Constraints(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[constraints]`: tool-specific limits on what a granted call may touch."""

    paths: list[str] = msgspec.field(default_factory=list)
    hosts: list[str] = msgspec.field(default_factory=list)
    patterns: list[str] = msgspec.field(default_factory=list)


class GrantFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A grant file as written; every key but `[constraints]` is required."""

    tool: ToolName
    mode: Mode
    max_taint: Class
    result_class: Class
    untrusted: bool
    constraints: Constraints = msgspec.field(default_factory=Constraints)


@dataclasses.dataclass(frozen=True)
class Grant:
    """A loaded grant: the file's policy, its name and hash, and its parsed constraints."""

    name: str
    tool: str
    mode: Mode
    max_taint: Class
    result_class: Class
    untrusted: bool
    grant_sha256: str
    builtin: bool = False
    paths: tuple[PathGlob, ...] = ()
    hosts: frozenset[str] = frozenset()
    patterns: tuple[str, ...] = ()

    @property
    def label(self) -> Label:
        """The label the grant stamps on a result: `result_class`, `untrusted`."""
        return Label(class_=self.result_class, untrusted=self.untrusted)

    def info(self) -> GrantInfo:
        """The grant as `grants_list` shows it."""
        return GrantInfo(
            name=self.name,
            tool=self.tool,
            mode=self.mode,
            max_taint=self.max_taint,
            result_class=self.result_class,
            untrusted=self.untrusted,
            grant_sha256=self.grant_sha256,
            builtin=self.builtin,
        )


class GrantInvalid(ValueError):
    """A grant file that cannot be loaded; the message says why."""


def parse_grant(name: str, data: bytes, *, builtin: bool = False) -> Grant:
    """Parse one grant file's bytes, or raise `GrantInvalid` saying what is wrong."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise GrantInvalid(BOM_SENTENCE)
    try:
        spec = msgspec.toml.decode(data, type=GrantFile)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise GrantInvalid(lower_first(str(exc))) from None
    except RecursionError:
        raise GrantInvalid("nested too deeply to parse") from None
    if spec.tool in ("recall", "memory") and not builtin:
        raise GrantInvalid(BUILT_IN_POLICY)
    given = {key for key in ("paths", "hosts", "patterns") if getattr(spec.constraints, key)}
    takes = _TAKES.get(spec.tool)
    if takes is not None:
        if extra := sorted(given - takes):
            raise GrantInvalid(f"{spec.tool} takes no {' or '.join(extra)} constraint")
        if missing := sorted(takes - given):
            raise GrantInvalid(
                f"{spec.tool} needs [constraints] {missing[0]}: a grant without it allows nothing"
            )
    try:
        paths = tuple(PathGlob(p) for p in spec.constraints.paths)
    except GlobError as exc:
        raise GrantInvalid(str(exc)) from None
    for host in spec.constraints.hosts:
        if _HOST.fullmatch(host) is None:
            raise GrantInvalid(
                f"host {host!r} is not a lower-case host name or [IPv6] address, "
                "optionally with :port"
            )
    return Grant(
        name=name,
        tool=spec.tool,
        mode=spec.mode,
        max_taint=spec.max_taint,
        result_class=spec.result_class,
        untrusted=spec.untrusted,
        grant_sha256=hashlib.sha256(data).hexdigest(),
        builtin=builtin,
        paths=paths,
        hosts=frozenset(spec.constraints.hosts),
        patterns=tuple(spec.constraints.patterns),
    )


def builtin_grants() -> list[Grant]:
    """`builtin-recall` and `builtin-memory`, parsed from their fixed text."""
    return [parse_grant(n, t.encode(), builtin=True) for n, t in _BUILT_IN.items()]


@dataclasses.dataclass(frozen=True)
class GrantSet:
    """The grants in force, by tool (by name within a tool), and the files that failed."""

    by_tool: dict[str, tuple[Grant, ...]]
    problems: tuple[GrantProblem, ...] = ()

    def find(self, tool: str) -> tuple[Grant, ...]:
        """The grants for `tool`: none, one, or several told apart by their constraints."""
        return self.by_tool.get(tool, ())

    def infos(self) -> list[GrantInfo]:
        """Every grant, built-in ones first, then by name."""
        every = [grant for grants in self.by_tool.values() for grant in grants]
        return [g.info() for g in sorted(every, key=lambda g: (not g.builtin, g.name))]


def _read_capped(path: Path) -> bytes:
    """The file's bytes; `GrantInvalid` when it holds more than `MAX_GRANT_BYTES`."""
    with path.open("rb") as f:
        data = f.read(MAX_GRANT_BYTES + 1)
    if len(data) > MAX_GRANT_BYTES:
        raise GrantInvalid(
            f"larger than {MAX_GRANT_BYTES // 1024} KiB; a grant file is a few lines"
        )
    return data


def load_grants(directory: Path) -> GrantSet:
    """Read every `*.toml` in `directory` (missing: none) next to the built-in grants.

    Blocking: call it at start or off the trio thread.
    """
    loaded: list[Grant] = []
    problems: list[GrantProblem] = []
    files = sorted(directory.glob("*.toml")) if directory.is_dir() else []
    for path in files:
        try:
            if not path.is_file():
                raise GrantInvalid("not a regular file")
            if path.stem.startswith("builtin-"):
                raise GrantInvalid(
                    "builtin-… names are reserved for built-in grants; rename the file"
                )
            loaded.append(parse_grant(path.stem, _read_capped(path)))
        except GrantInvalid as exc:
            problems.append(GrantProblem(file=path.name, message=str(exc)))
        except OSError as exc:
            problems.append(GrantProblem(file=path.name, message=f"cannot read: {exc.strerror}"))
        except Exception as exc:  # a parser's bug is this file's problem, not brokerd's
            log.warning("grant %s failed to load", path.name, exc_info=True)
            message = f"cannot be loaded ({type(exc).__name__}: {str(exc)[:200]})"
            problems.append(GrantProblem(file=path.name, message=message))
    by_tool: dict[str, list[Grant]] = {}
    for grant in loaded:
        by_tool.setdefault(grant.tool, []).append(grant)
    for tool, grants in list(by_tool.items()):
        if len(grants) > 1 and tool not in SHAREABLE:
            names = ", ".join(f"{g.name}.toml" for g in grants)
            message = (
                f"{names} all grant {tool}; keep one (only {', '.join(sorted(SHAREABLE))} "
                f"grants can share a tool, told apart by their paths or hosts); until then "
                f"{tool} has no grant"
            )
            problems += [GrantProblem(file=f"{g.name}.toml", message=message) for g in grants]
            del by_tool[tool]
    in_force: dict[str, tuple[Grant, ...]] = {g.tool: (g,) for g in builtin_grants()}
    in_force.update({tool: tuple(found) for tool, found in by_tool.items()})
    problems.sort(key=lambda p: p.file)
    return GrantSet(by_tool=in_force, problems=tuple(problems))
