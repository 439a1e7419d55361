"""`bxctl init`'s role configs: the shipped templates with their values set, comments kept."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bxctl import CommandError
from bxctl._init import _role_config, init_home, shipped_config_dir

TEMPLATES = {
    name: (shipped_config_dir() / name).read_text()
    for name in ("memoryd.toml", "brokerd.toml", "loopd.toml")
}
HOME_COMMENT = "# default: $BOXMAKER_HOME, then ~/.boxmaker"


def comment_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.lstrip().startswith("#")]


def is_commented_home(line: str) -> bool:
    return line.removeprefix("#").lstrip().startswith("home =")


def line_of(text: str, key: str) -> str:
    (line,) = [line for line in text.split("\n") if line.startswith(f"{key} = ")]
    return line


@given(home=st.text(), url=st.text() | st.none(), model=st.text() | st.none())
def test_values_round_trip_and_every_comment_stays(
    home: str, url: str | None, model: str | None
) -> None:
    for name, template in TEMPLATES.items():
        is_loopd = name == "loopd.toml"
        text = _role_config(
            template, Path(home), url if is_loopd else None, model if is_loopd else None
        )
        expected: dict[str, Any] = tomllib.loads(template)
        expected["paths"]["home"] = str(Path(home))
        if is_loopd and url is not None:
            expected["model"]["url"] = url
        if is_loopd and model is not None:
            expected["model"]["model"] = model
        assert tomllib.loads(text) == expected
        assert msgspec.toml.decode(text) == expected
        # Every comment line is still there, in order; the commented-out `home` became
        # the key itself, keeping its explanation.
        kept = [line for line in comment_lines(template) if not is_commented_home(line)]
        assert comment_lines(text) == kept
        assert text.split("\n")[text.split("\n").index("[paths]") + 1].startswith("home = ")
        assert line_of(text, "home").endswith(" " + HOME_COMMENT)
        if is_loopd:
            for key in ("url", "model"):
                comment = line_of(template, key).partition("  #")[2]
                assert line_of(text, key).endswith(" #" + comment)


def test_the_home_line_is_filled_in_where_it_was() -> None:
    text = _role_config(TEMPLATES["memoryd.toml"], Path("/srv/bx"), None, None)
    assert text == TEMPLATES["memoryd.toml"].replace(
        '# home = "~/.boxmaker"          # default',
        'home = "/srv/bx"                # default',
    )


def test_loopd_keeps_the_lines_tests_and_owners_edit() -> None:
    text = _role_config(TEMPLATES["loopd.toml"], Path("/srv/bx"), "http://h/v1", "qwen")
    lines = text.split("\n")
    assert "stream = true                     # stream answers as they are written (SSE)" in lines
    assert any(line.startswith('# tool_choice = "auto"') for line in lines)
    assert 'url = "http://h/v1"               # "embedded": the tiny demo model' in text


def test_a_template_without_the_home_line_is_refused() -> None:
    with pytest.raises(CommandError, match="no '# home = …' line"):
        _role_config("[paths]\n# socket = 'x'\n", Path("/srv/bx"), None, None)


def test_init_writes_private_files_and_never_overwrites(tmp_path: Path) -> None:
    home = tmp_path / "home"
    created = init_home(home, model_url="http://h/v1", model="qwen")
    assert home in created
    assert home / "config" / "loopd.toml" in created
    for path in created:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path
    (home / "config" / "loopd.toml").write_text("mine")
    assert init_home(home, model_url="http://other/v1") == []
    assert (home / "config" / "loopd.toml").read_text() == "mine"
