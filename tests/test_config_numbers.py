"""A bad number in any role's config is a start failure naming the key (issue 13, item 4).

`read_timeout_s = -1` used to be accepted by memoryd and loopd, then `move_on_after(-1)`
raised inside the server at the first connection and killed the role; `context_tokens`,
`max_tokens`, `timeout_s` and `max_steps` accepted 0 and -1.
"""

from __future__ import annotations

import typing
from pathlib import Path

import msgspec
import pytest
from roles import fail_to_start

import proto

CASES = [
    ("memoryd", "[sockets]\nread_timeout_s = -1\n", "$.sockets.read_timeout_s"),
    ("memoryd", "[sockets]\ndrain_s = 0\n", "$.sockets.drain_s"),
    ("brokerd", "[approvals]\ntimeout_s = 0\n", "$.approvals.timeout_s"),
    ("brokerd", "[memory]\ncall_timeout_s = -5\n", "$.memory.call_timeout_s"),
    ("loopd", "[sockets]\nread_timeout_s = -1\n", "$.sockets.read_timeout_s"),
    (
        "loopd",
        '[model]\nurl = "http://127.0.0.1:9/v1"\ncontext_tokens = 0\n',
        "$.model.context_tokens",
    ),
    ("loopd", '[model]\nurl = "http://127.0.0.1:9/v1"\nmax_tokens = -1\n', "$.model.max_tokens"),
    ("loopd", '[model]\nurl = "http://127.0.0.1:9/v1"\ntimeout_s = 0\n', "$.model.timeout_s"),
    ("loopd", '[model]\nurl = "http://127.0.0.1:9/v1"\nmax_steps = 0\n', "$.model.max_steps"),
    ("loopd", "[broker]\ncall_timeout_s = -1\n", "$.broker.call_timeout_s"),
]
RUNBOOK = {
    "memoryd": "memoryd-start-failed",
    "brokerd": "brokerd-start-failed",
    "loopd": "loopd-start-failed",
}


@pytest.mark.parametrize(("role", "toml", "key"), CASES, ids=[f"{r}-{k}" for r, _, k in CASES])
def test_a_bad_number_stops_the_role_at_start_naming_the_key(
    short_dir: Path, role: str, toml: str, key: str
) -> None:
    config = short_dir / f"{role}.toml"
    config.write_text(f'[paths]\nhome = "{short_dir / "home"}"\n' + toml)
    ended = fail_to_start(role, config, log=short_dir / f"{role}.log")
    assert ended.returncode == 1
    [line] = [line for line in ended.log.splitlines() if "cannot start" in line]
    assert key in line
    assert f"(runbook: {RUNBOOK[role]})" in line
    assert "Traceback" not in ended.log


@pytest.mark.parametrize(
    "kind", [proto.MemorydConfig, proto.BrokerdConfig, proto.LoopdConfig], ids=lambda k: k.__name__
)
def test_every_duration_and_count_of_every_config_refuses_zero(kind: type[msgspec.Struct]) -> None:
    # Walk the Struct: every number but a temperature is a duration or a count.
    checked = []
    for section in msgspec.structs.fields(kind):
        for field in msgspec.structs.fields(section.type):
            base = typing.get_args(field.type)[0] if typing.get_origin(field.type) else field.type
            if base in (int, float) and field.name != "temperature":
                checked.append(field.name)
                with pytest.raises(msgspec.ValidationError, match=field.name):
                    msgspec.convert({section.name: {field.name: 0}}, kind)
    assert {"read_timeout_s", "drain_s"} <= set(checked)
