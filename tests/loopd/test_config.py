"""loopd.toml: defaults, unknown keys, and the embedded model's address."""

from __future__ import annotations

from pathlib import Path

import pytest

import proto
from loopd._config import load_settings
from proto import EMBEDDED_URL_ENV


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_embedded_needs_the_address_bxctl_up_passes(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(short_dir / "loopd.toml", f'[paths]\nhome = "{short_dir}"\n')
    monkeypatch.delenv(EMBEDDED_URL_ENV, raising=False)
    with pytest.raises(proto.ConfigError, match="start boxmaker with `bxctl up`"):
        load_settings(config)
    monkeypatch.setenv(EMBEDDED_URL_ENV, "http://127.0.0.1:41234/v1")
    settings = load_settings(config)
    assert settings.model.url == "http://127.0.0.1:41234/v1"
    # text only by default, and so it streams (no tools are sent with "none")
    assert (settings.model.tool_choice, settings.model.stream) == ("none", True)
    config.write_text(config.read_text() + '[model]\ntool_choice = "auto"\n')
    tools = load_settings(config)
    assert (tools.model.tool_choice, tools.model.stream) == ("auto", False)  # cannot stream


def test_a_real_url_is_used_as_it_is(short_dir: Path) -> None:
    config = write(
        short_dir / "loopd.toml", '[model]\nurl = "http://10.1.2.3:8000/v1"\nstream = true\n'
    )
    settings = load_settings(config)
    assert (settings.model.url, settings.model.stream) == ("http://10.1.2.3:8000/v1", True)
    assert settings.system_prompt == short_dir / "system.md"


def test_unknown_keys_name_the_key(short_dir: Path) -> None:
    config = write(short_dir / "loopd.toml", '[model]\nurll = "x"\n')
    with pytest.raises(proto.ConfigError, match="unknown field `urll`"):
        load_settings(config)


def test_the_shipped_config_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBEDDED_URL_ENV, "http://127.0.0.1:1/v1")
    shipped = Path(__file__).parents[2] / "config" / "loopd.toml"
    assert load_settings(shipped).model.max_steps == 16


def test_tool_choice_defaults(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBEDDED_URL_ENV, "http://127.0.0.1:1/v1")
    embedded = write(short_dir / "a.toml", "")
    assert load_settings(embedded).model.tool_choice == "none"
    trying = write(short_dir / "b.toml", '[model]\ntool_choice = "auto"\n')
    assert load_settings(trying).model.tool_choice == "auto"
    real = write(short_dir / "c.toml", '[model]\nurl = "http://10.0.0.1/v1"\n')
    assert load_settings(real).model.tool_choice is None  # the request says "auto"
