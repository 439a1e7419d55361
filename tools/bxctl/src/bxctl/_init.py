"""`bxctl init`: a home with its configuration, ready for `bxctl up`.

The shipped files in the repository's `config/` are the templates: each role's config
is copied with `[paths] home` set to the new home (and the model's url and name when
given), beside system.md, the starter soul.md and the example grants. Nothing that
exists is ever overwritten, so running it twice is safe.
"""

from __future__ import annotations

import os
from pathlib import Path

import tomlkit
import tomlkit.exceptions
from tomlkit.items import Comment, Item, Table

import proto

from ._common import CommandError

__all__ = ["init_home", "shipped_config_dir"]

ROLE_CONFIGS = ("memoryd.toml", "brokerd.toml", "loopd.toml")
TEXT_FILES = ("system.md", "soul.md")


def shipped_config_dir() -> Path:
    """The shipped `config/` directory: inside a wheel, or the repository's."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_config", here.parents[3] / "config"):
        if (candidate / "memoryd.toml").is_file():
            return candidate
    raise CommandError(
        "cannot find the shipped config/ directory (run bxctl from the boxmaker repository)"
    )


def _comment_ws(column: int, before: str) -> str:
    """The spaces that put a trailing comment at `column` after `before`, if it fits."""
    return " " * max(column - len(before), 1)


def _uncommented_home(comment: Comment) -> Item | None:
    """`# home = "…"  # why` as the key it comments out (keeping `# why`), else None."""
    text = comment.as_string().strip().removeprefix("#").strip()
    try:
        line = tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError:
        return None
    item = line.item("home") if list(line) == ["home"] else None
    return item if isinstance(item, Item) else None


def _with_home(paths: Table, home: str) -> Table:
    """`[paths]` with its `# home = …` line replaced, in place, by `home = "<home>"`."""
    rebuilt = tomlkit.table()
    for field in ("indent", "comment_ws", "comment", "trail"):
        setattr(rebuilt.trivia, field, getattr(paths.trivia, field))
    found = False
    for key, item in paths.value.body:
        line = None
        if key is None and isinstance(item, Comment) and not found:
            line = _uncommented_home(item)
        if line is None:
            rebuilt.append(key, item)
            continue
        value = tomlkit.string(home)
        value.trivia.indent = item.trivia.indent
        if line.trivia.comment:
            column = item.as_string().rindex(line.trivia.comment) - len(item.trivia.indent)
            value.trivia.comment_ws = _comment_ws(column, f"home = {value.as_string()}")
            value.trivia.comment = line.trivia.comment
        value.trivia.trail = item.trivia.trail
        rebuilt.append("home", value)
        found = True
    if not found:
        raise CommandError("a shipped config has no '# home = …' line to fill in")
    return rebuilt


def _set(table: Table, key: str, text: str) -> None:
    """Set a string, keeping the line's trailing comment where it was."""
    old = table.item(key) if key in table else None
    table[key] = text
    new = table.item(key)
    if isinstance(old, Item) and isinstance(new, Item) and old.trivia.comment:
        column = len(old.as_string()) + len(old.trivia.comment_ws)
        new.trivia.comment_ws = _comment_ws(column, new.as_string())


def _table(doc: tomlkit.TOMLDocument, name: str) -> Table:
    table = doc.get(name)
    if not isinstance(table, Table):
        raise CommandError(f"a shipped config has no [{name}] table")
    return table


def _role_config(template: str, home: Path, model_url: str | None, model: str | None) -> str:
    """A role's config: the shipped template, every comment kept, with its values set."""
    doc = tomlkit.parse(template)
    doc["paths"] = _with_home(_table(doc, "paths"), str(home))
    if model_url is not None:
        _set(_table(doc, "model"), "url", model_url)
    if model is not None:
        _set(_table(doc, "model"), "model", model)
    return doc.as_string()


def _write_new(path: Path, text: str, mode: int = 0o600) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return True


def init_home(home: Path, *, model_url: str | None = None, model: str | None = None) -> list[Path]:
    """Create what is missing of a home; return the paths created.

    Raises:
        CommandError: the home cannot be made there (one sentence: where, and why).
    """
    try:
        return _init_home(home, model_url=model_url, model=model)
    except OSError as exc:
        where = exc.filename or home
        raise CommandError(
            f"cannot make a boxmaker home at {home}: {where}: {exc.strerror or exc}"
        ) from None


def _init_home(home: Path, *, model_url: str | None, model: str | None) -> list[Path]:
    shipped = shipped_config_dir()
    created: list[Path] = []
    for directory in (home, home / "config", home / "grants"):
        if not directory.exists():
            directory.mkdir(mode=0o700, parents=True)
            created.append(directory)
        elif not directory.is_dir():
            raise CommandError(f"{directory} exists and is not a directory")
    config = home / "config"
    for name in ROLE_CONFIGS:
        template = (shipped / name).read_text(encoding="utf-8")
        text = _role_config(
            template,
            home,
            model_url if name == "loopd.toml" else None,
            model if name == "loopd.toml" else None,
        )
        if _write_new(config / name, text):
            created.append(config / name)
    for name in TEXT_FILES:
        if _write_new(config / name, (shipped / name).read_text(encoding="utf-8")):
            created.append(config / name)
    for grant in sorted((shipped / "grants").glob("*.toml")):
        if _write_new(home / "grants" / grant.name, grant.read_text(encoding="utf-8")):
            created.append(home / "grants" / grant.name)
    for name, shared in ((proto.APPROVAL_KEY, True), (proto.AUDIT_KEY, False)):
        key = home / name
        if not key.exists():
            try:
                proto.ensure_key(key, shared=shared)
            except (OSError, proto.KeyUnusable) as exc:
                raise CommandError(f"cannot create the key {key}: {exc}") from None
            created.append(key)
    return created
