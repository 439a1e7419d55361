"""`bxctl init`: a home with its configuration, ready for `bxctl up`.

The shipped files in the repository's `config/` are the templates: each role's config
is copied with `[paths] home` set to the new home (and the model's url and name when
given), beside system.md, the starter soul.md and the example grants. Nothing that
exists is ever overwritten, so running it twice is safe.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

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


_HOME_LINE = re.compile(r"^#\s*home\s*=.*$", re.MULTILINE)
_URL_LINE = re.compile(r"^url\s*=.*$", re.MULTILINE)
_MODEL_LINE = re.compile(r"^model\s*=.*$", re.MULTILINE)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _role_config(template: str, home: Path, model_url: str | None, model: str | None) -> str:
    text, count = _HOME_LINE.subn(f"home = {_toml_string(str(home))}", template, count=1)
    if count != 1:
        raise CommandError("a shipped config has no '# home = …' line to fill in")
    if model_url is not None:
        text = _URL_LINE.sub(f"url = {_toml_string(model_url)}", text, count=1)
    if model is not None:
        text = _MODEL_LINE.sub(f"model = {_toml_string(model)}", text, count=1)
    return text


def _write_new(path: Path, text: str, mode: int = 0o600) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return True


def init_home(home: Path, *, model_url: str | None = None, model: str | None = None) -> list[Path]:
    """Create what is missing of a home; return the paths created."""
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
    return created
