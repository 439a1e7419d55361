"""The `paths` constraint: globs a resolved path must match (read_file, list_dir).

A glob is absolute (or starts with `~/`, the brokerd user's home) and knows three
wildcards: `*` and `?` within one path segment, and a whole segment `**` for any number
of segments, none included (so `/notes/**` covers `/notes` itself). Everything else is
literal. The part before the first wildcard is resolved, symlinks followed, each time a
path is checked, and the path being checked is always fully resolved too, so a symlink
inside a granted folder that points out of it leads nowhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

__all__ = ["GlobError", "PathGlob", "inside"]

_WILDCARDS = frozenset("*?")


class GlobError(ValueError):
    """A `paths` entry that is not an absolute, normalised glob."""


class PathGlob:
    """One entry of a grant's `paths`."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        expanded = os.path.expanduser(pattern) if pattern.startswith("~/") else pattern
        if not expanded.startswith("/"):
            raise GlobError(f"path {pattern!r} is not absolute (start it with / or ~/)")
        if "\0" in expanded:
            raise GlobError(f"path {pattern!r} contains a NUL character")
        segments = expanded.split("/")[1:]
        if expanded != "/" and any(s in ("", ".", "..") for s in segments):
            raise GlobError(
                f"path {pattern!r} is not normalised (no empty, '.' or '..' segments, "
                "no trailing slash)"
            )
        if any("**" in s and s != "**" for s in segments):
            raise GlobError(f"path {pattern!r}: '**' must be a whole segment")
        literal: list[str] = []
        for segment in segments:
            if _WILDCARDS & set(segment):
                break
            literal.append(segment)
        self._prefix = "/" + "/".join(literal)
        self._rest = segments[len(literal) :]

    def __repr__(self) -> str:
        return f"PathGlob({self.pattern!r})"

    def matches(self, real_path: str) -> bool:
        """Whether a resolved absolute path matches; resolves the glob's own prefix now.

        Blocking (it touches the file system): call it off the trio thread.
        """
        prefix = os.path.realpath(self._prefix)
        if not self._rest:
            return real_path == prefix
        regex = "" if prefix == "/" else re.escape(prefix)
        for segment in self._rest:
            if segment == "**":
                regex += "(?:/[^/]+)*"
            else:
                regex += "/" + "".join(_segment_char(c) for c in segment)
        return re.fullmatch(regex, real_path) is not None


def _segment_char(char: str) -> str:
    if char == "*":
        return "[^/]*"
    if char == "?":
        return "[^/]"
    return re.escape(char)


def inside(real_path: str, globs: Iterable[PathGlob]) -> bool:
    """Whether a resolved path matches any of the globs."""
    return any(glob.matches(real_path) for glob in globs)
