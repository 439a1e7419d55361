"""Path globs: wildcards, `**`, and symlinks resolved on both sides."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokerd._paths import GlobError, PathGlob, inside


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("/notes/**", "/notes", True),
        ("/notes/**", "/notes/a/b/c.txt", True),
        ("/notes/**", "/notes2/a", False),
        ("/notes/**", "/other", False),
        ("/notes/*.md", "/notes/a.md", True),
        ("/notes/*.md", "/notes/sub/a.md", False),
        ("/notes/?.md", "/notes/ab.md", False),
        ("/notes/**/*.md", "/notes/x/y/z.md", True),
        ("/notes/**/*.md", "/notes/z.md", True),
        ("/notes/a+b/[x]", "/notes/a+b/[x]", True),
        ("/notes/a+b/[x]", "/notes/aab/x", False),
        ("/notes/file.txt", "/notes/file.txt", True),
        ("/notes/file.txt", "/notes/file.txt/x", False),
        ("/", "/", True),
    ],
)
def test_globs(pattern: str, path: str, matches: bool) -> None:
    assert PathGlob(pattern).matches(path) is matches


@pytest.mark.parametrize("pattern", ["notes/**", "", "/a//b", "/a/./b", "/a/../b", "/a/", "/a/b**"])
def test_bad_globs_are_refused(pattern: str) -> None:
    with pytest.raises(GlobError):
        PathGlob(pattern)


def test_home_globs_are_expanded() -> None:
    assert PathGlob("~/notes/**").matches(os.path.expanduser("~/notes/x"))


def test_the_glob_prefix_is_resolved_when_checked(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    glob = PathGlob(f"{tmp_path}/link/**")
    assert glob.matches(str(real / "a.txt"))
    assert not glob.matches(str(tmp_path / "link" / "a.txt"))  # callers pass resolved paths


@given(st.lists(st.text(alphabet="abc.*?", min_size=1, max_size=4), min_size=1, max_size=4))
def test_a_glob_never_matches_outside_its_literal_prefix(segments: list[str]) -> None:
    segments = [s for s in segments if s not in (".", "..") and "**" not in s] or ["a"]
    glob = PathGlob("/base/" + "/".join(segments))
    assert not inside("/etc/passwd", [glob])
    assert not inside("/base", [glob])
