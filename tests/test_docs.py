"""The docs are checked: every module is named in docs/architecture.md, every path exists.

A reader who has only the repository must find every module from docs/architecture.md
(its table says where each format and rule is defined), and must not be sent to a file
that was renamed or removed. These tests read the Markdown with the standard library
alone and compare it with the checkout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# The members whose modules the table must name.
MEMBER_SOURCES = ("libs/*/src", "services/*/src", "tools/*/src")
NOT_MODULES = frozenset({"__init__.py", "__main__.py"})

# A backquoted word starting with one of these names a path in this repository. A home's
# folders (`sessions/`, `memory/`, `index/`, `audit/`, `run/`) are not among them, so a
# path inside a home is never taken for one of the checkout.
TREE_PREFIXES = (
    "libs/",
    "services/",
    "tools/",
    "tests/",
    "bench/",
    "config/",
    "docs/",
    ".ci/",
)
# A full path in the architecture table: a member's source file or folder. A bare module
# name in a row is resolved against the folder of such a path.
SOURCE_PREFIXES = ("libs/", "services/", "tools/")

# A placeholder or a pattern (`{home}/keys/`, `<id>`, `sessions/ID/`, `_index*.py`, `~/`):
# no one file of the checkout.
PLACEHOLDER = re.compile(r"[{}<>*~]|\bID\b")

# A module named by its file name alone, relative to its row's folder: `_clean.py`.
BARE_MODULE = re.compile(r"[A-Za-z0-9_]+\.py")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A table cell boundary: a `|` not written as `\|`.
CELL_BORDER = re.compile(r"(?<!\\)\|")

# Paths in docs that no longer exist in the checkout; each is to be fixed in its doc.
# Keyed by (doc, path) so the exception covers that one mention only.
KNOWN_DEAD: frozenset[tuple[str, str]] = frozenset()

# Paths in another project's tree, written beside that project's name in the doc.
OTHER_TREES: dict[tuple[str, str], str] = {
    ("docs/model-servers.md", "tools/server/server.cpp"): "llama.cpp's server",
}


@dataclass(frozen=True)
class Row:
    """One row of the architecture table: its line and the code spans of each cell."""

    line: int
    what: tuple[str, ...]
    defined_in: tuple[str, ...]
    used_by: tuple[str, ...]


def code_spans(text: str) -> list[str]:
    """The backquoted texts of `text`, stripped."""
    return [span.strip() for span in CODE_SPAN.findall(text)]


def table_rows(markdown: str) -> list[Row]:
    """The body rows of the `| what | defined in | used by |` table."""
    rows: list[Row] = []
    for number, line in enumerate(markdown.splitlines(), start=1):
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in CELL_BORDER.split(line.strip())[1:-1]]
        assert len(cells) == 3, f"docs/architecture.md:{number}: a row has 3 cells: {line}"
        if cells == ["what", "defined in", "used by"] or set(cells[0]) <= {"-"}:
            continue
        what, defined_in, used_by = (tuple(code_spans(cell)) for cell in cells)
        rows.append(Row(number, what, defined_in, used_by))
    assert rows, "docs/architecture.md has no table rows"
    return rows


def folder_of(path: str) -> str:
    """The folder a full path names: itself if it ends in `/`, else its parent."""
    return path if path.endswith("/") else path.rsplit("/", 1)[0] + "/"


def is_placeholder(path: str) -> bool:
    """Whether `path` is a pattern or holds a placeholder rather than naming one file."""
    return bool(PLACEHOLDER.search(path))


def defined_in_paths(row: Row) -> list[str]:
    """The full paths of a row's "defined in" cell, bare module names resolved.

    A bare name (`_clean.py`) belongs to the folder of the nearest full path before it
    in the same cell: "`services/memoryd/src/memoryd/_index.py`, `_clean.py`". A bare
    name with no full path before it resolves to nothing (and fails the path test).
    """
    paths: list[str] = []
    folder: str | None = None
    for span in row.defined_in:
        if span.startswith(SOURCE_PREFIXES) and not is_placeholder(span):
            paths.append(span)
            folder = folder_of(span)
        elif BARE_MODULE.fullmatch(span):
            paths.append(f"{folder}{span}" if folder else span)
    return paths


def row_folders(row: Row) -> set[str]:
    """The source folders a row's "defined in" cell names by full path."""
    return {
        folder_of(span)
        for span in row.defined_in
        if span.startswith(SOURCE_PREFIXES) and not is_placeholder(span)
    }


def named_modules(markdown: str) -> set[str]:
    """Every module path architecture.md names, as the test of every module counts them.

    A module counts when its full path is backquoted anywhere in the doc, when its bare
    name follows a full path in a "defined in" cell (`defined_in_paths`), or when its bare
    name is in the "what" cell of a row whose "defined in" cell names exactly one folder.
    A bare name in a row naming several folders counts for none of them: `_config.py`
    exists in six packages, and only the folder its row names can be the one meant.
    """
    named = {
        span
        for span in code_spans(markdown)
        if span.startswith(SOURCE_PREFIXES) and span.endswith(".py")
    }
    for row in table_rows(markdown):
        named.update(path for path in defined_in_paths(row) if path.endswith(".py"))
        folders = row_folders(row)
        if len(folders) == 1:
            (folder,) = folders
            named.update(folder + span for span in row.what if BARE_MODULE.fullmatch(span))
    return named


def source_modules() -> list[str]:
    """Every module of the members, as repository paths (no `__init__`, `__main__`)."""
    return sorted(
        path.relative_to(ROOT).as_posix()
        for pattern in MEMBER_SOURCES
        for path in ROOT.glob(f"{pattern}/**/*.py")
        if path.name not in NOT_MODULES
    )


def tree_path(word: str) -> str | None:
    """The repository path a backquoted word names, or None if it names none.

    It names one when it starts with a folder of the tree (`TREE_PREFIXES`) and is not a
    placeholder. A pytest node id or a Markdown anchor is cut to its file:
    `tests/x.py::test_y`, `docs/runbook.md#entry`.
    """
    if not word.startswith(TREE_PREFIXES) or is_placeholder(word):
        return None
    return re.split(r"::|#", word, maxsplit=1)[0]


def exists(path: str) -> bool:
    """Whether `path` is in the checkout; a module may be named without `.py`."""
    target = ROOT / path
    if path.endswith("/"):
        return target.is_dir()
    return target.exists() or (not target.suffix and target.with_suffix(".py").is_file())


def prose_lines(markdown: str) -> list[tuple[int, str]]:
    """The numbered lines of `markdown` outside fenced code blocks (commands, output)."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(markdown.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def dead_paths(doc: Path) -> list[str]:
    """Each backquoted tree path of `doc` that is not in the checkout, as `doc:line: path`."""
    name = doc.relative_to(ROOT).as_posix()
    dead: list[str] = []
    for number, line in prose_lines(doc.read_text(encoding="utf-8")):
        # Each word of a span: a command (`uv run pytest tests/x.py`) names paths too.
        for word in (word for span in code_spans(line) for word in span.split()):
            path = tree_path(word)
            if path is None or (name, path) in KNOWN_DEAD or (name, path) in OTHER_TREES:
                continue
            if not exists(path):
                dead.append(f"{name}:{number}: {word}")
    return dead


def dead_relative_modules(markdown: str) -> list[str]:
    """Each bare module name of the architecture table that is not in its row's folder.

    In the "defined in" cell a bare name is resolved against the full path before it
    (`defined_in_paths`); in the other cells against the folders the "defined in" cell
    names, and it must be in one of them.
    """
    dead: list[str] = []
    for row in table_rows(markdown):
        full = set(row.defined_in)  # full paths: `dead_paths` checks them with the doc's others
        for path in defined_in_paths(row):
            if path not in full and not exists(path):
                dead.append(f"docs/architecture.md:{row.line}: {path}")
        folders = row_folders(row)
        for span in (*row.what, *row.used_by):
            if BARE_MODULE.fullmatch(span) and not any(exists(f + span) for f in folders):
                where = ", ".join(sorted(folders)) or "no folder"
                dead.append(f"docs/architecture.md:{row.line}: {span} (not in {where})")
    return dead


def docs() -> list[Path]:
    """The docs the path test reads: docs/*.md and the README."""
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def test_every_module_is_named_in_architecture_md() -> None:
    """Every module of libs/, services/ and tools/ is findable from docs/architecture.md."""
    modules = source_modules()
    assert len(modules) > 100, f"found only {len(modules)} modules under {MEMBER_SOURCES}"
    named = named_modules(ARCHITECTURE.read_text(encoding="utf-8"))
    missing = [module for module in modules if module not in named]
    assert not missing, (
        "modules named nowhere in docs/architecture.md; add each to the row of its subject "
        "(by full path, or by file name after a full path of its folder in the "
        "'defined in' cell), or add a row beside its role's rows:\n  " + "\n  ".join(missing)
    )


def test_every_path_in_the_docs_exists() -> None:
    """Every repository path a doc names in backquotes is in the checkout."""
    dead = [entry for doc in docs() for entry in dead_paths(doc)]
    dead += dead_relative_modules(ARCHITECTURE.read_text(encoding="utf-8"))
    assert not dead, "paths the docs name that are not in the checkout:\n  " + "\n  ".join(dead)


def test_known_exceptions_are_still_needed() -> None:
    """An exception fixed in its doc, or a doc renamed, is removed from the lists here."""
    for doc, path in (*KNOWN_DEAD, *OTHER_TREES):
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert f"`{path}`" in text, f"{doc} no longer names `{path}`: remove its exception"
        if (doc, path) in KNOWN_DEAD:
            assert not exists(path), f"{path} exists now: remove it from KNOWN_DEAD"


def test_the_rules_read_the_table_as_meant() -> None:
    """The resolution rules on a small table: bare names count only for their own folder."""
    table = (
        "| what | defined in | used by |\n"
        "|---|---|---|\n"
        "| a (`_a.py`) | `libs/p/src/p/_x.py`, `_y.py`; `services/s/src/s/_z.py`, `_w.py` | x |\n"
        "| b (`_b.py`) | `services/m/src/m/` | `_c.py` |\n"
        "| c \\| d (`_config.py`) | `libs/p/src/p/_x.py`; `tools/t/src/t/_u.py` | x |\n"
    )
    assert named_modules(table) == {
        "libs/p/src/p/_x.py",
        "libs/p/src/p/_y.py",
        "services/s/src/s/_z.py",
        "services/s/src/s/_w.py",
        "services/m/src/m/_b.py",
        "tools/t/src/t/_u.py",
    }
    assert tree_path("tests/x.py::test_y") == "tests/x.py"
    assert tree_path("docs/runbook.md#entry") == "docs/runbook.md"
    assert tree_path("{home}/sessions/") is None
    assert tree_path("libs/proto/src/proto/_index*.py") is None
    assert tree_path("sessions/ID/log.jsonl") is None
    assert tree_path("memory/memory.md") is None
    real = (
        "| what | defined in | used by |\n"
        "|---|---|---|\n"
        "| a (`_codec.py`, `_gone.py`) "
        "| `libs/proto/src/proto/_codec.py`, `_jsonl.py`, `_gone2.py` | `_render.py` |\n"
    )
    assert dead_relative_modules(real) == [
        "docs/architecture.md:3: libs/proto/src/proto/_gone2.py",
        "docs/architecture.md:3: _gone.py (not in libs/proto/src/proto/)",
    ]
